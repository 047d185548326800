import { isMap, isScalar, LineCounter, parseDocument, type Document, type Node as YamlNode } from "yaml";
import { z } from "zod";
import { toIssues } from "../common/issues.ts";
import { fileScheduleSchema, pipelineConfigSchema, type PipelineConfig } from "./projects.ts";

/** The pipeline file's size cap (docs/pipelines.md): a larger file is `config_unavailable`, never parsed. */
export const MAX_PIPELINE_FILE_BYTES = 256 * 1024;

/** One problem of a pipeline file: `path` dotted from the file's root, `line` and `column` 1-based. */
export interface FileIssue {
  path: string;
  message: string;
  line: number;
  column: number;
}

/**
 * The pipeline file (YAML 1.2; JSON is YAML): `pipelines` maps names to the same config schema stored pipelines
 * use, `schedules` lists `{pipeline, cron, branch?, timezone?}`. Unknown keys anywhere are errors.
 */
export const pipelineFileSchema = z.lazy(() =>
  z.strictObject({
    pipelines: z.record(z.string().trim().min(1).max(100), pipelineConfigSchema),
    schedules: z.array(fileScheduleSchema).max(100).optional(),
  }),
);
export type PipelineFile = z.infer<typeof pipelineFileSchema>;

export type ParsedPipelineFile =
  | { ok: true; file: PipelineFile; names: string[] }
  /** `names`: the pipelines the file names even though it is invalid (their builds fail visibly). */
  | { ok: false; issues: FileIssue[]; names: string[]; triggersOf: (name: string) => PipelineConfig["triggers"] | "unreadable" };

/**
 * Parses and validates a pipeline file, locating every problem in the text. The `yaml` package keeps each node's
 * source range; a zod issue's path is walked down the document to the node (for an unknown key, the key itself).
 */
export function parsePipelineFile(content: string): ParsedPipelineFile {
  const lineCounter = new LineCounter();
  const doc = parseDocument(content, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const at = (offset: number) => {
    const pos = lineCounter.linePos(offset);
    return { line: pos.line, column: pos.col };
  };
  if (doc.errors.length > 0) {
    const issues = doc.errors.map((e) => ({ path: "", message: e.message.split("\n")[0] ?? "YAML syntax error", ...at(e.pos[0]) }));
    return { ok: false, issues, names: [], triggersOf: () => "unreadable" };
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    return {
      ok: false,
      issues: [{ path: "", message: err instanceof Error ? err.message : "unreadable YAML", line: 1, column: 1 }],
      names: [],
      triggersOf: () => "unreadable",
    };
  }
  const names = pipelineNames(data);
  const result = pipelineFileSchema.safeParse(data);
  if (result.success) {
    const unknown = result.data.schedules?.filter((s) => !(s.pipeline in result.data.pipelines)) ?? [];
    if (unknown.length === 0) return { ok: true, file: result.data, names: Object.keys(result.data.pipelines) };
    const issues = (result.data.schedules ?? []).flatMap((s, i) =>
      s.pipeline in result.data.pipelines
        ? []
        : [locate(doc, ["schedules", i, "pipeline"], `no pipeline named "${s.pipeline}" in this file`, false, at)],
    );
    return { ok: false, issues, names, triggersOf: (name) => triggersOf(data, name) };
  }
  const issues = toIssues(result.error.issues).map((issue) => {
    const path = issue.path === "" ? [] : issue.path.split(".").map((p) => (/^\d+$/.test(p) ? Number(p) : p));
    return locate(doc, path, issue.message, issue.message.startsWith("unknown key"), at);
  });
  return { ok: false, issues, names, triggersOf: (name) => triggersOf(data, name) };
}

function pipelineNames(data: unknown): string[] {
  if (typeof data !== "object" || data === null) return [];
  const pipelines = (data as { pipelines?: unknown }).pipelines;
  if (typeof pipelines !== "object" || pipelines === null || Array.isArray(pipelines)) return [];
  return Object.keys(pipelines).filter((n) => n.trim().length > 0 && n.length <= 100);
}

/** A named pipeline's triggers in an invalid file, when they alone are readable (which builds fail visibly). */
function triggersOf(data: unknown, name: string): PipelineConfig["triggers"] | "unreadable" {
  const raw = ((data as { pipelines?: Record<string, unknown> }).pipelines?.[name] ?? {}) as { triggers?: unknown };
  if (typeof raw !== "object" || raw === null || raw.triggers === undefined) return undefined;
  const parsed = pipelineConfigSchema.safeParse({ platform: "any", steps: ["x"], triggers: raw.triggers });
  return parsed.success ? parsed.data.triggers : "unreadable";
}

/**
 * The deepest node of the document on `path` and its position; an unknown key points at the key, anything else
 * at the value. A path that leaves the document (a missing key) stops at the nearest node that exists.
 */
function locate(
  doc: Document,
  path: (string | number)[],
  message: string,
  isUnknownKey: boolean,
  at: (offset: number) => { line: number; column: number },
): FileIssue {
  let node: YamlNode | null = doc.contents as YamlNode | null;
  let offset = node?.range?.[0] ?? 0;
  for (let i = 0; i < path.length && node; i++) {
    const segment = path[i]!;
    const last = i === path.length - 1;
    if (isMap(node)) {
      const pair = node.items.find((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === String(segment));
      if (!pair) break;
      const keyNode = pair.key as YamlNode | null;
      if (last && isUnknownKey && keyNode?.range) {
        offset = keyNode.range[0];
        break;
      }
      node = (pair.value as YamlNode | null) ?? keyNode;
    } else {
      const items = (node as { items?: unknown[] }).items;
      const next = Array.isArray(items) ? (items[Number(segment)] as YamlNode | undefined) : undefined;
      if (!next) break;
      node = next;
    }
    if (node?.range) offset = node.range[0];
  }
  return { path: path.map(String).join("."), message, ...at(offset) };
}
