import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { Section, Table } from "../components.tsx";
import { Layout, type PageCtx } from "../layout.tsx";
import { pageContext, renderPage } from "../session.tsx";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the page reads the generated OpenAPI document as plain JSON
type Json = any;

/** The tags in the order a newcomer meets them; any other tag follows, alphabetically. */
const TAG_ORDER = ["setup", "auth", "users", "settings", "projects", "builds", "runners", "jobs", "artifacts", "webhooks", "notifications", "meta"];
const TAG_TITLES: Record<string, string> = {
  setup: "Setup",
  auth: "Sign-in",
  users: "Users and audit",
  settings: "Settings",
  projects: "Projects, pipelines, credentials",
  builds: "Builds and logs",
  runners: "Runners",
  jobs: "Runner jobs (runner token)",
  artifacts: "Artifacts",
  webhooks: "Inbound webhooks",
  notifications: "Notifications",
  meta: "This reference",
};

interface Listed {
  method: string;
  path: string;
  op: Json;
}

function byTag(doc: Json): Array<[string, Listed[]]> {
  const groups = new Map<string, Listed[]>();
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(ops)) {
      const tag = (op.tags?.[0] as string | undefined) ?? "other";
      groups.set(tag, [...(groups.get(tag) ?? []), { method, path, op }]);
    }
  }
  const rank = (tag: string) => (TAG_ORDER.includes(tag) ? TAG_ORDER.indexOf(tag) : TAG_ORDER.length);
  return [...groups.entries()].sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
}

/** A schema in one line: `{id, name, …}`, `[{…}]`, `string`; required fields of a request are marked with `*`. */
function shape(schema: Json, required = false, depth = 0): string {
  if (!schema || typeof schema !== "object") return "any";
  if (schema.$ref) return String(schema.$ref).split("/").pop() ?? "object";
  if (schema.anyOf || schema.oneOf) return ((schema.anyOf ?? schema.oneOf) as Json[]).map((s) => shape(s, required, depth)).join(" | ");
  if (schema.type === "array") return `[${shape(schema.items, required, depth)}]`;
  if (schema.type === "object" || schema.properties) {
    const props = Object.keys(schema.properties ?? {});
    if (props.length === 0) return schema.additionalProperties && typeof schema.additionalProperties === "object" ? "{name: value, …}" : "object";
    if (depth >= 1) return "{…}";
    const req = new Set<string>((schema.required ?? []) as string[]);
    return `{${props.map((p) => (required && req.has(p) ? `${p}*` : p)).join(", ")}}`;
  }
  if (schema.enum) return (schema.enum as unknown[]).map((v) => JSON.stringify(v)).join(" | ");
  if (Array.isArray(schema.type)) return schema.type.join(" | ");
  return String(schema.type ?? "any");
}

function access(op: Json): string {
  const schemes = ((op.security ?? []) as Json[]).flatMap((s) => Object.keys(s));
  if (schemes.length === 0) return "public";
  const who = schemes
    .map((s) => ({ userSession: "user session", setupSession: "setup session", runnerToken: "runner token", jobToken: "job token" })[s] ?? s)
    .join(" or ");
  const roles = op["x-roles"] as string[] | undefined;
  return roles ? `${who}: ${roles.join(", ")}` : who;
}

function RequestSummary(props: { op: Json }) {
  const params = ((props.op.parameters ?? []) as Json[]).filter((p) => p.in !== "path");
  const content = props.op.requestBody?.content as Record<string, Json> | undefined;
  const [type, media] = content ? Object.entries(content)[0]! : [undefined, undefined];
  if (params.length === 0 && !type) return <span class="muted">–</span>;
  return (
    <>
      {params.length > 0 ? (
        <div>
          {params.map((p) => (
            <code>{`${p.in === "header" ? "" : "?"}${p.name}${p.required ? "*" : ""} `}</code>
          ))}
        </div>
      ) : null}
      {type ? <div>{type === "application/json" ? <code>{shape(media.schema, true)}</code> : <span>{type}</span>}</div> : null}
    </>
  );
}

function ResponseSummary(props: { op: Json }) {
  const entries = Object.entries(props.op.responses as Record<string, Json>).filter(([status]) => status !== "default");
  return (
    <>
      {entries.map(([status, r]) => {
        const content = r.content as Record<string, Json> | undefined;
        const [type, media] = content ? Object.entries(content)[0]! : [undefined, undefined];
        const codes = r["x-error-codes"] as string[] | undefined;
        return (
          <div>
            <strong>{status}</strong>{" "}
            {codes ? (
              <span class="muted">{codes.join(", ")}</span>
            ) : type === "application/json" ? (
              <code>{shape(media.schema)}</code>
            ) : type ? (
              <span>{type}</span>
            ) : (
              <span class="muted">{r.description}</span>
            )}
          </div>
        );
      })}
    </>
  );
}

function ApiPage(props: { ctx: PageCtx; doc: Json }) {
  const groups = byTag(props.doc);
  const count = groups.reduce((n, [, ops]) => n + ops.length, 0);
  return (
    <Layout ctx={props.ctx} title="API reference">
      <h1>API reference</h1>
      <p>
        {count} operations of Hangar {props.doc.info.version}, generated from the routes and the schemas they validate and answer with. The
        machine-readable document: <a href="/v1/openapi.json">/v1/openapi.json</a> (OpenAPI 3.1, with an example request for every operation).
      </p>
      <p class="muted">
        Send credentials as <code>Authorization: Bearer &lt;token&gt;</code>. Every error body is <code>{"{code, message[, issues]}"}</code>. Fields
        marked <code>*</code> are required; times are Unix seconds.
      </p>
      <nav aria-label="Areas">
        <p>
          {groups.map(([tag], i) => (
            <>
              {i > 0 ? " · " : ""}
              <a href={`#api-${tag}`}>{TAG_TITLES[tag] ?? tag}</a>
            </>
          ))}
        </p>
      </nav>
      {groups.map(([tag, ops]) => (
        <Section title={TAG_TITLES[tag] ?? tag} id={`api-${tag}`}>
          <Table headers={["Operation", "Summary", "Access", "Request", "Responses"]}>
            {ops.map(({ method, path, op }) => (
              <tr id={op.operationId}>
                <td>
                  <code>
                    {method.toUpperCase()} {path}
                  </code>
                </td>
                <td>{op.summary}</td>
                <td>{access(op)}</td>
                <td>
                  <RequestSummary op={op} />
                </td>
                <td>
                  <ResponseSummary op={op} />
                </td>
              </tr>
            ))}
          </Table>
        </Section>
      ))}
    </Layout>
  );
}

/**
 * GET /api: the OpenAPI document as a plain server-rendered page (docs/decisions.md). Public like the document itself. It
 * is given the document (built by createApp from the finished route table), so it always lists what
 * /v1/openapi.json says; this is why it is mounted in createApp rather than in the web page list.
 */
export function apiPages(deps: Pick<AppDeps, "clock">, document: () => unknown) {
  return new Hono<AppEnv>().get("/api", (c) => renderPage(c, <ApiPage ctx={pageContext(c, deps)} doc={document()} />));
}
