// The build page's live log (docs/api.md §10), as one small ES module served from /assets/ with no build step.
// It loads the tail of the log first, renders only the lines in view (a window over an array of lines, so a log of
// tens of MiB never becomes tens of MiB of DOM), follows new lines from Server-Sent Events (each event's id is the
// byte offset after it, so a reconnect resumes with Last-Event-ID and no line appears twice or goes missing), and
// falls back to polling the offset endpoint where EventSource is missing. ANSI colours go through ansi_up (served
// beside it, vendor/ansi-up.ts), which HTML-escapes the text; its inline styles become CSSOM writes because the
// page's CSP refuses style attributes.
import { ANSI_UP_SOURCE } from "./vendor/ansi-up.ts";

/** FNV-1a, enough to tell two versions of a file apart in a URL. */
export function shortHash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, "0");
}

/**
 * `/assets/<name>.<hash of the file>.<ext>`, hashed when a page first asks: hashing the UI's ~150 KB of assets at
 * import took ~3 ms of every daemon start, and made the loop hot enough to bring in V8's optimizing compiler (about
 * 4 MiB of resident memory) before the daemon had served anything (docs/benchmarks.md).
 */
export function hashedAssetUrl(name: string, ext: string, source: () => string): () => string {
  let url: string | undefined;
  return () => (url ??= `/assets/${name}.${shortHash(source())}.${ext}`);
}

export const ansiUpUrl = hashedAssetUrl("ansi_up", "js", () => ANSI_UP_SOURCE);

/** Bytes of the tail loaded first, and of each earlier window loaded while scrolling up. */
export const LOG_TAIL_BYTES = 256 * 1024;
export const LOG_WINDOW_BYTES = 1024 * 1024;
/** Characters of one log line the viewer renders; a longer line is cut with a link to the raw log. */
export const LOG_LINE_SHOWN_CHARS = 2000;

/** The viewer module (it names ansi_up by its hashed URL, so it is built on first use too). */
let logViewerModule: string | undefined;
export const logViewerSource = (): string =>
  (logViewerModule ??= `
import { AnsiUp } from ${JSON.stringify(ansiUpUrl())};

const LH = 18;          // px per line: fixed (white-space: pre, no wrapping), so line i sits at i * LH
const OVERSCAN = 30;    // lines rendered above and below the viewport
const TAIL = ${LOG_TAIL_BYTES};
const WINDOW = ${LOG_WINDOW_BYTES};
const BIDI = /[\\u061C\\u200E\\u200F\\u202A-\\u202E\\u2066-\\u2069]/g;
const SHOWN = ${LOG_LINE_SHOWN_CHARS}; // characters of one line rendered; the rest is in the raw log

const root = document.getElementById("log");
if (root) start(root);

function start(root) {
  const logUrl = root.dataset.logUrl;
  const eventsUrl = root.dataset.eventsUrl;
  const stateEl = document.getElementById("log-state");
  const spacer = document.createElement("div");
  spacer.className = "log-spacer";
  const win = document.createElement("div");
  win.className = "log-window";
  spacer.appendChild(win);
  root.textContent = "";
  root.appendChild(spacer);

  const au = new AnsiUp();
  au.use_classes = true;
  au.url_allowlist = {}; // log text stays inert: no links out of it
  const decoder = new TextDecoder();

  // Complete lines, \\r-collapsed, as one array per loaded window: an earlier window is put in front as a whole,
  // so loading the 50th window of a long log copies nothing that was loaded before.
  let segs = [[]];
  let loaded = 0;         // lines in segs
  let partial = "";       // the unfinished last line, raw
  let linesBefore = 0;    // lines of the log before the loaded ones (not fetched yet)
  let loadedStart = 0;    // byte offset of the first loaded line
  let next = 0;           // byte offset after the last byte received
  let complete = false;
  let following = true;
  let highlight = 0;      // 1-based line number from #L…
  let loadingEarlier = false;
  let scheduled = false;
  // Line numbers (1-based) whose text starts inside the line: a window began within a line longer than itself.
  const pieces = new Set();
  let stalled = false;

  const collapse = (line) => {
    if (line.endsWith("\\r")) line = line.slice(0, -1);
    const cr = line.lastIndexOf("\\r");
    return cr >= 0 ? line.slice(cr + 1) : line;
  };
  const total = () => linesBefore + loaded + (partial !== "" ? 1 : 0);
  const lineAt = (k) => {
    for (const seg of segs) {
      if (k < seg.length) return seg[k];
      k -= seg.length;
    }
    return "";
  };
  const atBottom = () => root.scrollTop + root.clientHeight >= root.scrollHeight - LH;
  const setState = (text) => { if (stateEl) stateEl.textContent = text; };

  // A line longer than SHOWN is cut for display, with a link to the raw log: ansi_up and the layout then never see
  // more than SHOWN characters per line, however long the line (up to the log cap). A cut never ends inside an
  // escape sequence (it would show as text).
  function shownHtml(text, no) {
    const piece = pieces.has(no);
    if (text.length <= SHOWN && !piece) return lineHtml(text);
    const shown = text.length <= SHOWN ? text : text.slice(0, SHOWN).replace(/\\u001b\\[[0-9;]*$/, "");
    const rest = text.length - shown.length;
    return (piece ? '<span class="ln-cut">…</span>' : "") + lineHtml(shown) +
      ' <a class="ln-cut" href="' + logUrl + '" target="_blank" rel="noopener">' +
      (rest > 0 ? "… " + rest + " more characters: " : "part of a long line: ") + "raw log</a>";
  }

  function lineHtml(text) {
    // ansi_up escapes &, <, >, " and '; its spans carry style="…" which the CSP would refuse: keep the value
    // in data-s and apply it through CSSOM below. The text itself can never form a tag (it is escaped).
    // Bidi controls pass through escaping untouched and would reorder the line (Trojan Source): each one is
    // shown as a visible <U+202E> marker, as names are elsewhere on the page.
    return au.ansi_to_html(text + "\\u001b[0m")
      .replace(/<span style="/g, '<span data-s="')
      .replace(BIDI, (ch) => '<span class="ctl">&lt;U+' + ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + "&gt;</span>");
  }

  function render() {
    scheduled = false;
    const n = total();
    spacer.style.height = n * LH + "px";
    const first = Math.max(0, Math.floor(root.scrollTop / LH) - OVERSCAN);
    const last = Math.min(n, Math.ceil((root.scrollTop + root.clientHeight) / LH) + OVERSCAN);
    win.style.transform = "translateY(" + first * LH + "px)";
    let html = "";
    for (let i = first; i < last; i++) {
      const no = i + 1;
      let text;
      if (i < linesBefore) text = null;
      else if (i - linesBefore < loaded) text = lineAt(i - linesBefore);
      else text = collapse(partial);
      const cls = no === highlight ? "ln hl" : "ln";
      html += '<div class="' + cls + '" id="L' + no + '"><a class="ln-no" href="#L' + no + '">' + no + "</a>" +
        (text === null ? '<span class="ln-text muted">…</span>' : '<span class="ln-text">' + shownHtml(text, no) + "</span>") + "</div>";
    }
    win.innerHTML = html;
    for (const el of win.querySelectorAll("[data-s]")) el.style.cssText = el.getAttribute("data-s");
    if (root.scrollTop < (linesBefore + 50) * LH && linesBefore > 0 && !stalled) loadEarlier();
  }
  const schedule = () => { if (!scheduled) { scheduled = true; requestAnimationFrame(render); } };

  function append(text) {
    if (text === "") return;
    const follow = following && atBottom();
    const parts = (partial + text).split("\\n");
    partial = parts.pop();
    const last = segs[segs.length - 1];
    for (const p of parts) last.push(collapse(p));
    loaded += parts.length;
    if (follow) { render(); root.scrollTop = root.scrollHeight; }
    schedule();
  }

  async function fetchWindow(query) {
    const res = await fetch(logUrl + query, { credentials: "same-origin" });
    if (!res.ok) throw new Error("the log could not be loaded (" + res.status + ")");
    return {
      text: decoder.decode(new Uint8Array(await res.arrayBuffer())),
      start: Number(res.headers.get("x-log-start-offset")),
      next: Number(res.headers.get("x-log-next-offset")),
      linesBefore: Number(res.headers.get("x-log-lines-before")),
      midLine: res.headers.get("x-log-mid-line") === "true",
      complete: res.headers.get("x-log-complete") === "true",
    };
  }

  async function loadEarlier() {
    if (loadingEarlier || linesBefore === 0) return;
    loadingEarlier = true;
    try {
      const w = await fetchWindow("?before=" + loadedStart + "&limit=" + WINDOW);
      // Every window must move the start back; one that does not would be asked for again and again.
      if (!(w.start < loadedStart)) { stalled = true; setState("the earlier log could not be loaded: see the raw log"); return; }
      const earlier = w.text.split("\\n");
      earlier.pop(); // the window ends at a line start: the last element is empty
      const added = linesBefore - w.linesBefore;
      if (w.midLine && added > 0) pieces.add(w.linesBefore + 1);
      // Keep the same lines in view: the content above grows by nothing (placeholders become lines).
      segs.unshift(earlier.slice(earlier.length - added).map(collapse));
      loaded += added;
      linesBefore = w.linesBefore;
      loadedStart = w.start;
      schedule();
    } catch (e) {
      setState(String(e.message || e));
    } finally {
      loadingEarlier = false;
    }
  }

  async function goToHash() {
    const m = /^#L(\\d+)$/.exec(location.hash);
    if (!m) return;
    highlight = Number(m[1]);
    following = false;
    while (highlight - 1 < linesBefore && !loadingEarlier) {
      await loadEarlier();
      if (loadingEarlier) break;
    }
    render();
    root.scrollTop = Math.max(0, (highlight - 1) * LH - root.clientHeight / 3);
    schedule();
  }

  let retries = 0;
  function stream() {
    if (complete) return;
    if (!("EventSource" in window)) return poll();
    const es = new EventSource(eventsUrl + "?offset=" + next);
    es.addEventListener("log", (e) => {
      const d = JSON.parse(e.data);
      // Bytes the page already has are never shown twice (with Last-Event-ID the stream resumes exactly at next).
      if (d.from !== next) return;
      next = Number(e.lastEventId);
      append(d.text);
    });
    es.addEventListener("build", (e) => window.dispatchEvent(new CustomEvent("hangar:build", { detail: JSON.parse(e.data) })));
    es.addEventListener("end", () => {
      es.close();
      complete = true;
      setState("");
      window.dispatchEvent(new CustomEvent("hangar:log-end"));
      finished();
    });
    es.onopen = () => {
      retries = 0;
      setState("live");
    };
    es.onerror = () => {
      setState(complete ? "" : "reconnecting…");
      // The browser reconnects by itself after a dropped stream, but gives up for good after an HTTP error answer
      // (a 429 or 503 while the daemon is busy or restarting): open a new stream then, later each time.
      if (es.readyState === EventSource.CLOSED && !complete) {
        retries++;
        setTimeout(stream, Math.min(30000, 1000 * 2 ** Math.min(retries - 1, 5)));
      }
    };
  }

  async function poll() {
    while (!complete) {
      try {
        const w = await fetchWindow("?offset=" + next);
        next = w.next;
        complete = w.complete;
        append(w.text);
      } catch (e) {
        setState(String(e.message || e));
      }
      if (!complete) await new Promise((r) => setTimeout(r, 1000));
    }
    finished();
  }

  root.addEventListener("scroll", () => {
    following = atBottom();
    schedule();
  }, { passive: true });
  window.addEventListener("hashchange", goToHash);
  const followBtn = document.getElementById("log-follow");
  if (followBtn) {
    followBtn.hidden = false;
    followBtn.addEventListener("click", () => { following = true; root.scrollTop = root.scrollHeight; schedule(); });
  }

  (async () => {
    try {
      setState("loading…");
      const w = await fetchWindow("?tail=" + TAIL);
      linesBefore = w.linesBefore;
      loadedStart = w.start;
      next = w.next;
      complete = w.complete;
      if (w.midLine) pieces.add(w.linesBefore + 1);
      const parts = w.text.split("\\n");
      partial = parts.pop();
      segs = [parts.map(collapse)];
      loaded = segs[0].length;
      render();
      root.scrollTop = root.scrollHeight;
      render();
      root.dataset.ready = "true";
      performance.mark("hangar-log-first-screen");
      setState(complete ? "" : "live");
      if (location.hash) await goToHash();
      stream();
    } catch (e) {
      setState(String(e.message || e));
    }
  })();

  // The rest of the page follows the build too: status badge and steps.
  window.addEventListener("hangar:build", (e) => {
    const b = e.detail;
    const badge = document.getElementById("build-status");
    if (badge) { badge.textContent = b.status.replace(/_/g, " "); badge.className = "badge badge-" + (b.tone || "neutral"); }
    const steps = document.getElementById("steps");
    if (steps && Array.isArray(b.steps)) {
      steps.textContent = "";
      for (const s of b.steps) {
        const li = document.createElement("li");
        const badge = document.createElement("span");
        badge.className = "badge badge-" + s.tone;
        badge.textContent = s.status;
        const name = document.createElement("span");
        name.className = "step-name";
        name.textContent = s.name;
        const took = document.createElement("span");
        took.className = "muted";
        took.textContent = s.duration;
        li.append(badge, " ", name, " ", took);
        steps.appendChild(li);
      }
    }
    if (b.final) {
      for (const el of document.querySelectorAll("[data-while-active]")) el.hidden = true;
      finished();
    }
  });
}

// When the build ends, the page shows what only the server knows then (times, reason, artifacts, test results,
// publishing) without a reload: it fetches its own page once and takes everything but the log box from it; the log
// box (this viewer's state) is moved into the fresh page as it is. Scripts of the fetched page never run.
let refreshed = false;
async function finished() {
  if (refreshed) return;
  refreshed = true;
  try {
    const res = await fetch(location.pathname + location.search, { credentials: "same-origin", headers: { accept: "text/html" } });
    if (!res.ok) throw new Error(String(res.status));
    const fresh = new DOMParser().parseFromString(await res.text(), "text/html");
    const main = document.getElementById("main");
    const next = fresh.getElementById("main");
    if (!main || !next) return;
    for (const el of next.querySelectorAll("script")) el.remove();
    const liveLog = document.getElementById("log-section");
    const freshLog = next.querySelector("#log-section");
    if (liveLog && freshLog) freshLog.replaceWith(liveLog);
    main.replaceChildren(...document.adoptNode(next).childNodes);
    document.title = fresh.title || document.title;
    document.body.dataset.buildFinished = "true";
  } catch (e) {
    const note = document.getElementById("finished-note");
    if (note) note.hidden = false;
  }
}
`);

export const logViewerUrl = hashedAssetUrl("log-viewer", "js", logViewerSource);

/** Colours of the 16 ANSI classes ansi_up emits, light and dark; and the log box itself. */
export const LOG_STYLESHEET = `
.log{position:relative;height:min(70vh,720px);overflow:auto;background:#0d1117;color:#d6dde6;border-radius:8px;
font:12.5px/18px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;contain:strict}
.log-spacer{position:relative;min-height:100%}
.log-window{position:absolute;left:0;right:0;top:0;will-change:transform}
.ln{height:18px;white-space:pre;padding-right:1rem}
.ln.hl{background:#3a3000}
.ln-no{display:inline-block;width:4.5em;padding-right:.75em;text-align:right;color:#6e7681;text-decoration:none;user-select:none}
.ln-no:hover{color:#d6dde6}
.ln-text.muted{color:#6e7681}
.ln-text{unicode-bidi:isolate}.ln-cut{color:#e3b341}.ctl{color:#ffa657;border:1px solid #6e7681;border-radius:3px}
.log-toolbar{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;margin:0 0 .5rem}
.ansi-black-fg{color:#484f58}.ansi-red-fg{color:#ff7b72}.ansi-green-fg{color:#3fb950}.ansi-yellow-fg{color:#d29922}
.ansi-blue-fg{color:#58a6ff}.ansi-magenta-fg{color:#bc8cff}.ansi-cyan-fg{color:#39c5cf}.ansi-white-fg{color:#b1bac4}
.ansi-bright-black-fg{color:#6e7681}.ansi-bright-red-fg{color:#ffa198}.ansi-bright-green-fg{color:#56d364}
.ansi-bright-yellow-fg{color:#e3b341}.ansi-bright-blue-fg{color:#79c0ff}.ansi-bright-magenta-fg{color:#d2a8ff}
.ansi-bright-cyan-fg{color:#56d4dd}.ansi-bright-white-fg{color:#f0f6fc}
.ansi-black-bg{background:#484f58}.ansi-red-bg{background:#b62324}.ansi-green-bg{background:#1a7f37}.ansi-yellow-bg{background:#9e6a03}
.ansi-blue-bg{background:#1f6feb}.ansi-magenta-bg{background:#8957e5}.ansi-cyan-bg{background:#1b7c83}.ansi-white-bg{background:#b1bac4}
.ansi-bright-black-bg{background:#6e7681}.ansi-bright-red-bg{background:#da3633}.ansi-bright-green-bg{background:#2ea043}
.ansi-bright-yellow-bg{background:#bb8009}.ansi-bright-blue-bg{background:#388bfd}.ansi-bright-magenta-bg{background:#a371f7}
.ansi-bright-cyan-bg{background:#2b9aa0}.ansi-bright-white-bg{background:#f0f6fc}
.step-list{list-style:none;padding:0;margin:0;display:grid;gap:.35rem}
.queue-note{border-left:4px solid var(--wait);padding:.5rem .75rem;background:var(--wait-bg)}
.filters{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:flex-end}
.filters .field{margin:0;min-width:10rem}
.pager{display:flex;justify-content:flex-end;margin:.75rem 0 0}
textarea.config{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.85rem;min-height:14rem}
`;

export const logStylesheetUrl = hashedAssetUrl("log-viewer", "css", () => LOG_STYLESHEET);
