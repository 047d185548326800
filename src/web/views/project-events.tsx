// The project page's webhook and notification sections as HTML: view components only; the routes that change them
// and the loader of what they list are src/web/pages/project-events.tsx.
import { FORGE_PROVIDERS, NOTIFICATION_EVENTS, NOTIFICATION_KINDS, type ForgeProvider, type NotificationKind } from "../../db/schema/constants.ts";
import type { NotificationRow } from "../../domain/events/notifications.ts";
import type { listTargetAttempts } from "../../domain/events/outbox.ts";
import type { listWebhookDeliveries, WebhookRow } from "../../domain/events/webhooks.ts";
import type { ProjectRow } from "../../domain/projects/projects.ts";
import { Button, Checkbox, CopyField, EmptyState, Field, Name, PostForm, Section, Select, StatusBadge, Table, Time } from "../components.tsx";
import type { PageCtx } from "../layout.tsx";

export const PROVIDER_LABELS: Record<ForgeProvider, string> = {
  github: "GitHub",
  gitlab: "GitLab",
  gitea: "Gitea",
  forgejo: "Forgejo",
  bitbucket: "Bitbucket",
};

export const KIND_LABELS: Record<NotificationKind, string> = {
  slack: "Slack",
  discord: "Discord",
  teams: "Microsoft Teams",
  webhook: "Signed webhook (Standard Webhooks)",
};

const KIND_URL_HINTS: Record<NotificationKind, string> = {
  slack: "Slack: an incoming webhook URL (https://hooks.slack.com/services/…).",
  discord: "Discord: the channel's webhook URL (Server settings → Integrations → Webhooks).",
  teams: "Teams: the URL of a Workflows “When a Teams webhook request is received” flow.",
  webhook: "Any HTTPS endpoint of yours; each message is signed with a whsec_ secret shown once.",
};

const EVENT_LABELS: Record<(typeof NOTIFICATION_EVENTS)[number], string> = {
  started: "started",
  succeeded: "succeeded",
  failed: "failed",
  fixed: "fixed (succeeded after a build that did not)",
  canceled: "canceled",
  timed_out: "timed out",
  expired: "expired",
  signing_expiring: "signing material expiring (a certificate or profile within 30 days, or expired)",
  published: "published to a store (TestFlight, Google Play)",
  publish_failed: "publishing to a store failed",
};

const DEFAULT_EVENTS = ["failed", "fixed"];

interface FormState {
  values: Record<string, string | string[]>;
  errors: Record<string, string>;
}

/** What the page shows once after a POST: a new webhook's URL and secret, a new signed webhook's secret. */
export interface EventsState {
  createdWebhook?: { id: string; provider: ForgeProvider; url: string; secret: string };
  createdNotification?: { id: string; kind: NotificationKind; secret: string };
  webhookForm?: FormState;
  notificationForm?: FormState;
}

type WebhookDelivery = Awaited<ReturnType<typeof listWebhookDeliveries>>[number];
type Attempt = Awaited<ReturnType<typeof listTargetAttempts>>[number];

export interface EventsView {
  webhooks: Array<{ row: WebhookRow; url: string; deliveries: WebhookDelivery[]; statuses: Attempt[] }>;
  notifications: Array<{ row: NotificationRow; attempts: Attempt[] }>;
  buildNumbers: Map<string, number>;
}

/** Where to paste the URL and the secret, forge by forge (the forges' own menu names). */
function ForgeSteps(props: { provider: ForgeProvider }) {
  const url = <strong>Webhook URL</strong>;
  const secret = <strong>Secret</strong>;
  switch (props.provider) {
    case "github":
      return (
        <ol class="forge-steps">
          <li>In the repository on GitHub open Settings → Webhooks → Add webhook.</li>
          <li>
            Payload URL: paste the {url}. Content type: application/json. Secret: paste the {secret}.
          </li>
          <li>“Which events”: choose “Let me select individual events” and tick Pushes and Pull requests (or keep “Just the push event”).</li>
          <li>Keep it Active and click Add webhook. GitHub sends a ping at once: it appears below as an ignored delivery.</li>
        </ol>
      );
    case "gitlab":
      return (
        <ol class="forge-steps">
          <li>In the project on GitLab open Settings → Webhooks → Add new webhook.</li>
          <li>
            URL: paste the {url}. Secret token: paste the {secret}.
          </li>
          <li>Trigger: tick Push events, Tag push events and Merge request events.</li>
          <li>Click Add webhook; Test → Push events sends a delivery you will see below.</li>
        </ol>
      );
    case "gitea":
    case "forgejo": {
      const name = PROVIDER_LABELS[props.provider];
      return (
        <ol class="forge-steps">
          <li>In the repository open Settings → Webhooks → Add webhook → {name}.</li>
          <li>
            Target URL: paste the {url}. HTTP method POST, content type application/json. Secret: paste the {secret}.
          </li>
          <li>Trigger on: “Custom events”, tick Push and Pull request (or “Push events” only).</li>
          <li>Click Add webhook; “Test delivery” sends a push you will see below.</li>
        </ol>
      );
    }
    case "bitbucket":
      return (
        <ol class="forge-steps">
          <li>In the repository on Bitbucket open Repository settings → Webhooks → Add webhook.</li>
          <li>
            Title: Hangar. URL: paste the {url}. Secret: paste the {secret}.
          </li>
          <li>Triggers: Repository push, and Pull request Created and Updated.</li>
          <li>Save. The next push shows up below.</li>
        </ol>
      );
  }
}

function CreatedWebhook(props: { created: NonNullable<EventsState["createdWebhook"]> }) {
  const c = props.created;
  return (
    <div class="created-secret" id="webhook-created">
      <h3>{PROVIDER_LABELS[c.provider]} webhook added</h3>
      <div class="flash flash-info" role="status">
        Copy the URL and the secret now: the secret is shown only this once (Hangar keeps it encrypted and never shows it again).
      </div>
      <CopyField id="webhook-url" label="Webhook URL" value={c.url} />
      <CopyField id="webhook-secret" label="Secret" value={c.secret} />
      <ForgeSteps provider={c.provider} />
    </div>
  );
}

function outcomeBadge(outcome: string) {
  const status = outcome === "built" ? "succeeded" : outcome === "refused" ? "failed" : "neutral";
  return <StatusBadge status={status} label={outcome} />;
}

function attemptBadge(a: Attempt) {
  return a.error === null ? <StatusBadge status="succeeded" label="delivered" /> : <StatusBadge status="failed" label="failed" />;
}

function AttemptsTable(props: { attempts: Attempt[]; ctx: PageCtx; empty: string; id: string; what: string }) {
  if (props.attempts.length === 0) return <p class="muted">{props.empty}</p>;
  return (
    <Table headers={["Sent", props.what, "Attempt", "Outcome", "HTTP status", "Error"]} id={props.id}>
      {props.attempts.map((a) => (
        <tr>
          <td>
            <Time at={a.created_at} now={props.ctx.now} />
          </td>
          <td>
            {a.build_id ? <a href={`/builds/${a.build_id}`}>{a.build_number !== null ? `#${a.build_number}` : "build"}</a> : "test message"}{" "}
            {a.event ? <Name value={a.event} /> : null}
          </td>
          <td>{a.attempt}</td>
          <td>{attemptBadge(a)}</td>
          <td>{a.status_code ?? "–"}</td>
          <td>
            <Name value={a.error} />
          </td>
        </tr>
      ))}
    </Table>
  );
}

function WebhookCard(props: {
  hook: EventsView["webhooks"][number];
  ctx: PageCtx;
  projectId: string;
  buildNumbers: Map<string, number>;
  hasCredentials: boolean;
}) {
  const { row, url, deliveries, statuses } = props.hook;
  return (
    <article class="card webhook" id={`webhook-${row.id}`}>
      <h3>
        {PROVIDER_LABELS[row.provider]}{" "}
        {row.disabledAt !== null ? <StatusBadge status="disabled" label="commit statuses disabled (410 from the forge)" /> : null}
      </h3>
      <dl class="kv">
        <dt>URL</dt>
        <dd>
          <code>
            <Name value={url} />
          </code>
        </dd>
        <dt>Commit statuses</dt>
        <dd>
          {!row.reportStatus
            ? "not reported"
            : props.hasCredentials
              ? "reported"
              : "on, but the project has no source credentials: nothing is reported"}
        </dd>
        {row.apiUrl ? (
          <>
            <dt>Forge API</dt>
            <dd>
              <code>
                <Name value={row.apiUrl} />
              </code>
            </dd>
          </>
        ) : null}
        {row.learnedRepo ? (
          <>
            <dt>Repository</dt>
            <dd>
              <Name value={row.learnedRepo} /> <span class="muted">(from the last delivery)</span>
            </dd>
          </>
        ) : null}
        <dt>Added</dt>
        <dd>
          <Time at={row.createdAt} now={props.ctx.now} />
        </dd>
      </dl>
      <h4>Recent deliveries</h4>
      {deliveries.length === 0 ? (
        <p class="muted">Nothing received yet.</p>
      ) : (
        <Table headers={["Received", "Event", "Delivery id", "Outcome", "Reason", "Builds"]} id={`webhook-deliveries-${row.id}`}>
          {deliveries.map((d) => (
            <tr>
              <td>
                <Time at={d.received_at} now={props.ctx.now} />
              </td>
              <td>
                <Name value={d.event} />
              </td>
              <td>
                <code>
                  <Name value={d.delivery_id} />
                </code>
              </td>
              <td>{outcomeBadge(d.outcome)}</td>
              <td>
                <Name value={d.reason} />
              </td>
              <td>
                {d.build_ids.length === 0
                  ? "–"
                  : d.build_ids.map((id, i) => (
                      <>
                        {i > 0 ? ", " : null}
                        <a href={`/builds/${id}`}>{props.buildNumbers.has(id) ? `#${props.buildNumbers.get(id)}` : "build"}</a>
                      </>
                    ))}
              </td>
            </tr>
          ))}
        </Table>
      )}
      {row.reportStatus ? (
        <>
          <h4>Recent commit statuses</h4>
          <AttemptsTable attempts={statuses} ctx={props.ctx} empty="None sent yet." id={`webhook-statuses-${row.id}`} what="Build and state" />
        </>
      ) : null}
      <form
        method="post"
        action={`/projects/${props.projectId}/webhooks/${row.id}/delete`}
        class="inline-form"
        data-confirm="Delete this webhook? Deliveries to its URL will be refused from now on."
      >
        <Button variant="danger">Delete webhook</Button>
      </form>
    </article>
  );
}

function NotificationCard(props: { n: EventsView["notifications"][number]; ctx: PageCtx; projectId: string }) {
  const { row, attempts } = props.n;
  const branches = row.branches as string[] | null;
  return (
    <article class="card notification" id={`notification-${row.id}`}>
      <h3>
        {KIND_LABELS[row.kind]} {row.disabledAt !== null ? <StatusBadge status="disabled" label="disabled (410 from the receiver)" /> : null}
      </h3>
      <dl class="kv">
        <dt>Events</dt>
        <dd>{(row.on as string[]).join(", ")}</dd>
        <dt>Branches</dt>
        <dd>
          {branches && branches.length > 0
            ? branches.map((b, i) => (
                <>
                  {i > 0 ? ", " : null}
                  <code>
                    <Name value={b} />
                  </code>
                </>
              ))
            : "all"}
        </dd>
        <dt>URL</dt>
        <dd class="muted">stored encrypted, never shown</dd>
        <dt>Added</dt>
        <dd>
          <Time at={row.createdAt} now={props.ctx.now} />
        </dd>
      </dl>
      <div class="actions">
        <form method="post" action={`/projects/${props.projectId}/notifications/${row.id}/test`} class="inline-form">
          <Button variant="secondary">Send test</Button>
        </form>
        <form
          method="post"
          action={`/projects/${props.projectId}/notifications/${row.id}/delete`}
          class="inline-form"
          data-confirm="Delete this notification?"
        >
          <Button variant="danger">Delete notification</Button>
        </form>
      </div>
      <h4>Recent deliveries</h4>
      <AttemptsTable attempts={attempts} ctx={props.ctx} empty="Nothing sent yet." id={`notification-deliveries-${row.id}`} what="Build and event" />
    </article>
  );
}

function values(form: FormState | undefined, name: string): string[] {
  const v = form?.values[name];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}
function value(form: FormState | undefined, name: string): string | undefined {
  return values(form, name)[0];
}

/** Both sections, for builders. `project` tells whether commit statuses can be reported at all. */
export function ProjectEvents(props: { ctx: PageCtx; project: ProjectRow; view: EventsView; state: EventsState }) {
  const { project: p, view, state } = props;
  const wf = state.webhookForm;
  const nf = state.notificationForm;
  const hasCredentials = p.sourceCredentialsSealed !== null;
  const chosenEvents = nf ? values(nf, "on") : DEFAULT_EVENTS;
  return (
    <>
      <Section
        title="Builds on push"
        id="webhooks"
        description={
          <>
            Add a webhook, paste its URL and secret into your forge, and every push builds. Without <code>triggers</code> in a pipeline's config, a
            push to the default branch (<Name value={p.defaultBranch} />) builds each pipeline; <code>triggers</code> add other branches, tags and
            pull requests.
          </>
        }
      >
        {state.createdWebhook ? <CreatedWebhook created={state.createdWebhook} /> : null}
        {view.webhooks.length === 0 ? (
          <EmptyState title="No webhook yet">
            <p>Add one below for the forge this repository lives on.</p>
          </EmptyState>
        ) : (
          view.webhooks.map((hook) => (
            <WebhookCard hook={hook} ctx={props.ctx} projectId={p.id} buildNumbers={view.buildNumbers} hasCredentials={hasCredentials} />
          ))
        )}
        <details open={wf || view.webhooks.length === 0 ? true : undefined} id="new-webhook">
          <summary>Add a webhook</summary>
          <PostForm action={`/projects/${p.id}/webhooks`}>
            <Select
              label="Forge"
              name="provider"
              id="webhook-provider"
              value={value(wf, "provider") ?? "github"}
              error={wf?.errors.provider}
              options={FORGE_PROVIDERS.map((v) => ({ value: v, label: PROVIDER_LABELS[v] }))}
            />
            <Field
              label="Forge API URL (optional)"
              name="api_url"
              id="webhook-api-url"
              value={value(wf, "api_url")}
              error={wf?.errors.api_url}
              placeholder="https://git.example.com/api/v1"
              inputmode="url"
              hint="Only for commit statuses on a self-hosted forge or GitHub Enterprise when the deliveries do not say where its API is."
            />
            <Checkbox
              label="Report commit statuses"
              name="report_status"
              checked={wf ? value(wf, "report_status") === "1" : true}
              hint={
                hasCredentials
                  ? "Each build's state appears next to its commit in the forge, linking back here."
                  : "Needs the project's source credentials (a token allowed to write commit statuses); none are set yet."
              }
            />
            <Button>Add webhook</Button>
          </PostForm>
        </details>
      </Section>

      <Section title="Notifications" id="notifications" description="Tell a chat or your own endpoint when builds start, fail, get fixed and more.">
        {state.createdNotification ? (
          <div class="created-secret" id="notification-created">
            <h3>Signed webhook added</h3>
            <div class="flash flash-info" role="status">
              Copy the signing secret now: it is shown only this once. Verify each message with it (Standard Webhooks: webhook-id, webhook-timestamp,
              webhook-signature).
            </div>
            <CopyField id="notification-secret" label="Signing secret" value={state.createdNotification.secret} />
          </div>
        ) : null}
        {view.notifications.length === 0 ? (
          <EmptyState title="No notification yet">
            <p>Add one below: Slack, Discord, Teams or a signed webhook.</p>
          </EmptyState>
        ) : (
          view.notifications.map((n) => <NotificationCard n={n} ctx={props.ctx} projectId={p.id} />)
        )}
        <details open={nf || view.notifications.length === 0 ? true : undefined} id="new-notification">
          <summary>Add a notification</summary>
          <PostForm action={`/projects/${p.id}/notifications`}>
            <Select
              label="Send to"
              name="kind"
              id="notification-kind"
              value={value(nf, "kind") ?? "slack"}
              error={nf?.errors.kind}
              options={NOTIFICATION_KINDS.map((v) => ({ value: v, label: KIND_LABELS[v] }))}
            />
            <Field
              label="Webhook URL"
              name="url"
              id="notification-url"
              type="url"
              value={value(nf, "url")}
              error={nf?.errors.url}
              required
              inputmode="url"
              hint={
                <>
                  {NOTIFICATION_KINDS.map((k) => (
                    <span class="block">{KIND_URL_HINTS[k]} </span>
                  ))}
                  Stored encrypted and never shown again.
                </>
              }
            />
            <fieldset class={nf?.errors.on ? "field has-error" : "field"} id="notification-on">
              <legend>Events</legend>
              {NOTIFICATION_EVENTS.map((e) => (
                <Checkbox label={EVENT_LABELS[e]} name="on" value={e} checked={chosenEvents.includes(e)} />
              ))}
              {nf?.errors.on ? (
                <p class="error" role="alert">
                  {nf.errors.on}
                </p>
              ) : null}
            </fieldset>
            <Field
              label="Branches (optional)"
              name="branches"
              id="notification-branches"
              value={value(nf, "branches")}
              error={nf?.errors.branches}
              placeholder="main, release/*"
              hint="Globs separated by commas or spaces: * within a segment, ** across. Empty: every branch."
            />
            <Button>Add notification</Button>
          </PostForm>
        </details>
      </Section>
    </>
  );
}
