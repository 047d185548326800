// The tester's install page `/install/{token}` (docs/api.md §10): public (the token is the key), one Install button
// for the phone it was opened on, a QR code for a desktop visitor, and plain-language hints for what the phone
// will check before it installs. Works without JavaScript: everything is in the HTML the server sends.
import { Hono } from "hono";
import { raw } from "hono/html";
import { generate } from "lean-qr";
import { toSvgSource } from "lean-qr/extras/svg";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import type { AppMetadata, AppSigning } from "../../domain/artifacts/app-metadata.ts";
import { createInstallLink, installPage, type InstallPageData } from "../../domain/artifacts/install.ts";
import { artifactIcon, getArtifact } from "../../domain/artifacts/artifacts.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { CopyField, Name, PostForm } from "../components.tsx";
import { Layout, type PageCtx } from "../layout.tsx";
import { formatBytes, isoTime, neutralise } from "../text.ts";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";

export type Device = "ios" | "android" | "desktop";

/** Which kind of device asks: enough to order the page (a wrong guess still shows every part). */
export function deviceOf(userAgent: string): { device: Device; inAppOrOtherBrowser: boolean } {
  if (/iPhone|iPad|iPod/.test(userAgent)) {
    // Safari's UA names Safari and none of the other iOS browsers' or in-app browsers' markers.
    const safari = /Safari\//.test(userAgent) && !/CriOS|FxiOS|EdgiOS|OPiOS|GSA\/|FBAN|FBAV|Instagram|Line\/|Twitter|Slack/.test(userAgent);
    return { device: "ios", inAppOrOtherBrowser: !safari };
  }
  if (/Android/.test(userAgent)) return { device: "android", inAppOrOtherBrowser: false };
  return { device: "desktop", inAppOrOtherBrowser: false };
}

/** "expires in 59 minutes": minutes rounded down, so the page never promises more time than is left. */
export function expiresIn(expiresAt: number, now: number): string {
  const left = expiresAt - now;
  if (left <= 0) return "has expired";
  if (left < 60) return "expires in less than a minute";
  const minutes = Math.floor(left / 60);
  if (minutes < 120) return `expires in ${minutes} minute${minutes === 1 ? "" : "s"}`;
  return `expires in ${Math.floor(minutes / 60)} hours`;
}

// Recently drawn QR codes by text. lean-qr's automatic mask choice costs 1–3 ms a code, and a tester page shows the
// same code on every visit (docs/benchmarks.md "Tester page"); a bounded map keeps memory small (a code is ≈ 5 KB).
const QR_CACHE_SIZE = 256;
const qrCache = new Map<string, string>();

/** The QR code of `text` as an inline SVG (lean-qr: no dependencies, runs on Workers too). */
export function qrSvg(text: string): string {
  const cached = qrCache.get(text);
  if (cached !== undefined) {
    // Most recently used last: the first key is the one to drop.
    qrCache.delete(text);
    qrCache.set(text, cached);
    return cached;
  }
  const code = generate(text);
  // The SVG holds only path data computed from `text`: no string from the request reaches it as markup.
  const svg = toSvgSource(code, { on: "#000", off: "#fff", pad: 4, xmlDeclaration: false });
  if (qrCache.size >= QR_CACHE_SIZE) qrCache.delete(qrCache.keys().next().value!);
  qrCache.set(text, svg);
  return svg;
}

const date = (epochSeconds: number) => isoTime(epochSeconds).slice(0, 10);

export const INSTALL_STYLE = `
.install{text-align:center}
.install .app-icon{width:96px;height:96px;border-radius:22px;display:block;margin:0 auto .75rem;border:1px solid var(--border)}
.install .app-icon-placeholder{display:flex;align-items:center;justify-content:center;font-size:2.5rem;font-weight:700;background:var(--border);color:var(--fg)}
.install h1{margin:.25rem 0;overflow-wrap:anywhere}
.install .facts{list-style:none;padding:0;margin:.5rem 0 1rem;color:var(--muted);font-size:.95rem}
.install .facts li{margin:.15rem 0;overflow-wrap:anywhere}
.install .install-button{width:100%;max-width:20rem;font-size:1.1rem;min-height:3rem}
.install .hints{text-align:left;margin:1rem 0 0;padding-left:1.2rem}
.install .hints li{margin:.4rem 0}
.install .qr{margin:1rem auto 0;max-width:16rem}
.install .qr svg{width:100%;height:auto;display:block;border-radius:6px}
.install .qr figcaption{font-size:.875rem;color:var(--muted);margin-top:.4rem}
.install .warn{background:var(--wait-bg);color:var(--wait);border:1px solid var(--wait);border-radius:8px;padding:.6rem .8rem;text-align:left}
.install details{margin-top:1rem}
.install .copy-field{text-align:left}
`;

function Head(props: { ctx: PageCtx }) {
  return (
    <>
      <meta name="robots" content="noindex" />
      <style nonce={props.ctx.nonce}>{raw(INSTALL_STYLE)}</style>
    </>
  );
}

export function Qr(props: { url: string; caption: string }) {
  return (
    <figure class="qr" id="qr">
      {raw(qrSvg(props.url))}
      <figcaption>{props.caption}</figcaption>
    </figure>
  );
}

/** How long before a provisioning profile's expiry the install and tester pages warn about it. */
export const PROFILE_EXPIRY_WARNING_S = 14 * 86400;

export function signingHints(signing: AppSigning | null, device: Device, now: number) {
  if (!signing) return [];
  const hints = [];
  if (signing.kind === "ad_hoc" || signing.kind === "development") {
    const count = signing.device_count ?? 0;
    hints.push(
      <li id="hint-udid">
        This is {signing.kind === "ad_hoc" ? "an ad-hoc" : "a development"} build for the {count} device{count === 1 ? "" : "s"} registered in its
        provisioning profile
        {signing.profile_name ? (
          <>
            {" "}
            “<Name value={signing.profile_name} />”
          </>
        ) : null}
        . Your {device === "ios" ? "iPhone's" : "device's"} UDID must be one of them, or the install ends with “Unable to install”: ask the developer
        to add your device and build again.
      </li>,
    );
  }
  if (signing.kind === "enterprise") {
    hints.push(
      <li id="hint-trust">
        If the app will not open after installing (“Untrusted Enterprise Developer”), open Settings › General › VPN &amp; Device Management, tap
        {signing.team ? (
          <>
            {" "}
            <Name value={signing.team} />
          </>
        ) : (
          " the developer's profile"
        )}{" "}
        and choose Trust.
      </li>,
    );
  }
  if (signing.expires_at !== null && signing.expires_at - now < PROFILE_EXPIRY_WARNING_S) {
    hints.push(<li id="hint-profile-expiry">The provisioning profile expires on {date(signing.expires_at)}; after that the app no longer opens.</li>);
  }
  return hints;
}

function InstallPage(props: { ctx: PageCtx; data: InstallPageData; token: string; device: Device; otherBrowser: boolean }) {
  const { data, device, ctx } = props;
  const app: AppMetadata | null = data.app;
  const forIos = data.platform === "ios";
  const wrongPhone = (forIos && device === "android") || (!forIos && device === "ios");
  const version = app?.version ?? null;
  const build = app?.build ?? null;
  const hints = [];
  if (forIos) {
    hints.push(
      <li id="hint-safari">
        {props.otherBrowser ? <strong>Open this page in Safari. </strong> : "Open this page in Safari. "}
        Other browsers and the browsers inside apps (Mail, Slack, Gmail) cannot install apps: copy the link and paste it into Safari.
      </li>,
    );
    hints.push(...signingHints(app?.signing ?? null, device, ctx.now));
    hints.push(
      <li id="hint-stall">
        Nothing happens or the icon stays grey? Keep this page open until the install finishes, check that the phone has space, and delete an older
        copy of the app first if it came from the App Store.
      </li>,
    );
  } else {
    hints.push(
      <li id="hint-android">
        The button downloads the APK. Open it from the download notification; if Android asks, allow your browser to install unknown apps.
        {app?.min_os ? ` It needs Android API level ${app.min_os} or newer.` : ""}
      </li>,
    );
  }
  hints.push(
    <li id="hint-expiry">
      This link {expiresIn(data.expires_at, ctx.now)} (at {isoTime(data.expires_at).slice(11, 16)} UTC). After that, ask for a new one.
    </li>,
  );
  const qrCaption = `Scan with your ${forIos ? "iPhone's" : "phone's"} camera to open this page there.`;
  return (
    <Layout ctx={ctx} title={`Install ${neutralise(data.title)}`} narrow head={<Head ctx={ctx} />}>
      <section class="card install" aria-labelledby="app-name">
        {data.has_icon ? (
          <img class="app-icon" src={`/install/icon/${props.token}`} alt="" width={96} height={96} />
        ) : (
          <div class="app-icon app-icon-placeholder" aria-hidden="true">
            {neutralInitial(data.title)}
          </div>
        )}
        <h1 id="app-name">
          <Name value={data.title} />
        </h1>
        <ul class="facts">
          {version || build ? (
            <li id="version">
              Version <Name value={version ?? build} />
              {version && build ? (
                <>
                  {" "}
                  (<Name value={build} />)
                </>
              ) : null}
            </li>
          ) : null}
          {data.build ? (
            <li id="build">
              Build #{data.build.number}
              {data.build.branch ? (
                <>
                  {" "}
                  on <Name value={data.build.branch} />
                </>
              ) : null}
              {data.build.commit_sha ? (
                <>
                  {" "}
                  · commit <code>{data.build.commit_sha.slice(0, 7)}</code>
                </>
              ) : null}
            </li>
          ) : null}
          <li>
            {forIos ? "iPhone and iPad" : "Android"} · {formatBytes(data.size_bytes)}
            {app?.min_os && forIos ? ` · iOS ${app.min_os} or newer` : ""}
          </li>
          <li id="expiry">
            <time datetime={isoTime(data.expires_at)}>{`This link ${expiresIn(data.expires_at, ctx.now)}`}</time>
          </li>
        </ul>
        {wrongPhone ? (
          <p class="warn" id="wrong-device">
            This build is for {forIos ? "iPhone and iPad" : "Android"}; it will not install on this {device === "ios" ? "iPhone" : "phone"}.
          </p>
        ) : null}
        {device === "desktop" ? <Qr url={data.page_url} caption={qrCaption} /> : null}
        <p>
          <a class="btn btn-primary install-button" id="install" href={data.install_url}>
            Install
          </a>
        </p>
        <ul class="hints">{hints}</ul>
        {device !== "desktop" ? (
          <details>
            <summary>QR code for another device</summary>
            <Qr url={data.page_url} caption={qrCaption} />
          </details>
        ) : null}
      </section>
    </Layout>
  );
}

/** One letter for the icon placeholder; anything that is not a letter or digit shows as a box. */
export function neutralInitial(title: string): string {
  const first = [...title.trim()][0] ?? "?";
  return /[\p{L}\p{N}]/u.test(first) ? first.toUpperCase() : "?";
}

function ExpiredPage(props: { ctx: PageCtx; expired: boolean }) {
  return (
    <Layout ctx={props.ctx} title={props.expired ? "This link has expired" : "This link is not valid"} narrow head={<Head ctx={props.ctx} />}>
      <section class="card install" id="expired">
        <h1>{props.expired ? "This link has expired" : "This link is not valid"}</h1>
        <p>
          {props.expired
            ? "Install links work for one hour. Ask the person who sent it for a new link."
            : "This install link does not exist or was removed. Check that you opened the whole link, or ask for a new one."}
        </p>
      </section>
    </Layout>
  );
}

type ArtifactJson = Awaited<ReturnType<typeof getArtifact>>;

/**
 * For the build page: an artifact's icon and, for an .ipa or .apk, the "Install link" button (a POST to
 * /artifacts/{id}/install-link, which answers with the page URL and its QR code).
 */
export function ArtifactInstall(props: { artifact: Pick<ArtifactJson, "id" | "filename" | "app"> }) {
  const { artifact } = props;
  const installable = /\.(ipa|apk)$/i.test(artifact.filename);
  return (
    <span class="artifact-install">
      {artifact.app?.has_icon ? <img class="artifact-icon" src={`/artifacts/${artifact.id}/icon`} alt="" width={32} height={32} /> : null}
      {installable ? (
        <PostForm action={`/artifacts/${artifact.id}/install-link`} class="inline-form">
          <button type="submit" class="btn btn-secondary">
            Install link
          </button>
        </PostForm>
      ) : null}
    </span>
  );
}

/** The answer to "Install link": the page URL to send, its QR code, and when it expires. */
function InstallLinkPage(props: {
  ctx: PageCtx;
  artifact: ArtifactJson;
  link: { page_url: string; expires_at: number; platform: string };
  buildId: string;
}) {
  const { ctx, artifact, link } = props;
  const name = artifact.app?.name ?? artifact.install_metadata?.title ?? artifact.filename;
  return (
    <Layout ctx={ctx} title="Install link" narrow head={<Head ctx={ctx} />}>
      <section class="card install" id="install-link">
        {artifact.app?.has_icon ? <img class="app-icon" src={`/artifacts/${artifact.id}/icon`} alt="" width={96} height={96} /> : null}
        <h1>
          Install link for <Name value={name} />
        </h1>
        <p class="muted">
          Send this link to a tester, or let them scan the code with their {link.platform === "ios" ? "iPhone" : "phone"}. It{" "}
          {expiresIn(link.expires_at, ctx.now)}.
        </p>
        <CopyField id="page-url" label="Install page" value={link.page_url} />
        <Qr url={link.page_url} caption="Scan with the phone's camera to open the install page." />
        <p class="actions">
          <a class="btn btn-primary" href={link.page_url}>
            Open the install page
          </a>
          <a class="btn btn-secondary" href={`/builds/${props.buildId}`}>
            Back to the build
          </a>
        </p>
      </section>
    </Layout>
  );
}

export function installPages(deps: AppDeps) {
  return (
    new Hono<AppEnv>()
      // The icon for signed-in pages (the /v1/ twin takes a Bearer token, never the cookie).
      .get("/artifacts/:artifact_id/icon", requireBrowserUser(deps, { roles: ROLES.everyone }), async (c) => {
        const png = await artifactIcon(deps, c.req.param("artifact_id"));
        return new Response(png, {
          headers: {
            "content-type": "image/png",
            "content-length": String(png.length),
            "cache-control": "private, max-age=300",
            "x-content-type-options": "nosniff",
          },
        });
      })
      .post("/artifacts/:artifact_id/install-link", requireBrowserUser(deps, { roles: ROLES.everyone }), async (c) => {
        const artifactId = c.req.param("artifact_id");
        const artifact = await getArtifact(deps, artifactId);
        // 412/422 (no delivery URL, App Store signing, an expired profile) render as a page in words (web onError).
        const link = await createInstallLink(deps, { artifactId });
        return renderPage(c, <InstallLinkPage ctx={pageContext(c, deps)} artifact={artifact} link={link} buildId={artifact.build_id} />);
      })
      .get("/install/:token", async (c) => {
        const token = c.req.param("token");
        const ctx = pageContext(c, deps);
        let data: InstallPageData;
        try {
          data = await installPage(deps, { token });
        } catch (err) {
          // A tester gets a page in words, never a JSON error.
          if (err instanceof ApiError && (err.status === 410 || err.status === 404)) {
            return renderPage(c, <ExpiredPage ctx={ctx} expired={err.status === 410} />, err.status);
          }
          throw err;
        }
        const { device, inAppOrOtherBrowser } = deviceOf(c.req.header("user-agent") ?? "");
        // The page differs by device: a shared cache must not hand an iPhone's page to a desktop.
        c.header("vary", "User-Agent");
        return renderPage(c, <InstallPage ctx={ctx} data={data} token={token} device={device} otherBrowser={inAppOrOtherBrowser} />);
      })
  );
}
