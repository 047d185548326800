// The runners page as HTML (registration, commands, trust and limits): view components only; the routes that change
// runners are src/web/pages/runners.tsx.
import type { Child } from "hono/jsx";
import type { RunnerCapabilities } from "../../domain/runners/runners.ts";
import { TAKES } from "../../domain/runners/trust-view.ts";
import { RUNNER_TRUSTS, type RunnerTrust } from "../../db/schema/constants.ts";
import type { RunnerRow } from "../../domain/runners/runner-auth.ts";
import { Button, Checkbox, CopyField, EmptyState, Field, Name, PostForm, Section, Select, StatusBadge, Table, Time } from "../components.tsx";
import { hasHiddenCharacters } from "../text.ts";
import { Layout, type PageCtx } from "../layout.tsx";
import { LowDiskWarning, RunnerDiskCell } from "../pages/runner-disk.tsx";

export const PLATFORM_CHOICES = [
  { value: "ios", label: "iOS" },
  { value: "macos", label: "macOS" },
  { value: "android", label: "Android" },
] as const;

/** What a freshly registered runner needs, shown once: its id and token, and commands that use them. */
interface Registered {
  runner: RunnerRow;
  token: string;
  daemonUrl: string;
}

/**
 * The standalone runner (docs/api.md §9) for a machine without a clone of Hangar: download the one file, then run it
 * with this runner's id and token. The token goes into a file only its owner can read (`--token-file`): in the
 * environment it would stay readable in the runner's own /proc/<pid>/environ (docs/runner-isolation.md).
 */
export function standaloneRunnerCommands(registered: Registered): Child {
  const base = registered.daemonUrl.replace(/\/+$/, "");
  const download = `curl -fsSLO ${shellQuote(`${base}/runner/hangar-runner.mjs`)}`;
  const run =
    `(umask 077; printf '%s\\n' ${shellQuote(registered.token)} > ~/.hangar-runner.token)\n` +
    `node hangar-runner.mjs --url ${shellQuote(base)} --id ${shellQuote(registered.runner.id)} --token-file ~/.hangar-runner.token`;
  return (
    <div class="standalone-runner">
      <h3>Or on a machine without Hangar (Node 20 or later)</h3>
      <CopyField id="runner-download" label="1. Download the standalone runner" value={download} />
      <CopyField id="runner-standalone" label="2. Save the token and start it" value={run} multiline />
    </div>
  );
}

/**
 * Per-runner actions in the list's last column (the viewer is an owner or admin: this page is for them only).
 * Both take effect at once on every daemon: the old token fails on its next call (docs/api.md §6).
 */
export function runnerActions(runner: RunnerRow): Child {
  return (
    <div class="actions">
      <form
        method="post"
        action={`/runners/${runner.id}/rotate-token`}
        class="inline-form"
        data-confirm="The runner's current token stops working at once. Continue?"
      >
        <Button variant="secondary">Rotate token</Button>
      </form>
      <form
        method="post"
        action={`/runners/${runner.id}/remove`}
        class="inline-form"
        data-confirm="Remove this runner? Its token stops working; a running build of it fails."
      >
        <Button variant="danger">Remove</Button>
      </form>
    </div>
  );
}

/** The build user the --run-as commands name; any dedicated account without a password will do. */
const BUILD_USER = "hangar-build";

/**
 * The start for a protected runner (docs/runner-isolation.md): as root, with the token in a root-only file and the
 * steps run as a build user of their own, so that no step can read the runner's token nor a job token.
 */
export function runAsCommands(registered: Registered): Child {
  const base = registered.daemonUrl.replace(/\/+$/, "");
  const tokenFile = "/etc/hangar/runner.token";
  const save = `sudo install -d -m 700 /etc/hangar\nprintf '%s\\n' ${shellQuote(registered.token)} | sudo tee ${tokenFile} >/dev/null\nsudo chmod 600 ${tokenFile}`;
  const run = `sudo npx hangar runner --url ${shellQuote(base)} --id ${shellQuote(registered.runner.id)} --token-file ${tokenFile} --run-as ${BUILD_USER}`;
  return (
    <div class="run-as-runner" id="run-as">
      <h3>For a protected runner: steps as a build user of their own</h3>
      <p class="hint">
        Started as above, steps run as the runner's own user and any build can read its token. A protected runner (one that receives signing keys and
        secrets) should run as root with <code>--run-as</code>: steps then run as the build user <code>{BUILD_USER}</code> (create it first, without a
        password), and nothing of either token is readable to them. The runner reports its isolation as <code>user</code>.
      </p>
      <CopyField id="runner-runas-token" label="1. Save the token in a file only root can read" value={save} multiline />
      <CopyField id="runner-runas-start" label="2. Start it as root, steps as the build user" value={run} />
    </div>
  );
}

function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

function RegisteredPanel(props: { registered: Registered }) {
  const { runner, token, daemonUrl } = props.registered;
  const env = `HANGAR_URL=${daemonUrl}\nHANGAR_RUNNER_ID=${runner.id}\nHANGAR_RUNNER_TOKEN=${token}`;
  const start = `(umask 077; cat > ~/.hangar-runner.env <<'EOF'\n${env}\nEOF\n)\nset -a; . ~/.hangar-runner.env; set +a\nnpx hangar runner --url ${shellQuote(daemonUrl)}`;
  return (
    <section class="card" id="registered" aria-labelledby="registered-title">
      <h2 id="registered-title">
        Runner <Name value={runner.name ?? runner.id} /> is registered
      </h2>
      <div class="flash flash-info" role="status">
        Copy the token now: it is shown only this once. Hangar keeps only its hash.
      </div>
      <CopyField id="runner-token" label="Runner token" value={token} />
      <CopyField id="runner-env" label="Environment file (keep it private)" value={env} multiline />
      <CopyField id="runner-start" label="Start it from a clone of Hangar" value={start} multiline />
      {runAsCommands(props.registered)}
      {standaloneRunnerCommands(props.registered)}
    </section>
  );
}

function platformsOf(r: RunnerRow): string[] {
  const caps = r.capabilities as RunnerCapabilities | null;
  return Array.isArray(caps?.platforms) ? caps.platforms.map(String) : [];
}

function isolationOf(r: RunnerRow): "user" | "none" | null {
  const isolation = (r.capabilities as RunnerCapabilities | null)?.isolation;
  return isolation === "user" || isolation === "none" ? isolation : null;
}

function maxJobsOf(r: RunnerRow): number | null {
  const max = (r.capabilities as RunnerCapabilities | null)?.max_jobs;
  return typeof max === "number" ? max : null;
}

const TRUST_TEXT: Record<RunnerTrust, string> = {
  protected: "protected",
  open: "open",
};

export const BUILD_TRUST_TEXT = { protected: "protected builds", open: "open builds", fork: "fork pull requests" } as const;

/** A protected runner whose steps run as its own user: any build on it can read its token and act as it. */
function exposesToken(r: RunnerRow): boolean {
  return r.trust === "protected" && isolationOf(r) === "none";
}

/**
 * A runner that has never called in (no heartbeat, claim or report yet) is registered, not running: its status is
 * `online` in the API (docs/api.md §21), but the page never says so.
 */
export function RunnerStatus(props: { runner: RunnerRow }) {
  const r = props.runner;
  if (r.lastHeartbeatAt === null && r.status !== "offline") return <StatusBadge status="pending" label="not started yet" />;
  return (
    <>
      <StatusBadge status={r.status} />
      {r.lastHeartbeatAt === null ? <div class="hint">never started</div> : null}
    </>
  );
}

/** The edit form of one runner (name, platforms, trust), folded away until opened; works without JavaScript. */
function runnerEditForm(r: RunnerRow): Child {
  const platforms = platformsOf(r);
  return (
    <details class="runner-edit">
      <summary>Edit</summary>
      <PostForm action={`/runners/${r.id}/edit`} id={`edit-${r.id}`}>
        {/* A name with hidden (bidi) characters is not put back into the field as is: it is shown neutralised in the
            list, and an empty field keeps it. */}
        <Field
          label="Name"
          name="name"
          id={`edit-name-${r.id}`}
          value={r.name && !hasHiddenCharacters(r.name) ? r.name : ""}
          placeholder="mac-mini-1"
          hint="Empty keeps the current name."
        />
        <fieldset class="field">
          <legend>Platforms it builds</legend>
          {PLATFORM_CHOICES.map((p) => (
            <Checkbox label={p.label} name="platforms" value={p.value} checked={platforms.includes(p.value)} />
          ))}
        </fieldset>
        <Select
          label="Trust"
          name="trust"
          id={`edit-trust-${r.id}`}
          value={r.trust}
          options={RUNNER_TRUSTS.map((t) => ({ value: t, label: TRUST_TEXT[t] }))}
        />
        <Button>Save</Button>
      </PostForm>
    </details>
  );
}

/** Trust and max_jobs forms of one runner: owners and admins only (this page is theirs). */
function runnerSettings(r: RunnerRow): Child {
  return (
    <div class="actions runner-settings">
      {runnerEditForm(r)}
      <form method="post" action={`/runners/${r.id}/trust`} class="inline-form">
        <Select
          label="Trust"
          name="trust"
          id={`trust-${r.id}`}
          compact
          value={r.trust}
          options={RUNNER_TRUSTS.map((t) => ({ value: t, label: TRUST_TEXT[t] }))}
        />
        <Button variant="secondary">Set trust</Button>
      </form>
      <form method="post" action={`/runners/${r.id}/max-jobs`} class="inline-form">
        <Field
          label="Max jobs"
          name="max_jobs"
          id={`max-jobs-${r.id}`}
          inputmode="numeric"
          value={maxJobsOf(r)?.toString() ?? ""}
          placeholder="no cap"
        />
        <Button variant="secondary">Set cap</Button>
      </form>
    </div>
  );
}

export function RunnersPage(props: {
  ctx: PageCtx;
  runners: RunnerRow[];
  registered?: Registered;
  error?: string | null;
  platformsError?: string | null;
  name?: string;
}) {
  const slotted = props.runners.map((r) => runnerActions(r));
  const hasActions = slotted.some((a) => a !== null);
  const exposed = props.runners.filter(exposesToken);
  return (
    <Layout ctx={props.ctx} title="Runners">
      <h1>Runners</h1>
      {props.registered ? <RegisteredPanel registered={props.registered} /> : null}
      {exposed.length > 0 ? (
        <div class="flash flash-warn" role="alert" id="isolation-warning">
          {exposed.length === 1 ? "A protected runner runs" : `${exposed.length} protected runners run`} its steps without isolation (
          {exposed.map((r, i) => (
            <>
              {i > 0 ? ", " : ""}
              <Name value={r.name} fallback={r.id.slice(0, 8)} />
            </>
          ))}
          ): any build on it can read its token, and with it the signing keys and secrets of every protected build. Restart it as root with{" "}
          <code>--run-as BUILD_USER --token-file FILE</code> (docs/runner-isolation.md), or make it open.
        </div>
      ) : null}
      <LowDiskWarning runners={props.runners} />
      <Section
        title="Register a runner"
        id="register"
        description="A runner is a machine that builds: a Mac for iOS and macOS, any machine with the Android SDK for Android."
      >
        <PostForm action="/runners/register">
          <Field
            label="Name"
            name="name"
            value={props.name}
            error={props.error}
            placeholder="mac-mini-1"
            hint="Optional; shown in lists and build pages."
          />
          <fieldset class={props.platformsError ? "field has-error" : "field"} id="register-platforms">
            <legend>Platforms it builds</legend>
            {PLATFORM_CHOICES.map((p) => (
              <Checkbox label={p.label} name="platforms" value={p.value} />
            ))}
            {props.platformsError ? (
              <p class="error" role="alert">
                {props.platformsError}
              </p>
            ) : null}
          </fieldset>
          <Select
            label="Trust"
            name="trust"
            id="register-trust"
            value="protected"
            options={[
              { value: "protected", label: "protected: receives signing keys and secrets; takes protected and open builds" },
              { value: "open", label: "open: never receives credentials; takes open builds and pull requests from forks" },
            ]}
            hint="A protected runner should run its steps as a build user of their own (--run-as), or any build can read its token."
          />
          <Button>Register</Button>
        </PostForm>
      </Section>
      <Section title="Registered runners" id="list">
        {props.runners.length === 0 ? (
          <EmptyState title="No runners yet">Register one above, then start it on the build machine.</EmptyState>
        ) : (
          <Table
            headers={[
              "Runner",
              "Status",
              "Platforms",
              "Trust",
              "Takes",
              "Isolation",
              "Max jobs",
              "Free disk",
              "Last heartbeat",
              "Registered",
              ...(hasActions ? ["Actions"] : []),
            ]}
            id="runners-table"
          >
            {props.runners.map((r, i) => (
              <tr data-runner={r.id}>
                <td>
                  <Name value={r.name} fallback="(unnamed)" />
                  <div class="hint mono">{r.id}</div>
                </td>
                <td class="runner-status">
                  <RunnerStatus runner={r} />
                </td>
                <td>
                  {platformsOf(r).length > 0 ? (
                    platformsOf(r).map((p, j) => (
                      <>
                        {j > 0 ? ", " : ""}
                        <Name value={p} />
                      </>
                    ))
                  ) : (
                    <span class="muted">none</span>
                  )}
                </td>
                <td class="runner-trust">
                  <StatusBadge status={r.trust === "protected" ? "neutral" : "queued"} label={TRUST_TEXT[r.trust]} />
                </td>
                <td class="runner-takes">{TAKES[r.trust].map((t) => BUILD_TRUST_TEXT[t]).join(" and ")}</td>
                <td class="runner-isolation">
                  {isolationOf(r) ?? <span class="muted">not reported</span>}
                  {exposesToken(r) ? <div class="error">any build on it can read its token</div> : null}
                </td>
                <td class="runner-max-jobs">{maxJobsOf(r) ?? <span class="muted">no cap</span>}</td>
                <RunnerDiskCell runner={r} />
                <td>
                  <Time at={r.lastHeartbeatAt} now={props.ctx.now} />
                </td>
                <td>
                  <Time at={r.createdAt} now={props.ctx.now} />
                </td>
                {hasActions ? (
                  <td>
                    {runnerSettings(r)}
                    {slotted[i]}
                  </td>
                ) : null}
              </tr>
            ))}
          </Table>
        )}
      </Section>
    </Layout>
  );
}
