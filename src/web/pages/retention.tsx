import { Hono, type Context } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import type { DiskUsage } from "../../domain/retention/disk.ts";
import { describeListedBuilds, dryRunRetention, type lastPass, runRetentionNow, type RetentionAnswer } from "../../domain/retention/pass.ts";
import { retentionPolicySchema, updateInstancePolicy, type EffectivePolicy } from "../../domain/retention/policy.ts";
import { nameDirectory, type NameDirectory } from "../../domain/projects/projects.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { Button, EmptyState, Field, Name, PostForm, Section, Table } from "../components.tsx";
import { setFlash } from "../flash.ts";
import { checkForm } from "../form.ts";
import { Layout, type PageCtx } from "../layout.tsx";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";
import { formatBytes } from "../text.ts";

const REASONS: Record<string, string> = {
  "artifacts.keep_last": "beyond the last N of its pipeline and branch",
  "artifacts.max_age_days": "artifacts older than the limit",
  "logs.max_age_days": "log older than the limit",
};

const asText = (n: number | null) => (n === null ? "" : String(n));

/** The Settings page's retention section: the instance policy form, a preview (dry run) and a run now. */
export function RetentionSection(props: {
  policy: EffectivePolicy;
  last: Awaited<ReturnType<typeof lastPass>>;
  now: number;
  problem?: string | null;
}) {
  const p = props.policy;
  const last = props.last;
  return (
    <Section
      title="Retention"
      id="retention"
      description="What Hangar deletes by itself, once a day. Empty keeps everything. Pinned builds, builds still running and each channel's latest release are never touched."
    >
      {props.problem ? (
        <div class="flash flash-error" role="alert" id="retention-error">
          {props.problem}
        </div>
      ) : null}
      <PostForm action="/settings/retention" id="retention-form">
        <div class="grid2">
          <Field
            label="Keep the artifacts of the last N builds"
            name="keep_last"
            inputmode="numeric"
            value={asText(p.artifacts.keep_last)}
            hint="Per pipeline and branch."
          />
          <Field
            label="Delete artifacts after (days)"
            name="artifacts_max_age_days"
            inputmode="numeric"
            value={asText(p.artifacts.max_age_days)}
            hint="Counted from the end of the build; 0 deletes every finished build's artifacts."
          />
          <Field
            label="Delete logs after (days)"
            name="logs_max_age_days"
            inputmode="numeric"
            value={asText(p.logs.max_age_days)}
            hint="The build and its step results stay."
          />
        </div>
        <Button>Save retention policy</Button>
      </PostForm>
      <div class="actions">
        <PostForm action="/settings/retention/preview" class="inline-form">
          <Button variant="secondary">Preview what would be deleted</Button>
        </PostForm>
      </div>
      <p class="hint" id="retention-last">
        {last
          ? `Last pass: ${formatBytes(last.artifactsBytes + last.logsBytes)} freed (${last.artifactsCount} artifacts, ${last.logsCount} logs), ${Math.max(0, Math.round((props.now - last.startedAt) / 3600))} h ago.`
          : "No pass has run yet."}
      </p>
    </Section>
  );
}

/** The Settings page's disk section: the data directory's file system and what Hangar stores, per project. */
export function DiskSection(props: { disk: DiskUsage; names: NameDirectory }) {
  const d = props.disk;
  const percent = d.data_dir && d.data_dir.total_bytes > 0 ? ((d.data_dir.free_bytes / d.data_dir.total_bytes) * 100).toFixed(1) : null;
  return (
    <Section
      title="Disk"
      id="disk"
      description="The disk holding the data directory, and what Hangar keeps on it (artifacts on S3 or R2 count here too)."
    >
      <dl class="kv" id="disk-figures">
        <dt>Free</dt>
        <dd>
          {d.data_dir
            ? `${formatBytes(d.data_dir.free_bytes)} of ${formatBytes(d.data_dir.total_bytes)} (${percent} %)`
            : "not reported by this host"}
        </dd>
        <dt>Database</dt>
        <dd>{formatBytes(d.database_bytes)}</dd>
        <dt>Artifacts</dt>
        <dd>{formatBytes(d.artifacts_bytes)}</dd>
        <dt>Logs</dt>
        <dd>{formatBytes(d.logs_bytes)}</dd>
      </dl>
      {d.projects.length === 0 ? null : (
        <Table headers={["Project", "Artifacts", "Logs"]} id="disk-projects">
          {d.projects.map((p) => (
            <tr>
              <td>
                <Name value={props.names.projects.get(p.project_id)?.name} fallback="(deleted project)" />
              </td>
              <td>{formatBytes(p.artifacts_bytes)}</td>
              <td>{formatBytes(p.logs_bytes)}</td>
            </tr>
          ))}
        </Table>
      )}
    </Section>
  );
}

function PreviewPage(props: {
  ctx: PageCtx;
  answer: RetentionAnswer;
  labels: Awaited<ReturnType<typeof describeListedBuilds>>;
  names: NameDirectory;
}) {
  const a = props.answer;
  const total = a.artifacts.count + a.logs.count;
  return (
    <Layout ctx={props.ctx} title="Retention preview">
      <h1>What the retention policy would delete now</h1>
      <p id="preview-summary">
        {a.artifacts.count} artifacts ({formatBytes(a.artifacts.bytes)}) and {a.logs.count} logs ({formatBytes(a.logs.bytes)}):{" "}
        {formatBytes(a.artifacts.bytes + a.logs.bytes)} in all. Nothing has been deleted yet.
      </p>
      {total === 0 ? (
        <EmptyState title="Nothing to delete">Every artifact and log is kept by the current policy.</EmptyState>
      ) : (
        <>
          <Table headers={["Build", "What", "Size", "Why"]} id="preview-items">
            {a.items.map((item) => {
              const build = props.labels.get(item.build_id);
              return (
                <tr>
                  <td>
                    <a href={`/builds/${item.build_id}`}>{build ? `#${build.number}` : item.build_id.slice(0, 8)}</a>{" "}
                    {build ? <Name value={props.names.projects.get(build.projectId)?.name} fallback="(deleted project)" /> : null}
                    {build ? (
                      <>
                        {" · "}
                        <Name value={build.branch} />
                      </>
                    ) : null}
                  </td>
                  <td>{item.artifact_id ? "artifact" : "log"}</td>
                  <td>{formatBytes(item.bytes)}</td>
                  <td>{REASONS[item.reason] ?? item.reason}</td>
                </tr>
              );
            })}
          </Table>
          {a.items.length < total ? (
            <p class="hint">
              The first {a.items.length} of {total} are listed.
            </p>
          ) : null}
          <form
            method="post"
            action="/settings/retention/run"
            class="actions"
            data-confirm="Delete these artifacts and logs now? This cannot be undone."
          >
            <Button variant="danger">Delete these now</Button>
          </form>
        </>
      )}
      <p>
        <a href="/settings#retention">Back to the settings</a>
      </p>
    </Layout>
  );
}

/** An empty field keeps (null); anything else must be a whole number ≥ 0, as the API's schema says. */
function ruleOf(text: string | undefined): number | null | string {
  const t = (text ?? "").trim();
  return t === "" ? null : /^\d+$/.test(t) ? Number(t) : t;
}

/** POSTs of the Settings page's retention section (owner and admins). The section itself renders in settings.tsx. */
export function retentionPages(deps: AppDeps, renderSettings: (c: Context<AppEnv>, problem: string) => Promise<Response>) {
  const managers = requireBrowserUser(deps, { roles: ROLES.managers });
  // The pass this process runs when someone presses "Delete these now".
  const owner = `ui-${crypto.randomUUID()}`;
  return new Hono<AppEnv>()
    .post("/settings/retention", managers, async (c) => {
      const form = await c.req.parseBody();
      const parsed = checkForm(retentionPolicySchema, {
        artifacts: {
          keep_last: ruleOf(form.keep_last as string | undefined),
          max_age_days: ruleOf(form.artifacts_max_age_days as string | undefined),
        },
        logs: { max_age_days: ruleOf(form.logs_max_age_days as string | undefined) },
      });
      if (!parsed.ok) return renderSettings(c, "Each rule is a whole number of 0 or more, or empty to keep everything.");
      await updateInstancePolicy(deps, c.get("user"), parsed.data);
      setFlash(c, "ok", "Retention policy saved. It applies at the next daily pass; preview it or run it now below.");
      return c.redirect("/settings#retention", 303);
    })
    .post("/settings/retention/preview", managers, async (c) => {
      const answer = await dryRunRetention(deps);
      const [labels, names] = await Promise.all([
        describeListedBuilds(
          deps,
          answer.items.map((i) => i.build_id),
        ),
        nameDirectory(deps),
      ]);
      return renderPage(c, <PreviewPage ctx={pageContext(c, deps)} answer={answer} labels={labels} names={names} />);
    })
    .post("/settings/retention/run", managers, async (c) => {
      try {
        const done = await runRetentionNow(deps, c.get("user"), owner);
        setFlash(
          c,
          "ok",
          `Deleted ${done.artifacts.count} artifacts and ${done.logs.count} logs: ${formatBytes(done.artifacts.bytes + done.logs.bytes)} freed.`,
        );
      } catch (err) {
        if (!(err instanceof ApiError) || err.code !== "retention_pass_running") throw err;
        setFlash(c, "info", "A retention pass is already running; look again in a moment.");
      }
      return c.redirect("/settings#retention", 303);
    });
}
