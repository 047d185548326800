import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ApiError, ERROR_STATUS, type ErrorCode, SECOND_STATUS } from "../src/errors.ts";
import { makeTestApp } from "./helpers/app.ts";

// The code-to-status table of src/errors.ts against what the documents promise: every code a document names
// with a status is in the table with that status (or is one of the spec's two second statuses).

/** Whether the table answers `code` with `status`. */
function tableAnswers(code: string, status: number): boolean {
  if (!(code in ERROR_STATUS)) return false;
  const known = code as ErrorCode;
  return ERROR_STATUS[known] === status || (SECOND_STATUS as Partial<Record<ErrorCode, number>>)[known] === status;
}

/** [status, code] of every row of docs/spec.md's "Errors" tables (a status cell followed by a cell of codes). */
function specErrorRows(): [number, string][] {
  const spec = readFileSync(new URL("../docs/spec.md", import.meta.url), "utf8");
  const section = spec.slice(spec.indexOf("\n## Errors"), spec.indexOf("\n## Limits"));
  const rows: [number, string][] = [];
  for (const line of section.split("\n")) {
    if (!line.startsWith("|")) continue;
    const cells = line.split("|").map((cell) => cell.trim());
    const at = cells.findIndex((cell) => /^\d{3}$/.test(cell));
    if (at < 0) continue;
    const codes = (cells[at + 1] ?? "").split(",").map((code) => code.trim());
    // The install-link table names conditions, not codes: only snake_case words are codes.
    if (!codes.every((code) => /^[a-z][a-z_]*$/.test(code))) continue;
    for (const code of codes) rows.push([Number(cells[at]), code]);
  }
  return rows;
}

/** [status, code] of every "NNN `code`" in docs/api.md (§2's generic codes and every later section's). */
function apiDocErrors(): [number, string][] {
  const api = readFileSync(new URL("../docs/api.md", import.meta.url), "utf8");
  return [...api.matchAll(/\b([1-5]\d{2}) `([a-z_]+)`/g)].map((m) => [Number(m[1]), m[2] as string]);
}

describe("the error table (src/errors.ts)", () => {
  it("answers every error row of docs/spec.md with the spec's status", () => {
    const rows = specErrorRows();
    // The spec's tables hold more than 100 code rows: a parse that finds few has lost the tables.
    expect(rows.length).toBeGreaterThan(100);
    expect(rows.filter(([status, code]) => !tableAnswers(code, status))).toEqual([]);
  });

  it("answers every status and code docs/api.md names with that status", () => {
    const found = apiDocErrors();
    expect(found).toEqual(
      expect.arrayContaining([
        [400, "invalid_input"],
        [404, "not_found"],
        [500, "internal_error"],
      ]),
    );
    expect(found.filter(([status, code]) => !tableAnswers(code, status))).toEqual([]);
  });

  it("gives a thrown error its code's status, and the second status only where the spec has one", () => {
    expect(new ApiError("invalid_state", "x").status).toBe(409);
    expect(ApiError.withSecondStatus("invalid_state", "x").status).toBe(400);
    expect(new ApiError("user_not_found", "x").status).toBe(403);
    expect(ApiError.withSecondStatus("user_not_found", "x").status).toBe(404);
    expect(new ApiError("upload_too_large", "x").status).toBe(413);
  });

  it("agrees with every status and code the OpenAPI document lists", async () => {
    const t = await makeTestApp();
    const doc = (await t.call("GET", "/v1/openapi.json")).body as {
      paths: Record<string, Record<string, { responses: Record<string, { "x-error-codes"?: string[] }> }>>;
    };
    const disagreements: string[] = [];
    let listed = 0;
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const [status, response] of Object.entries(op.responses)) {
          for (const code of response["x-error-codes"] ?? []) {
            listed++;
            if (!tableAnswers(code, Number(status))) disagreements.push(`${method.toUpperCase()} ${path}: ${status} ${code}`);
          }
        }
      }
    }
    expect(listed).toBeGreaterThan(100);
    expect(disagreements).toEqual([]);
  });
});
