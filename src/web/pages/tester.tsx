// The tester page `/apps/{token}` (docs/spec.md §18): a tester without an account finds the channel's latest build
// here, with its notes, an Install button (a POST that makes a one-hour install session and goes to its page), a QR
// code for a desktop visitor, and the earlier releases. Public: the token is the key. No JavaScript needed.
import { Hono, type Context } from "hono";
import { raw } from "hono/html";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import {
  channelOfTester,
  deliveryBaseOf,
  optOutOfReleaseMail,
  resolveTesterLink,
  testerByOptOutToken,
  testerPageUrl,
} from "../../domain/channels/channels.ts";
import type { AppSigning } from "../../domain/artifacts/app-metadata.ts";
import type { StoredAppSigning } from "../../domain/artifacts/mobileprovision.ts";
import {
  resolveTesterPage,
  testerIcon,
  testerInstall,
  testerPage,
  type TesterPageData,
  type TesterPageLink,
} from "../../domain/channels/tester-page.ts";
import { Name, PostForm } from "../components.tsx";
import { Layout, type PageCtx } from "../layout.tsx";
import { formatBytes, isoTime, neutralise } from "../text.ts";
import { pageContext, renderPage } from "../session.tsx";
import { INSTALL_STYLE, PROFILE_EXPIRY_WARNING_S, Qr, deviceOf, neutralInitial, signingHints, type Device } from "./install.tsx";
import { noncePlaceholder, RenderedPageCache } from "../page-cache.ts";

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

/**
 * Earlier builds listed before a link to all of them: a tester wants the last few, and rendering a channel's whole
 * history (up to RELEASES_SCANNED) was most of the page's time (docs/benchmarks.md "Tester page").
 */
export const EARLIER_SHOWN = 20;

function TesterPage(props: {
  ctx: PageCtx;
  data: TesterPageData;
  token: string;
  pageUrl: string;
  device: Device;
  otherBrowser: boolean;
  allEarlier: boolean;
}) {
  const { ctx, data, token, device } = props;
  const [latest, ...allEarlier] = data.releases;
  const earlier = props.allEarlier ? allEarlier : allEarlier.slice(0, EARLIER_SHOWN);
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
    const deviceHint = <DeviceHint token={token} signing={latest.app_metadata?.signing ?? null} registered={data.tester_devices} />;
    if (deviceHint) hints.push(deviceHint);
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
            {earlier.length < allEarlier.length ? (
              <p>
                <a href={`/apps/${token}?earlier=all`} id="all-earlier">
                  All {allEarlier.length} earlier builds
                </a>
              </p>
            ) : null}
          </>
        ) : null}
      </section>
    </Layout>
  );
}

/**
 * Whether this tester's registered devices are in an ad-hoc (or development) build's profile, and the way to
 * register one (docs/api.md §18): the enrolment profile, opened in Safari on the device.
 */
function DeviceHint(props: { token: string; signing: AppSigning | null; registered: string[] }) {
  const { signing, registered } = props;
  if (!signing || (signing.kind !== "ad_hoc" && signing.kind !== "development")) return null;
  const listed = (signing as StoredAppSigning).provisioned_devices;
  const enroll = (
    <a href={`/apps/${props.token}/enroll`} id="enroll-link">
      Register this iPhone
    </a>
  );
  if (registered.length === 0) {
    return (
      <li id="hint-devices">
        You have registered no device yet. {enroll} (open this page in Safari on it): Hangar receives its UDID and the team can add it to the next
        build.
      </li>
    );
  }
  if (!listed) {
    return (
      <li id="hint-devices">
        You registered {registered.length} device{registered.length === 1 ? "" : "s"}; Hangar cannot tell whether this build includes{" "}
        {registered.length === 1 ? "it" : "them"}. {enroll}
      </li>
    );
  }
  const inProfile = new Set(listed.map((u) => u.toUpperCase()));
  const included = registered.filter((u) => inProfile.has(u.toUpperCase()));
  const missing = registered.length - included.length;
  return (
    <li id="hint-devices">
      {missing === 0
        ? `Your registered device${registered.length === 1 ? " is" : "s are"} in this build.`
        : included.length === 0
          ? `Your registered device${registered.length === 1 ? " is" : "s are"} not in this build yet: the team has to add ${registered.length === 1 ? "it" : "them"} to the profile and build again.`
          : `${included.length} of your ${registered.length} registered devices ${included.length === 1 ? "is" : "are"} in this build; the others have to wait for a new build.`}{" "}
      Another iPhone? {enroll}.
    </li>
  );
}

function EnrolledPage(props: { ctx: PageCtx; token: string }) {
  return (
    <Layout ctx={props.ctx} title="Device registered" narrow head={<Head ctx={props.ctx} />}>
      <section class="card install tester" id="enrolled">
        <h1>Device registered</h1>
        <p>
          The team now has this device's identifier. It can install a build once the team adds the device to the app's provisioning profile and builds
          again; your page says when a build includes it.
        </p>
        <p>You may remove the “Register this device” profile in Settings › General › VPN &amp; Device Management: it installed nothing.</p>
        <p>
          <a class="btn btn-primary" href={`/apps/${props.token}`}>
            Back to your page
          </a>
        </p>
      </section>
    </Layout>
  );
}

function OptOutPage(props: { ctx: PageCtx; token: string; done: boolean; channel: string }) {
  return (
    <Layout ctx={props.ctx} title="Release mails" narrow head={<Head ctx={props.ctx} />}>
      <section class="card install tester" id="opt-out">
        <h1>Release mails</h1>
        {props.done ? (
          <p id="opted-out">
            Done: you get no more mails about new builds of <Name value={props.channel} />. Your page still shows every new build.
          </p>
        ) : (
          <>
            <p>
              Stop the mails Hangar sends you when a new build of <Name value={props.channel} /> is ready?
            </p>
            <PostForm action={`/apps/opt-out/${props.token}`}>
              <button type="submit" class="btn btn-primary" id="confirm-opt-out">
                Stop release mails
              </button>
            </PostForm>
          </>
        )}
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

/**
 * Rendered tester pages of this app instance, by link and variant (docs/decisions.md "Tester page cache"). A page
 * at 100 releases is ≈ 21 KB; 8 M characters keep a few hundred of them.
 */
const PAGE_CACHE_CHARS = 8 * 1024 * 1024;

/**
 * The last moment a rendered tester page reads the same with nothing written: its words change by themselves only
 * when the latest build's profile comes within PROFILE_EXPIRY_WARNING_S of its expiry (signingHints warns once
 * `expires_at - now` is less).
 */
function freshThrough(data: TesterPageData, now: number): number {
  const expiresAt = data.releases[0]?.app_metadata?.signing?.expires_at ?? null;
  if (expiresAt === null) return Number.POSITIVE_INFINITY;
  const lastWithoutWarning = expiresAt - PROFILE_EXPIRY_WARNING_S;
  return now <= lastWithoutWarning ? lastWithoutWarning : Number.POSITIVE_INFINITY;
}

export function testerPages(deps: AppDeps) {
  const pages = new RenderedPageCache(PAGE_CACHE_CHARS);
  const optOutPage = async (c: Context<AppEnv>, done: boolean) => {
    const token = c.req.param("token")!;
    const ctx = pageContext(c, deps);
    try {
      const tester = done ? await optOutOfReleaseMail(deps, token) : await testerByOptOutToken(deps, token);
      const channel = await channelOfTester(deps, tester);
      return renderPage(c, <OptOutPage ctx={ctx} token={token} done={done || tester.mailOptOutAt !== null} channel={channel} />);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return renderPage(c, <UnknownLink ctx={ctx} />, 404);
      throw err;
    }
  };
  return (
    new Hono<AppEnv>()
      // Opening the link asks; the button turns mails off: link scanners of mail providers open every link.
      .get("/apps/opt-out/:token", (c) => optOutPage(c, false))
      .post("/apps/opt-out/:token", (c) => optOutPage(c, true))
      .get("/apps/:token/enroll/done", async (c) => {
        const token = c.req.param("token");
        const ctx = pageContext(c, deps);
        try {
          await resolveTesterLink(deps, token);
        } catch (err) {
          if (err instanceof ApiError && err.status === 404) return renderPage(c, <UnknownLink ctx={ctx} />, 404);
          throw err;
        }
        return renderPage(c, <EnrolledPage ctx={ctx} token={token} />);
      })
      .get("/apps/:token", async (c) => {
        const token = c.req.param("token");
        const ctx = pageContext(c, deps);
        let link: TesterPageLink;
        try {
          link = await resolveTesterPage(deps, token);
        } catch (err) {
          if (err instanceof ApiError && err.status === 404) return renderPage(c, <UnknownLink ctx={ctx} />, 404);
          throw err;
        }
        const { device, inAppOrOtherBrowser } = deviceOf(c.req.header("user-agent") ?? "");
        c.header("vary", "User-Agent");
        // The QR code opens this same page on the phone, at the address tester links are given out with.
        const pageUrl = testerPageUrl(deliveryBaseOf(link.network, new URL(c.req.url).origin), token);
        const allEarlier = c.req.query("earlier") === "all";
        // Everything the page's words depend on besides the link's version (a flash message is never kept).
        const key = `${link.tokenHash} ${device} ${inAppOrOtherBrowser} ${allEarlier} ${pageUrl}`;
        if (ctx.flash === null) {
          const kept = pages.get(key, link.version, ctx.now, ctx.nonce);
          if (kept !== null) return c.body(kept, 200, { "content-type": "text/html; charset=UTF-8" });
        }
        const data = await testerPage(deps, link);
        const placeholder = noncePlaceholder();
        const page = (
          <TesterPage
            ctx={{ ...ctx, nonce: placeholder }}
            data={data}
            token={token}
            pageUrl={pageUrl}
            device={device}
            otherBrowser={inAppOrOtherBrowser}
            allEarlier={allEarlier}
          />
        );
        const html = `<!DOCTYPE html>${String(await page)}`;
        if (ctx.flash === null) pages.set(key, link.version, html, placeholder, freshThrough(data, ctx.now));
        return c.html(html.split(placeholder).join(ctx.nonce));
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
      })
  );
}
