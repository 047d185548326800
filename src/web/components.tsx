// The design system's building blocks. Every string child and attribute is escaped by hono/jsx; strings
// from outside (names, emails, branches, IdP claims) go through <Name> so that bidi controls are shown
// neutralised as well. No style="" attributes: the CSP allows our stylesheet only.
import type { Child } from "hono/jsx";
import { hasHiddenCharacters, isoTime, neutralise, relativeTime, shortTime } from "./text.ts";

/** A name, email or other outside string: bidi controls made visible, isolated from the text around it. */
export function Name(props: { value: string | null | undefined; fallback?: string }) {
  const value = props.value ?? "";
  if (value === "") return <span class="muted">{props.fallback ?? "–"}</span>;
  const hidden = hasHiddenCharacters(value);
  return (
    <bdi class={hidden ? "name suspicious" : "name"} title={hidden ? "contains hidden formatting characters, shown as <U+…>" : undefined}>
      {neutralise(value)}
    </bdi>
  );
}

type ButtonVariant = "primary" | "secondary" | "danger" | "link";

/** A submit button (inside a <form>) or, with `href`, a link styled as one. */
export function Button(props: {
  children: Child;
  variant?: ButtonVariant;
  href?: string;
  name?: string;
  value?: string;
  type?: "submit" | "button";
  id?: string;
  "data-copy"?: string;
  disabled?: boolean;
}) {
  const cls = `btn btn-${props.variant ?? "primary"}`;
  if (props.href !== undefined) {
    return (
      <a class={cls} href={props.href} id={props.id}>
        {props.children}
      </a>
    );
  }
  return (
    <button
      class={cls}
      type={props.type ?? "submit"}
      name={props.name}
      value={props.value}
      id={props.id}
      data-copy={props["data-copy"]}
      disabled={props.disabled}
    >
      {props.children}
    </button>
  );
}

/** A POST form to a page route; the server checks the Origin, so no hidden token is needed. */
export function PostForm(props: { action: string; children: Child; class?: string; id?: string }) {
  return (
    <form method="post" action={props.action} class={props.class} id={props.id}>
      {props.children}
    </form>
  );
}

/** One labelled input with an optional hint and error; the error is tied to the input for screen readers. */
export function Field(props: {
  label: string;
  name: string;
  type?: string;
  value?: string | null;
  error?: string | null;
  hint?: Child;
  required?: boolean;
  placeholder?: string;
  autocomplete?: string;
  id?: string;
  list?: string;
  inputmode?: "text" | "email" | "url" | "numeric";
  spellcheck?: boolean;
  autofocus?: boolean;
}) {
  const id = props.id ?? `f-${props.name}`;
  const describedBy = [props.hint ? `${id}-hint` : "", props.error ? `${id}-error` : ""].filter(Boolean).join(" ") || undefined;
  return (
    <div class={props.error ? "field has-error" : "field"}>
      <label for={id}>{props.label}</label>
      <input
        id={id}
        name={props.name}
        type={props.type ?? "text"}
        value={props.value ?? undefined}
        required={props.required}
        placeholder={props.placeholder}
        autocomplete={props.autocomplete}
        list={props.list}
        inputmode={props.inputmode}
        spellcheck={props.spellcheck}
        autofocus={props.autofocus}
        aria-invalid={props.error ? "true" : undefined}
        aria-describedby={describedBy}
      />
      {props.hint ? (
        <p class="hint" id={`${id}-hint`}>
          {props.hint}
        </p>
      ) : null}
      {props.error ? (
        <p class="error" id={`${id}-error`} role="alert">
          {props.error}
        </p>
      ) : null}
    </div>
  );
}

/** A labelled multi-line input. */
export function TextArea(props: {
  label: string;
  name: string;
  value?: string | null;
  error?: string | null;
  hint?: Child;
  rows?: number;
  id?: string;
}) {
  const id = props.id ?? `f-${props.name}`;
  return (
    <div class={props.error ? "field has-error" : "field"}>
      <label for={id}>{props.label}</label>
      <textarea id={id} name={props.name} rows={props.rows ?? 3} aria-invalid={props.error ? "true" : undefined}>
        {props.value ?? ""}
      </textarea>
      {props.hint ? <p class="hint">{props.hint}</p> : null}
      {props.error ? (
        <p class="error" role="alert">
          {props.error}
        </p>
      ) : null}
    </div>
  );
}

/** A labelled <select>. */
export function Select(props: {
  label: string;
  name: string;
  options: readonly { value: string; label: string }[];
  value?: string | null;
  error?: string | null;
  hint?: Child;
  id?: string;
  compact?: boolean;
  /** The id of an element shown only while "custom" is selected (with JavaScript; always shown without). */
  customToggle?: string;
}) {
  const id = props.id ?? `f-${props.name}`;
  return (
    <div class={props.compact ? "field compact" : props.error ? "field has-error" : "field"}>
      <label for={id} class={props.compact ? "visually-hidden" : undefined}>
        {props.label}
      </label>
      <select id={id} name={props.name} data-custom-toggle={props.customToggle}>
        {props.options.map((o) => (
          <option value={o.value} selected={o.value === props.value}>
            {neutralise(o.label)}
          </option>
        ))}
      </select>
      {props.hint ? <p class="hint">{props.hint}</p> : null}
      {props.error ? (
        <p class="error" role="alert">
          {props.error}
        </p>
      ) : null}
    </div>
  );
}

/** A labelled radio group (a <fieldset>); each choice may carry a description. */
export function RadioGroup(props: {
  legend: string;
  name: string;
  options: readonly { value: string; label: string; description?: Child }[];
  value?: string | null;
  error?: string | null;
}) {
  return (
    <fieldset class={props.error ? "field radios has-error" : "field radios"}>
      <legend>{props.legend}</legend>
      {props.options.map((o) => (
        <label class="radio">
          <input type="radio" name={props.name} value={o.value} checked={o.value === props.value} />
          <span>
            <strong>{o.label}</strong>
            {o.description ? <span class="hint">{o.description}</span> : null}
          </span>
        </label>
      ))}
      {props.error ? (
        <p class="error" role="alert">
          {props.error}
        </p>
      ) : null}
    </fieldset>
  );
}

/** A labelled checkbox. */
export function Checkbox(props: { label: string; name: string; checked?: boolean; hint?: Child; value?: string }) {
  return (
    <div class="field checkbox">
      <label>
        <input type="checkbox" name={props.name} value={props.value ?? "1"} checked={props.checked} /> {props.label}
      </label>
      {props.hint ? <p class="hint">{props.hint}</p> : null}
    </div>
  );
}

/** A table whose header is given as labels; rows are <tr> children. Scrolls sideways on narrow screens. */
export function Table(props: { headers: readonly string[]; children: Child; caption?: string; id?: string }) {
  return (
    <div class="table-wrap">
      <table id={props.id}>
        {props.caption ? <caption>{props.caption}</caption> : null}
        <thead>
          <tr>
            {props.headers.map((h) => (
              <th scope="col">{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </div>
  );
}

const BADGE_TONES: Record<string, string> = {
  succeeded: "ok",
  online: "ok",
  active: "ok",
  passed: "ok",
  running: "info",
  assigned: "info",
  scheduled: "info",
  busy: "info",
  queued: "wait",
  invited: "wait",
  draining: "wait",
  pending: "wait",
  failed: "bad",
  timed_out: "bad",
  disabled: "off",
  offline: "off",
  canceled: "off",
  expired: "off",
};

/** A status word as a coloured badge; the word itself is always shown (colour is never the only signal). */
export function StatusBadge(props: { status: string; label?: string }) {
  const tone = BADGE_TONES[props.status] ?? "neutral";
  return <span class={`badge badge-${tone}`}>{props.label ?? props.status.replace(/_/g, " ")}</span>;
}

/** What a list shows when it has nothing yet, with the next step to take. */
export function EmptyState(props: { title: string; children?: Child }) {
  return (
    <div class="empty">
      <p class="empty-title">{props.title}</p>
      {props.children ? <div class="empty-body">{props.children}</div> : null}
    </div>
  );
}

export type FlashKind = "ok" | "error" | "info";
export interface FlashMessage {
  kind: FlashKind;
  text: string;
}

/** A message after an action (success, failure, notice). Errors are announced to screen readers. */
export function Flash(props: { flash: FlashMessage | null | undefined }) {
  if (!props.flash) return null;
  return (
    <div class={`flash flash-${props.flash.kind}`} role={props.flash.kind === "error" ? "alert" : "status"}>
      {neutralise(props.flash.text)}
    </div>
  );
}

/** A timestamp: readable UTC text, machine-readable datetime, and how long ago as a tooltip. */
export function Time(props: { at: number | null | undefined; now?: number }) {
  if (props.at === null || props.at === undefined) return <span class="muted">–</span>;
  return (
    <time datetime={isoTime(props.at)} title={props.now !== undefined ? relativeTime(props.at, props.now) : undefined}>
      {shortTime(props.at)}
    </time>
  );
}

/**
 * A read-only value with a Copy button (commands, tokens, URLs). The button works through /assets/hangar.js;
 * with JavaScript off the text is still selectable.
 */
export function CopyField(props: { id: string; label: string; value: string; multiline?: boolean }) {
  return (
    <div class="copy-field">
      <label for={props.id}>{props.label}</label>
      <div class="copy-row">
        {props.multiline ? (
          <textarea id={props.id} readonly rows={Math.min(8, props.value.split("\n").length + 1)} spellcheck={false}>
            {props.value}
          </textarea>
        ) : (
          <input id={props.id} readonly value={props.value} spellcheck={false} />
        )}
        <button type="button" class="btn btn-secondary copy-btn" data-copy={`#${props.id}`} hidden>
          Copy
        </button>
      </div>
    </div>
  );
}

/** A section of a page with a heading and an optional description. */
export function Section(props: { title: string; id?: string; children: Child; description?: Child }) {
  return (
    <section class="card" id={props.id} aria-labelledby={props.id ? `${props.id}-title` : undefined}>
      <h2 id={props.id ? `${props.id}-title` : undefined}>{props.title}</h2>
      {props.description ? <p class="section-desc">{props.description}</p> : null}
      {props.children}
    </section>
  );
}
