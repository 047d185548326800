/**
 * Checking a submitted form: every page validates a form post with the API's own zod schema and reads the same
 * issues the API would answer with (`{path, message}`, docs/api.md §2), so a rule is written once and a form and the
 * API cannot disagree about what is valid. Only the words differ: a form shows sentences beside its fields.
 */
import type { ZodType, z } from "zod";
import { toIssues } from "../domain/common/issues.ts";
import type { ValidationIssue } from "../errors.ts";
import { sentence } from "./errors.tsx";

export type FormCheck<T> = { ok: true; data: T } | { ok: false; issues: ValidationIssue[] };

/** Validates a form's values with an API schema; a failure carries the issues the API would answer. */
export function checkForm<T extends ZodType>(schema: T, input: unknown): FormCheck<z.infer<T>> {
  const parsed = schema.safeParse(input);
  return parsed.success ? { ok: true, data: parsed.data } : { ok: false, issues: toIssues(parsed.error.issues) };
}

/** The API field an issue is about: the first element of its path (`config.steps.0.run` → `config`). */
export function issueField(issue: ValidationIssue): string {
  return issue.path.split(".")[0] ?? "";
}

export interface FieldErrorWords {
  /** The form's own sentence for a field, in place of the schema's message. */
  wording?: Record<string, string>;
  /** The form field an API field is typed into, where their names differ. */
  fieldNames?: Record<string, string>;
  /** The sentence for an issue without its own wording (default: the schema's message as a sentence). */
  message?: (issue: ValidationIssue, field: string) => string;
}

/** The first issue of each field, as form field → the sentence shown beside it. */
export function fieldErrors(issues: readonly ValidationIssue[], words: FieldErrorWords = {}): Record<string, string> {
  const errors: Record<string, string> = {};
  for (const issue of issues) {
    const apiField = issueField(issue);
    const field = words.fieldNames?.[apiField] ?? apiField;
    errors[field] ??= words.wording?.[field] ?? words.message?.(issue, field) ?? sentence(issue.message);
  }
  return errors;
}

/** The first issue's message, for a form that shows one line (a single-value schema's only problem). */
export function firstMessage(issues: readonly ValidationIssue[], fallback = ""): string {
  return issues[0]?.message ?? fallback;
}
