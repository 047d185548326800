import type { Child } from "hono/jsx";
import type { UserRole } from "../db/schema/constants.ts";
import type { UserRow } from "../domain/auth/users.ts";
import { Flash, Name, type FlashMessage } from "./components.tsx";
import { scriptUrl, stylesheetUrl } from "./assets.ts";
import { neutralise } from "./text.ts";

/** What every page knows about its request: built by `pageContext(c)` (session.ts). */
export interface PageCtx {
  /** The signed-in user, absent on public pages (setup, login, install). */
  user?: UserRow;
  /** The CSP nonce of this response, for an inline <script nonce={ctx.nonce}> when a page needs one. */
  nonce: string;
  /** The request path, to mark the current nav entry. */
  path: string;
  /** A message carried over from the previous POST (flash.ts). */
  flash: FlashMessage | null;
  /** The app clock (epoch seconds): pages never read the wall clock. */
  now: number;
  /** The data directory's file system when it is under 10 % free (the banner), else null. */
  lowDiskSpace?: { free_bytes: number; total_bytes: number } | null;
}

/** The nearly-full-disk banner of every signed-in page: what is free, and where a manager can act. */
function DiskBanner(props: { ctx: PageCtx }) {
  const space = props.ctx.lowDiskSpace;
  if (!space || !props.ctx.user) return null;
  const gib = (n: number) => `${(n / 1024 ** 3).toFixed(1)} GB`;
  const percent = ((space.free_bytes / space.total_bytes) * 100).toFixed(1);
  const manager = MANAGERS.includes(props.ctx.user.role);
  return (
    <div class="flash flash-error" role="alert" id="disk-banner">
      The disk holding Hangar's data is nearly full: {gib(space.free_bytes)} free of {gib(space.total_bytes)} ({percent} %). Uploads and builds fail
      once it is full. {manager ? <a href="/settings#retention">Set a retention policy or run it now</a> : "Tell the owner or an admin."}
    </div>
  );
}

interface NavItem {
  href: string;
  label: string;
  roles: readonly UserRole[];
}

const EVERYONE: readonly UserRole[] = ["owner", "admin", "developer", "qa_viewer"];
const MANAGERS: readonly UserRole[] = ["owner", "admin"];

/** The nav of docs/api.md §10, by the role matrix of §3: nobody sees an entry they could not open. */
export const NAV: readonly NavItem[] = [
  { href: "/builds", label: "Builds", roles: EVERYONE },
  { href: "/projects", label: "Projects", roles: EVERYONE },
  { href: "/runners", label: "Runners", roles: MANAGERS },
  { href: "/users", label: "Users", roles: MANAGERS },
  { href: "/settings", label: "Settings", roles: MANAGERS },
  { href: "/audit", label: "Audit", roles: MANAGERS },
];

function isCurrent(itemHref: string, path: string): boolean {
  return path === itemHref || path.startsWith(`${itemHref}/`);
}

const ROLE_LABELS: Record<UserRole, string> = { owner: "Owner", admin: "Admin", developer: "Developer", qa_viewer: "QA viewer" };

export function roleLabel(role: UserRole): string {
  return ROLE_LABELS[role];
}

/** The signed-in header: brand, nav by role, the user and sign-out. */
function TopBar(props: { ctx: PageCtx }) {
  const user = props.ctx.user;
  return (
    <header class="topbar">
      <div class="topbar-inner">
        <a class="brand" href="/">
          Hangar
        </a>
        {user ? (
          <nav aria-label="Main">
            <ul class="nav">
              {NAV.filter((item) => item.roles.includes(user.role)).map((item) => (
                <li>
                  <a href={item.href} aria-current={isCurrent(item.href, props.ctx.path) ? "page" : undefined}>
                    {item.label}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
        ) : null}
        {user ? (
          <div class="who">
            <span class="who-user">
              <Name value={user.displayName ?? user.email} /> <span class="hide-narrow">· {roleLabel(user.role)}</span>
            </span>
            <form method="post" action="/logout">
              <button type="submit" class="btn btn-secondary">
                Sign out
              </button>
            </form>
          </div>
        ) : null}
      </div>
    </header>
  );
}

/**
 * The page shell: head (stylesheet, script, viewport), the header, the flash message, the content.
 * `narrow` centres a single column (sign-in, setup, install).
 */
export function Layout(props: { ctx: PageCtx; title: string; children: Child; narrow?: boolean; head?: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="color-scheme" content="light dark" />
        <title>{`${neutralise(props.title)} · Hangar`}</title>
        <link rel="stylesheet" href={stylesheetUrl()} />
        <script src={scriptUrl()} defer></script>
        {props.head}
      </head>
      <body>
        <TopBar ctx={props.ctx} />
        <main class={props.narrow ? "narrow" : undefined} id="main">
          <DiskBanner ctx={props.ctx} />
          <Flash flash={props.ctx.flash} />
          {props.children}
        </main>
        {props.ctx.user ? (
          <footer class="page-foot">
            <a href="/api">API reference</a> · <a href="/v1/openapi.json">OpenAPI document</a>
          </footer>
        ) : null}
      </body>
    </html>
  );
}

/** A whole page for an error (403 role, 404, a failed sign-in): what happened and where to go. */
export function ErrorPage(props: { ctx: PageCtx; title: string; message: Child; back?: { href: string; label: string } }) {
  return (
    <Layout ctx={props.ctx} title={props.title} narrow>
      <section class="card">
        <h1>{props.title}</h1>
        <p>{props.message}</p>
        <p>
          <a href={props.back?.href ?? "/"}>{props.back?.label ?? "Back to Hangar"}</a>
        </p>
      </section>
    </Layout>
  );
}
