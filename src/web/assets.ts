// The UI's one stylesheet and one small script, served by the app itself (no build step, no filesystem:
// the same bytes on Node and Workers). URLs carry a content hash so browsers may cache them for a year.
import { Hono, type Context } from "hono";
import type { AppEnv } from "../deps.ts";
import { ansiUpUrl, hashedAssetUrl, LOG_STYLESHEET, logStylesheetUrl, logViewerSource, logViewerUrl } from "./log-viewer.ts";
import { ANSI_UP_SOURCE } from "./vendor/ansi-up.ts";

export const STYLESHEET = `
:root{color-scheme:light dark;--bg:#f6f7f9;--fg:#1b1f24;--muted:#5b6470;--card:#fff;--border:#d8dde3;--accent:#2457c5;
--accent-fg:#fff;--ok:#1a7f37;--ok-bg:#dafbe1;--bad:#b42318;--bad-bg:#fde7e7;--wait:#8a5a00;--wait-bg:#fff4d6;--info:#1d5fc2;
--info-bg:#dde9ff;--off:#57606a;--off-bg:#eaeef2;--code:#eef1f5;--focus:#7aa2ff;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
@media (prefers-color-scheme:dark){:root{--bg:#0f1216;--fg:#e6e8eb;--muted:#9aa4af;--card:#181c22;--border:#2d343d;--accent:#6c9bff;
--accent-fg:#0b1020;--ok:#4ac26b;--ok-bg:#12301c;--bad:#ff7b72;--bad-bg:#3a1616;--wait:#e3b341;--wait-bg:#33280c;--info:#79b8ff;
--info-bg:#132544;--off:#9aa4af;--off-bg:#252b33;--code:#11151a;--focus:#9db8ff}}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;background:var(--bg);color:var(--fg);font-size:16px;line-height:1.5}
a{color:var(--accent)}
code,pre,kbd,textarea.mono,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em}
code{background:var(--code);padding:.1em .3em;border-radius:4px;overflow-wrap:anywhere}
pre{background:var(--code);padding:.75rem;border-radius:6px;overflow-x:auto}
.topbar{background:var(--card);border-bottom:1px solid var(--border)}
.topbar-inner{max-width:1100px;margin:0 auto;padding:.5rem 1rem;display:flex;flex-wrap:wrap;align-items:center;gap:.5rem 1rem}
.brand{font-weight:700;font-size:1.1rem;color:var(--fg);text-decoration:none;margin-right:.5rem}
.nav{display:flex;flex-wrap:wrap;gap:.25rem;flex:1 1 auto;margin:0;padding:0;list-style:none}
.nav a{display:block;padding:.35rem .6rem;border-radius:6px;color:var(--fg);text-decoration:none}
.nav a:hover{background:var(--code)}
.nav a[aria-current=page]{background:var(--accent);color:var(--accent-fg)}
.who{display:flex;align-items:center;gap:.5rem;font-size:.9rem;color:var(--muted);flex-wrap:wrap}
.who form{margin:0}
main{max-width:1100px;margin:0 auto;padding:1rem}
main.narrow{max-width:560px}
h1{font-size:1.5rem;margin:.5rem 0 1rem}
h2{font-size:1.15rem;margin:0 0 .75rem}
.card{background:var(--card);border:1px solid var(--border);border-radius:10px;padding:1rem;margin:0 0 1rem}
.section-desc,.muted,.hint{color:var(--muted)}
.hint{font-size:.875rem;margin:.25rem 0 0}
.field{margin:0 0 .9rem;border:0;padding:0;min-width:0}
.field>label,.field legend,.copy-field>label{display:block;font-weight:600;margin:0 0 .25rem}
input[type=text],input[type=email],input[type=url],input[type=password],input[type=search],input[type=number],input[type=tel],input[type=date],input[type=time],input[type=datetime-local],input:not([type]),select,textarea{
width:100%;padding:.5rem .6rem;border:1px solid var(--border);border-radius:6px;background:var(--bg);color:var(--fg);font:inherit;min-height:2.5rem}
textarea{resize:vertical}
input:focus-visible,select:focus-visible,textarea:focus-visible,button:focus-visible,a:focus-visible{outline:3px solid var(--focus);outline-offset:1px}
.has-error input,.has-error select,.has-error textarea{border-color:var(--bad)}
.error{color:var(--bad);font-size:.9rem;margin:.25rem 0 0}
.radios .radio{display:flex;gap:.6rem;align-items:flex-start;padding:.6rem;border:1px solid var(--border);border-radius:8px;margin:0 0 .5rem;cursor:pointer}
.radios .radio input{margin-top:.3rem}
.radios .radio .hint{display:block}
.checkbox label{font-weight:400;display:flex;gap:.5rem;align-items:center}
.btn{display:inline-flex;align-items:center;justify-content:center;gap:.4rem;min-height:2.5rem;padding:.45rem .9rem;border-radius:6px;
border:1px solid transparent;font:inherit;font-weight:600;cursor:pointer;text-decoration:none;white-space:nowrap}
.btn-primary{background:var(--accent);color:var(--accent-fg)}
.btn-secondary{background:var(--card);color:var(--fg);border-color:var(--border)}
.btn-danger{background:var(--bad-bg);color:var(--bad);border-color:var(--bad)}
.btn-link{background:none;border:0;color:var(--accent);padding:0;min-height:auto;font-weight:400;text-decoration:underline}
.btn[disabled]{opacity:.5;cursor:not-allowed}
.actions{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin:.5rem 0 0}
.inline-form{display:inline-flex;flex-wrap:wrap;gap:.4rem;align-items:center;margin:0}
.inline-form .field{margin:0}
.table-wrap{overflow-x:auto;margin:0 -.25rem;position:relative}
table{width:100%;border-collapse:collapse;font-size:.95rem}
th,td{text-align:left;padding:.55rem .5rem;border-bottom:1px solid var(--border);vertical-align:middle}
th{font-size:.8rem;text-transform:uppercase;letter-spacing:.03em;color:var(--muted)}
tbody tr:last-child td{border-bottom:0}
.badge{display:inline-block;padding:.1rem .5rem;border-radius:999px;font-size:.8rem;font-weight:600;white-space:nowrap}
.badge-ok{background:var(--ok-bg);color:var(--ok)}.badge-bad{background:var(--bad-bg);color:var(--bad)}
.badge-wait{background:var(--wait-bg);color:var(--wait)}.badge-info{background:var(--info-bg);color:var(--info)}
.badge-off,.badge-neutral{background:var(--off-bg);color:var(--off)}
.flash{padding:.75rem 1rem;border-radius:8px;margin:0 0 1rem;border:1px solid}
.flash-ok{background:var(--ok-bg);color:var(--ok);border-color:var(--ok)}
.flash-error{background:var(--bad-bg);color:var(--bad);border-color:var(--bad)}
.flash-info{background:var(--info-bg);color:var(--info);border-color:var(--info)}
.flash-warn{background:var(--wait-bg);color:var(--wait);border-color:var(--wait)}
.empty{text-align:center;padding:2rem 1rem;color:var(--muted)}
.empty-title{font-weight:600;color:var(--fg);margin:0 0 .5rem}
.name{overflow-wrap:anywhere}
.suspicious{background:var(--wait-bg);color:var(--wait);border-radius:3px;padding:0 .2em}
.copy-field{margin:0 0 .9rem}
.copy-row{display:flex;gap:.4rem;align-items:flex-start}.copy-row .btn[hidden]{display:none}
.copy-row input,.copy-row textarea{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.85rem}
.steps{display:flex;flex-wrap:wrap;gap:.25rem .75rem;list-style:none;padding:0;margin:0 0 1rem;font-size:.9rem;color:var(--muted)}
.steps li[aria-current=step]{color:var(--fg);font-weight:700}
.steps li.done::before{content:"\\2713  "}
.checklist{list-style:none;padding:0;margin:0}
.created-secret{border:2px solid var(--info);border-radius:8px;padding:.8rem;margin:0 0 1rem}
.forge-steps{margin:.5rem 0 0;padding-left:1.3rem}.forge-steps li{margin:0 0 .3rem}
.hint .block{display:block}
.checklist li{display:flex;gap:.6rem;padding:.45rem 0;border-bottom:1px solid var(--border)}
.checklist li:last-child{border-bottom:0}
.checklist .hint{display:block}
.checklist .mark{font-weight:700;width:1.2rem;flex:none}
.checklist .pass .mark{color:var(--ok)}.checklist .fail .mark{color:var(--bad)}.checklist .warn .mark{color:var(--info)}
.grid2{display:grid;grid-template-columns:repeat(auto-fit,minmax(240px,1fr));gap:0 1rem}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
.login-choices{display:grid;gap:.75rem}
.login-choices .btn{width:100%}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;margin:0}
.kv dt{color:var(--muted)}.kv dd{margin:0;overflow-wrap:anywhere}
footer.page-foot{max-width:1100px;margin:0 auto;padding:1rem;color:var(--muted);font-size:.8rem}
@media (max-width:600px){main{padding:.75rem}.card{padding:.8rem}h1{font-size:1.3rem}
.hide-narrow{display:none}.topbar-inner{padding:.5rem .75rem}.kv{grid-template-columns:1fr}.kv dt{margin-top:.4rem}}
`;

/**
 * Progressive enhancement only: every page works without it. Copy buttons appear and copy; a <select>
 * with data-custom-toggle shows its custom field only when "custom" is chosen; forms with data-confirm ask first.
 */
export const SCRIPT = `
(function(){
  document.querySelectorAll("[data-copy]").forEach(function(btn){
    var target=document.querySelector(btn.getAttribute("data-copy"));
    if(!target||!navigator.clipboard)return;
    btn.hidden=false;
    btn.addEventListener("click",function(){
      navigator.clipboard.writeText(target.value||target.textContent||"").then(function(){
        var old=btn.textContent;btn.textContent="Copied";setTimeout(function(){btn.textContent=old},1500);
      });
    });
  });
  document.querySelectorAll("select[data-custom-toggle]").forEach(function(sel){
    var field=document.getElementById(sel.getAttribute("data-custom-toggle"));
    if(!field)return;
    var sync=function(){field.hidden=sel.value!=="custom"};
    sel.addEventListener("change",sync);sync();
  });
  document.querySelectorAll("form[data-confirm]").forEach(function(form){
    form.addEventListener("submit",function(e){if(!window.confirm(form.getAttribute("data-confirm")))e.preventDefault();});
  });
})();
`;

export const stylesheetUrl = hashedAssetUrl("hangar", "css", () => STYLESHEET);
export const scriptUrl = hashedAssetUrl("hangar", "js", () => SCRIPT);

const IMMUTABLE = "public, max-age=31536000, immutable";
const CSS = "text/css; charset=utf-8";
const JS = "text/javascript; charset=utf-8";

function serveAsset(c: Context, body: string, contentType: string): Response {
  return c.body(body, 200, { "Content-Type": contentType, "Cache-Control": IMMUTABLE, "X-Content-Type-Options": "nosniff" });
}

/** An asset answered only at today's URL (its route's pattern lets the hash be computed on first use). */
function onlyAtUrl(url: () => string, body: () => string, contentType: string) {
  return (c: Context) => (c.req.path === url() ? serveAsset(c, body(), contentType) : c.notFound());
}

/** /assets/hangar.<hash>.css and .js; an outdated hash still gets today's file (a page cached across an upgrade). */
export function assetRoutes() {
  return (
    new Hono<AppEnv>()
      .get("/assets/:file{hangar\\.[0-9a-f]{8}\\.css}", (c) => serveAsset(c, STYLESHEET, CSS))
      .get("/assets/:file{hangar\\.[0-9a-f]{8}\\.js}", (c) => serveAsset(c, SCRIPT, JS))
      // The build page's log viewer (docs/decisions.md): its module, the ansi_up module it imports, its stylesheet.
      .get("/assets/:file{log-viewer\\.[0-9a-f]{8}\\.js}", onlyAtUrl(logViewerUrl, logViewerSource, JS))
      .get(
        "/assets/:file{ansi_up\\.[0-9a-f]{8}\\.js}",
        onlyAtUrl(ansiUpUrl, () => ANSI_UP_SOURCE, JS),
      )
      .get(
        "/assets/:file{log-viewer\\.[0-9a-f]{8}\\.css}",
        onlyAtUrl(logStylesheetUrl, () => LOG_STYLESHEET, CSS),
      )
  );
}
