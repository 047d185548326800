import { Hono } from "hono";
import type { Child } from "hono/jsx";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { readNetworkSettings } from "../../domain/settings/network-settings.ts";
import { getRunner, listRunners, registerRunner, removeRunner, rotateRunnerToken, type RunnerCapabilities } from "../../domain/runners/runners.ts";
import type { RunnerRow } from "../../domain/runners/runner-auth.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { Button, Checkbox, CopyField, EmptyState, Field, Name, PostForm, Section, StatusBadge, Table, Time } from "../components.tsx";
import { sentence } from "../errors.tsx";
import { setFlash } from "../flash.ts";
import { Layout, type PageCtx } from "../layout.tsx";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";

const PLATFORM_CHOICES = [
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
 * The standalone runner (CONTRACT §9) for a machine without a clone of Hangar: download the one file, then run it
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
 * Both take effect at once on every daemon: the old token fails on its next call (CONTRACT §6).
 */
export function runnerActions(runner: RunnerRow): Child {
  return (
    <div class="actions">
      <form method="post" action={`/runners/${runner.id}/rotate-token`} class="inline-form" data-confirm="The runner's current token stops working at once. Continue?">
        <Button variant="secondary">Rotate token</Button>
      </form>
      <form method="post" action={`/runners/${runner.id}/remove`} class="inline-form" data-confirm="Remove this runner? Its token stops working; a running build of it fails.">
        <Button variant="danger">Remove</Button>
      </form>
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
      {standaloneRunnerCommands(props.registered)}
    </section>
  );
}

function platformsOf(r: RunnerRow): string[] {
  const caps = r.capabilities as RunnerCapabilities | null;
  return Array.isArray(caps?.platforms) ? caps.platforms.map(String) : [];
}

function RunnersPage(props: { ctx: PageCtx; runners: RunnerRow[]; registered?: Registered; error?: string | null; name?: string }) {
  const slotted = props.runners.map((r) => runnerActions(r));
  const hasActions = slotted.some((a) => a !== null);
  return (
    <Layout ctx={props.ctx} title="Runners">
      <h1>Runners</h1>
      {props.registered ? <RegisteredPanel registered={props.registered} /> : null}
      <Section title="Register a runner" id="register" description="A runner is a machine that builds: a Mac for iOS and macOS, any machine with the Android SDK for Android.">
        <PostForm action="/runners/register">
          <Field label="Name" name="name" value={props.name} error={props.error} placeholder="mac-mini-1" hint="Optional; shown in lists and build pages." />
          <fieldset class="field">
            <legend>Platforms it builds</legend>
            {PLATFORM_CHOICES.map((p) => (
              <Checkbox label={p.label} name="platforms" value={p.value} />
            ))}
          </fieldset>
          <Button>Register</Button>
        </PostForm>
      </Section>
      <Section title="Registered runners" id="list">
        {props.runners.length === 0 ? (
          <EmptyState title="No runners yet">Register one above, then start it on the build machine.</EmptyState>
        ) : (
          <Table headers={["Runner", "Status", "Platforms", "Last heartbeat", "Registered", ...(hasActions ? ["Actions"] : [])]} id="runners-table">
            {props.runners.map((r, i) => (
              <tr data-runner={r.id}>
                <td>
                  <Name value={r.name} fallback="(unnamed)" />
                  <div class="hint mono">{r.id}</div>
                </td>
                <td>
                  <StatusBadge status={r.status} />
                </td>
                <td>{platformsOf(r).length > 0 ? platformsOf(r).map((p, j) => <>{j > 0 ? ", " : ""}<Name value={p} /></>) : <span class="muted">none</span>}</td>
                <td>
                  <Time at={r.lastHeartbeatAt} now={props.ctx.now} />
                </td>
                <td>
                  <Time at={r.createdAt} now={props.ctx.now} />
                </td>
                {hasActions ? <td>{slotted[i]}</td> : null}
              </tr>
            ))}
          </Table>
        )}
      </Section>
    </Layout>
  );
}

/** The URL runners should use: the External Access public URL when set, else the one this page was opened on. */
async function daemonUrlFor(deps: AppDeps, requestUrl: string): Promise<string> {
  return (await readNetworkSettings(deps)).public_url ?? new URL(requestUrl).origin;
}

/** /runners (owner and admins): list, register with a shown-once token and copyable commands. */
export function runnersPages(deps: AppDeps) {
  const managers = requireBrowserUser(deps, { roles: ROLES.managers });
  return new Hono<AppEnv>()
    .get("/runners", managers, async (c) => renderPage(c, <RunnersPage ctx={pageContext(c, deps)} runners={await listRunners(deps)} />))
    .post("/runners/register", managers, async (c) => {
      const form = await c.req.parseBody({ all: true });
      const name = typeof form.name === "string" ? form.name.trim() : "";
      const raw = form.platforms;
      const chosen = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).filter((p): p is string => typeof p === "string");
      const platforms = PLATFORM_CHOICES.map((p) => p.value).filter((p) => chosen.includes(p));
      if (name.length > 100) {
        return renderPage(c, <RunnersPage ctx={pageContext(c, deps)} runners={await listRunners(deps)} error="A name has at most 100 characters." name={name} />, 400);
      }
      try {
        const { runner, token } = await registerRunner(deps, c.get("user"), { ...(name ? { name } : {}), capabilities: { platforms } });
        const registered = { runner, token, daemonUrl: await daemonUrlFor(deps, c.req.url) };
        // Rendered, not redirected: the token exists only in this answer (no-store, like every page).
        return renderPage(c, <RunnersPage ctx={pageContext(c, deps)} runners={await listRunners(deps)} registered={registered} />);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        return renderPage(c, <RunnersPage ctx={pageContext(c, deps)} runners={await listRunners(deps)} error={sentence(err.message)} name={name} />, 400);
      }
    })
    .post("/runners/:runner_id/rotate-token", managers, async (c) => {
      const runnerId = c.req.param("runner_id");
      const token = await rotateRunnerToken(deps, c.get("user"), runnerId);
      const registered = { runner: await getRunner(deps, runnerId), token, daemonUrl: await daemonUrlFor(deps, c.req.url) };
      // The new token is shown once, with the commands that use it, as after a registration.
      return renderPage(c, <RunnersPage ctx={pageContext(c, deps)} runners={await listRunners(deps)} registered={registered} />);
    })
    .post("/runners/:runner_id/remove", managers, async (c) => {
      const runner = await getRunner(deps, c.req.param("runner_id"));
      await removeRunner(deps, c.get("user"), runner.id);
      setFlash(c, "ok", `Runner ${runner.name ?? runner.id} removed; its token no longer works.`);
      return c.redirect("/runners", 303);
    });
}
