// Tester channels in the UI (docs/spec.md §18): a Channels section on the project page (every role reads, builders
// create), and a page per channel with its releases and testers. A tester's link is shown once, to copy: with SMTP
// settings Hangar mails it too; without them the person who adds a tester passes the link on.
import type { Context } from "hono";
import { Hono } from "hono";
import type { Child } from "hono/jsx";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  addTester,
  channelReleases,
  createChannel,
  createChannelSchema,
  createTesterSchema,
  deleteChannel,
  getChannel,
  listChannels,
  listTesters,
  removeTester,
  type ChannelRow,
} from "../../domain/channels/channels.ts";
import type { PipelineRow, ProjectRow } from "../../domain/projects/projects.ts";
import { getProject } from "../../domain/projects/projects.ts";
import { ApiError, type ValidationIssue } from "../../errors.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { Button, Checkbox, CopyField, Field, Name, PostForm, Section, Select, Table } from "../components.tsx";
import { setFlash } from "../flash.ts";
import { checkForm } from "../form.ts";
import { Layout, type PageCtx } from "../layout.tsx";
import { isoTime } from "../text.ts";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";

const isBuilder = (ctx: PageCtx) => !!ctx.user && (ROLES.builders as readonly string[]).includes(ctx.user.role);
const day = (s: number) => isoTime(s).slice(0, 10);

function ChannelsSection(props: { ctx: PageCtx; project: ProjectRow; pipelines: PipelineRow[]; channels: ChannelRow[] }) {
  const { project, pipelines, channels } = props;
  const names = new Map(pipelines.map((p) => [p.id, p.name]));
  return (
    <Section
      title="Tester channels"
      id="channels"
      description="Builds of a pipeline on chosen branches, for testers without an account: each tester gets a personal link."
    >
      {channels.length === 0 ? <p class="muted">No channel yet.</p> : null}
      <ul id="channel-list">
        {channels.map((ch) => (
          <li>
            <a href={`/projects/${project.id}/channels/${ch.id}`}>
              <Name value={ch.name} />
            </a>{" "}
            <span class="muted">
              · <Name value={names.get(ch.pipelineId) ?? "deleted pipeline"} /> · {ch.branches ? ch.branches.join(", ") : "every branch"} ·{" "}
              {ch.platforms ? ch.platforms.join(", ") : "iOS and Android"}
            </span>
          </li>
        ))}
      </ul>
      {isBuilder(props.ctx) && pipelines.length > 0 ? (
        <details id="new-channel">
          <summary>New channel</summary>
          <PostForm action={`/projects/${project.id}/channels`}>
            <Field label="Name" name="name" id="channel-name" required placeholder="beta" />
            <Select label="Pipeline" name="pipeline_id" id="channel-pipeline" options={pipelines.map((p) => ({ value: p.id, label: p.name }))} />
            <Field
              label="Branches (globs, comma-separated; empty for every branch)"
              name="branches"
              id="channel-branches"
              placeholder="main, release/*"
            />
            <Checkbox label="iOS" name="platforms" value="ios" checked />
            <Checkbox label="Android" name="platforms" value="android" checked />
            <Button>Create channel</Button>
          </PostForm>
        </details>
      ) : null}
    </Section>
  );
}

/** The hook the project page calls: the Channels section, for every signed-in role. */
export async function projectChannelsSlot(deps: Pick<AppDeps, "db">, ctx: PageCtx, project: ProjectRow, pipelines: PipelineRow[]): Promise<Child> {
  return <ChannelsSection ctx={ctx} project={project} pipelines={pipelines} channels={await listChannels(deps, project.id)} />;
}

type Releases = Awaited<ReturnType<typeof channelReleases>>;
type Testers = Awaited<ReturnType<typeof listTesters>>;

function ChannelPage(props: {
  ctx: PageCtx;
  project: ProjectRow;
  channel: ChannelRow;
  releases: Releases;
  testers: Testers;
  newLink?: { email: string; url: string; mailed: boolean };
}) {
  const { ctx, project, channel } = props;
  const builder = isBuilder(ctx);
  const base = `/projects/${project.id}/channels/${channel.id}`;
  return (
    <Layout ctx={ctx} title={`Channel ${channel.name}`}>
      <h1>
        Channel <Name value={channel.name} />
      </h1>
      <p class="muted">
        <a href={`/projects/${project.id}#channels`}>
          <Name value={project.name} />
        </a>
      </p>
      {props.newLink ? (
        <Section
          title="Tester link"
          id="tester-link"
          description={
            props.newLink.mailed
              ? "Shown this once. Hangar is mailing it to the tester too: it always opens the latest build of this channel."
              : "Shown this once. Hangar sends no mail without SMTP settings (Settings): copy the link and send it to the tester yourself. It always opens the latest build of this channel."
          }
        >
          <CopyField id="tester-page-url" label={`Link for ${props.newLink.email}`} value={props.newLink.url} />
        </Section>
      ) : null}
      <Section title="Releases" id="releases">
        {props.releases.length === 0 ? (
          <p class="muted">No release yet: a succeeded build of the pipeline on a matching branch with an .ipa or .apk.</p>
        ) : (
          <Table headers={["Build", "App", "Branch", "Date", "Installs"]} id="release-table">
            {props.releases.map((r) => (
              <tr>
                <td>
                  <a href={`/builds/${r.build_id}`}>#{r.build_number}</a>
                </td>
                <td>
                  <Name value={r.app.name} /> <Name value={r.app.version} /> (<Name value={r.app.build} />)
                </td>
                <td>
                  <Name value={r.branch} />
                </td>
                <td>{day(r.created_at)}</td>
                <td>{r.installs}</td>
              </tr>
            ))}
          </Table>
        )}
      </Section>
      <Section title="Testers" id="testers">
        {props.testers.length === 0 ? <p class="muted">No tester yet.</p> : null}
        {props.testers.length > 0 ? (
          <Table
            headers={builder ? ["Email", "Name", "Installs", "Release mail", ""] : ["Email", "Name", "Installs", "Release mail"]}
            id="tester-table"
          >
            {props.testers.map((t) => (
              <tr>
                <td>
                  <Name value={t.email} />
                </td>
                <td>
                  <Name value={t.name} />
                </td>
                <td>{t.installs}</td>
                <td>{t.mail_opt_out ? "turned off" : "on"}</td>
                {builder ? (
                  <td>
                    <PostForm action={`${base}/testers/${t.id}/delete`} class="inline-form">
                      <Button variant="danger">Remove</Button>
                    </PostForm>
                  </td>
                ) : null}
              </tr>
            ))}
          </Table>
        ) : null}
        {builder ? (
          <p class="muted">
            Testers register their iPhones from their page (ad-hoc builds):{" "}
            <a href={`/v1/projects/${project.id}/devices/export`}>Apple's device file</a> for the developer portal.
          </p>
        ) : null}
        {builder ? (
          <PostForm action={`${base}/testers`} id="add-tester">
            <Field label="Email" name="email" id="tester-email" type="email" required />
            <Field label="Name (optional)" name="name" id="tester-name" />
            <Button>Add tester</Button>
          </PostForm>
        ) : null}
      </Section>
      {builder ? (
        <PostForm action={`${base}/delete`} class="inline-form">
          <Button variant="danger">Delete channel</Button>
        </PostForm>
      ) : null}
    </Layout>
  );
}

const str = (form: Record<string, unknown>, key: string) => (typeof form[key] === "string" ? (form[key] as string) : "");

function invalid(issues: ValidationIssue[]): ApiError {
  return new ApiError("invalid_input", issues.map((i) => `${i.path || "form"}: ${i.message}`).join("; "));
}

export function channelPages(deps: AppDeps) {
  const readers = requireBrowserUser(deps, { roles: ROLES.everyone });
  const builders = requireBrowserUser(deps, { roles: ROLES.builders });
  const show = async (c: Context<AppEnv>, newLink?: { email: string; url: string; mailed: boolean }) => {
    const project = await getProject(deps, c.req.param("project_id")!);
    const channel = await getChannel(deps, project.id, c.req.param("channel_id")!);
    const [releases, testers] = await Promise.all([channelReleases(deps, channel), listTesters(deps, project.id, channel.id)]);
    return renderPage(
      c,
      <ChannelPage ctx={pageContext(c, deps)} project={project} channel={channel} releases={releases} testers={testers} newLink={newLink} />,
    );
  };
  return new Hono<AppEnv>()
    .get("/projects/:project_id/channels/:channel_id", readers, (c) => show(c))
    .post("/projects/:project_id/channels", builders, async (c) => {
      const form = await c.req.parseBody({ all: true });
      const platforms = ([] as unknown[]).concat(form.platforms ?? []).filter((p): p is string => typeof p === "string");
      const branches = str(form, "branches")
        .split(",")
        .map((b) => b.trim())
        .filter(Boolean);
      const parsed = checkForm(createChannelSchema, {
        name: str(form, "name"),
        pipeline_id: str(form, "pipeline_id"),
        ...(branches.length ? { branches } : {}),
        ...(platforms.length ? { platforms } : {}),
      });
      if (!parsed.ok) throw invalid(parsed.issues);
      const projectId = c.req.param("project_id");
      const ch = await createChannel(deps, c.get("user"), projectId, parsed.data);
      setFlash(c, "ok", "Channel created. Add testers to give them its link.");
      return c.redirect(`/projects/${projectId}/channels/${ch.id}`, 303);
    })
    .post("/projects/:project_id/channels/:channel_id/testers", builders, async (c) => {
      const form = await c.req.parseBody();
      const parsed = checkForm(createTesterSchema, { email: str(form, "email"), ...(str(form, "name").trim() ? { name: str(form, "name") } : {}) });
      if (!parsed.ok) throw invalid(parsed.issues);
      const added = await addTester(
        deps,
        c.get("user"),
        c.req.param("project_id"),
        c.req.param("channel_id"),
        parsed.data,
        new URL(c.req.url).origin,
      );
      // The link exists only in this answer: shown here to copy, never stored.
      c.header("Referrer-Policy", "no-referrer");
      return show(c, { email: added.tester.email, url: added.page_url, mailed: added.mailed });
    })
    .post("/projects/:project_id/channels/:channel_id/testers/:tester_id/delete", builders, async (c) => {
      const { project_id, channel_id, tester_id } = c.req.param();
      await removeTester(deps, c.get("user"), project_id, channel_id, tester_id);
      setFlash(c, "ok", "Tester removed: their link no longer works.");
      return c.redirect(`/projects/${project_id}/channels/${channel_id}#testers`, 303);
    })
    .post("/projects/:project_id/channels/:channel_id/delete", builders, async (c) => {
      const { project_id, channel_id } = c.req.param();
      await deleteChannel(deps, c.get("user"), project_id, channel_id);
      setFlash(c, "ok", "Channel deleted: its tester links no longer work.");
      return c.redirect(`/projects/${project_id}#channels`, 303);
    });
}
