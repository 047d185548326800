// The tester page `/apps/{token}` (docs/spec.md §18): a tester without an account finds the channel's latest build
// here, with its notes, an Install button (a POST that makes a one-hour install session and goes to its page), a QR
// code for a desktop visitor, and the earlier releases. Public: the token is the key. No JavaScript needed.
import { Hono } from "hono";
import { raw } from "hono/html";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { deliveryBase, testerPageUrl } from "../../domain/channels/channels.ts";
import { testerIcon, testerInstall, testerPage, type TesterPageData } from "../../domain/channels/tester-page.ts";
import { Name, PostForm } from "../components.tsx";
import { Layout, type PageCtx } from "../layout.tsx";
import { formatBytes, isoTime, neutralise } from "../text.ts";
import { pageContext, renderPage } from "../session.tsx";
import { INSTALL_STYLE, Qr, deviceOf, neutralInitial, signingHints, type Device } from "./install.tsx";

const TESTER_STYLE = `
.tester .notes{white-space:pre-line;text-align:left;overflow-wrap:anywhere;margin:.75rem 0;padding:.6rem .8rem;border:1px solid var(--border);border-radius:8px}
.tester .earlier{text-align:left;list-style:none;padding:0}
.tester .earlier li{border-top:1px solid var(--border);padding:.6rem 0}
.tester .earlier form{display:inline}
.tester .earlier .meta{color:var(--muted);font-size:.9rem}
`;

function Head(props: { ctx: PageCtx }) {
  return (
    <>
      <meta name="robots" content="noindex" />
      <style nonce={props.ctx.nonce}>{raw(INSTALL_STYLE + TESTER_STYLE)}</style>
    </>
  );
}

type ReleaseView = TesterPageData["releases"][number];
const day = (epochSeconds: number) => isoTime(epochSeconds).slice(0, 10);

function VersionText(props: { release: ReleaseView }) {
  const { version, build } = props.release.app;
  if (!version && !build) return <>Build #{props.release.build_number}</>;
  return (
    <>
      Version <Name value={version ?? build} />
      {version && build ? (
        <>
          {" "}
          (<Name value={build} />)
        </>
      ) : null}
    </>
  );
}

function InstallForm(props: { token: string; release: ReleaseView; primary?: boolean }) {
  return (
    <PostForm action={`/apps/${props.token}/install`} class={props.primary ? undefined : "inline-form"}>
      <input type="hidden" name="artifact_id" value={props.release.artifact_id} />
      <button type="submit" class={props.primary ? "btn btn-primary install-button" : "btn btn-secondary"} id={props.primary ? "install" : undefined}>
        Install
      </button>
    </PostForm>
  );
}

function TesterPage(props: { ctx: PageCtx; data: TesterPageData; token: string; pageUrl: string; device: Device; otherBrowser: boolean }) {
  const { ctx, data, token, device } = props;
  const [latest, ...earlier] = data.releases;
  const title = latest?.app.name ?? data.channel_name;
  if (!latest) {
    return (
      <Layout ctx={ctx} title={neutralise(title)} narrow head={<Head ctx={ctx} />}>
        <section class="card install tester">
          <h1 id="app-name">
            <Name value={data.channel_name} />
          </h1>
          <p id="no-release">There is no build to install yet. This page shows it as soon as there is one: keep the link.</p>
        </section>
      </Layout>
    );
  }
  const forIos = latest.platform === "ios";
  const hints = [];
  if (forIos) {
    hints.push(
      <li id="hint-safari">
        {props.otherBrowser ? <strong>Open this page in Safari. </strong> : "Open this page in Safari. "}
        Other browsers and the browsers inside apps (Mail, Slack, Gmail) cannot install apps: copy the link and paste it into Safari.
      </li>,
    );
    hints.push(...signingHints(latest.app_metadata?.signing ?? null, device, ctx.now));
  } else {
    hints.push(
      <li id="hint-android">
        Install downloads the APK. Open it from the download notification; if Android asks, allow your browser to install unknown apps.
      </li>,
    );
  }
  hints.push(
    <li id="hint-link">This page is yours: it always shows the latest build. Each Install works for one hour; come back here for a fresh one.</li>,
  );
  const qrCaption = `Scan with your ${forIos ? "iPhone's" : "phone's"} camera to open this page there.`;
  return (
    <Layout ctx={ctx} title={neutralise(title)} narrow head={<Head ctx={ctx} />}>
      <section class="card install tester" aria-labelledby="app-name">
        {latest.has_icon ? (
          <img class="app-icon" src={`/apps/${token}/icon/${latest.artifact_id}`} alt="" width={96} height={96} />
        ) : (
          <div class="app-icon app-icon-placeholder" aria-hidden="true">
            {neutralInitial(title)}
          </div>
        )}
        <h1 id="app-name">
          <Name value={title} />
        </h1>
        <ul class="facts">
          <li id="version">
            <VersionText release={latest} />
          </li>
          <li id="released">
            Build #{latest.build_number} on <Name value={latest.branch} /> ·{" "}
            <time datetime={isoTime(latest.created_at)}>{day(latest.created_at)}</time>
          </li>
          <li>
            {forIos ? "iPhone and iPad" : "Android"} · {formatBytes(latest.size_bytes)} · channel <Name value={data.channel_name} />
          </li>
        </ul>
        {latest.release_notes ? (
          <div class="notes" id="notes">
            {neutralise(latest.release_notes)}
          </div>
        ) : null}
        {device === "desktop" ? <Qr url={props.pageUrl} caption={qrCaption} /> : null}
        <InstallForm token={token} release={latest} primary />
        <ul class="hints">{hints}</ul>
        {earlier.length ? (
          <>
            <h2>Earlier builds</h2>
            <ul class="earlier" id="earlier">
              {earlier.map((r) => (
                <li>
                  <div>
                    <VersionText release={r} />{" "}
                    <span class="meta">
                      · #{r.build_number} · <Name value={r.branch} /> · {day(r.created_at)}
                    </span>
                  </div>
                  {r.release_notes ? <div class="notes">{neutralise(r.release_notes)}</div> : null}
                  <InstallForm token={token} release={r} />
                </li>
              ))}
            </ul>
          </>
        ) : null}
      </section>
    </Layout>
  );
}

function UnknownLink(props: { ctx: PageCtx }) {
  return (
    <Layout ctx={props.ctx} title="This link is not valid" narrow head={<Head ctx={props.ctx} />}>
      <section class="card install" id="expired">
        <h1>This link is not valid</h1>
        <p>This tester link does not exist or was withdrawn. Check that you opened the whole link, or ask the team for a new one.</p>
      </section>
    </Layout>
  );
}

export function testerPages(deps: AppDeps) {
  return new Hono<AppEnv>()
    .get("/apps/:token", async (c) => {
      const token = c.req.param("token");
      const ctx = pageContext(c, deps);
      let data: TesterPageData;
      try {
        data = await testerPage(deps, token);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return renderPage(c, <UnknownLink ctx={ctx} />, 404);
        throw err;
      }
      const { device, inAppOrOtherBrowser } = deviceOf(c.req.header("user-agent") ?? "");
      c.header("vary", "User-Agent");
      // The QR code opens this same page on the phone, at the address tester links are given out with.
      const pageUrl = testerPageUrl(await deliveryBase(deps, new URL(c.req.url).origin), token);
      return renderPage(c, <TesterPage ctx={ctx} data={data} token={token} pageUrl={pageUrl} device={device} otherBrowser={inAppOrOtherBrowser} />);
    })
    .get("/apps/:token/icon/:artifact_id", async (c) => {
      const png = await testerIcon(deps, c.req.param("token"), c.req.param("artifact_id"));
      return new Response(png, {
        headers: {
          "content-type": "image/png",
          "content-length": String(png.length),
          "cache-control": "no-store",
          "x-content-type-options": "nosniff",
          "referrer-policy": "no-referrer",
        },
      });
    })
    .post("/apps/:token/install", async (c) => {
      const form = await c.req.parseBody();
      const artifactId = typeof form.artifact_id === "string" ? form.artifact_id : "";
      // 412/422 (no HTTPS delivery URL, App Store signing) render as a page in words (web onError).
      const link = await testerInstall(deps, c.req.param("token"), artifactId);
      return c.redirect(link.page_url, 303);
    });
}
