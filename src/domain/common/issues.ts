import type { ValidationIssue } from "../../errors.ts";

interface IssueLike {
  path: PropertyKey[];
  message: string;
  code?: string;
  /** unrecognized_keys: the unknown keys of the object at `path`. */
  keys?: readonly string[];
  /** invalid_union: each option's own issues, relative to `path`. */
  errors?: readonly (readonly IssueLike[])[];
}

/**
 * zod issues as `{path, message}`. An unknown key is named by its own path (`config.steps.0.runs`, docs/api.md §5),
 * not its object's; a union whose input had the right shape for one option reports that option's issues.
 */
export function toIssues(issues: readonly IssueLike[], prefix: PropertyKey[] = []): ValidationIssue[] {
  return issues.flatMap((i): ValidationIssue[] => {
    const path = [...prefix, ...i.path];
    if (i.code === "unrecognized_keys" && i.keys?.length) {
      return i.keys.map((key) => ({ path: [...path, key].map(String).join("."), message: `unknown key "${key}"` }));
    }
    if (i.code === "invalid_union" && i.errors) {
      // Options refused for their type at the root are the ones the input was never meant to be.
      const fitting = i.errors.filter((e) => !e.some((x) => x.code === "invalid_type" && x.path.length === 0));
      if (fitting.length === 1) return toIssues(fitting[0]!, path);
    }
    return [{ path: path.map(String).join("."), message: i.message }];
  });
}
