import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { loadInstance } from "../../domain/instance.ts";
import { localLogin } from "../../domain/local-login.ts";
import { revokeSessionStatement } from "../../domain/sessions.ts";
import { Button, Field, PostForm } from "../components.tsx";
import { sentence } from "../errors.tsx";
import { setFlash } from "../flash.ts";
import { Layout, type PageCtx } from "../layout.tsx";
import { browserSession, clearSessionCookie, pageContext, renderPage, safeNext, setSessionCookie } from "../session.tsx";

/** Where a signed-in browser starts. */
export const HOME = "/builds";

interface LoginChoices {
  local: boolean;
  /** Why local sign-in is not offered, when it is not. */
  localHint: string | null;
}

/** Which sign-in ways this request may use: the same rules the API applies (CONTRACT §3). */
async function loginChoices(deps: AppDeps, isLoopback: boolean): Promise<LoginChoices> {
  const inst = await loadInstance(deps);
  const local = inst.runtimeMode === "local" && isLoopback;
  const localHint = local
    ? null
    : inst.runtimeMode === "local"
      ? "Hangar runs in local mode: open it on the machine it runs on, or run npx hangar login there for a one-time sign-in link."
      : null;
  return { local, localHint };
}

function LoginPage(props: { ctx: PageCtx; choices: LoginChoices; next: string | null; email?: string; error?: string | null }) {
  const nextQuery = props.next ? `?next=${encodeURIComponent(props.next)}` : "";
  return (
    <Layout ctx={props.ctx} title="Sign in" narrow>
      <section class="card">
        <h1>Sign in to Hangar</h1>
        {props.error ? (
          <div class="flash flash-error" role="alert">
            {props.error}
          </div>
        ) : null}
        <div class="login-choices">
          {props.choices.local ? (
            <PostForm action={`/login/local${nextQuery}`} id="local-login">
              <Field
                label="Email"
                name="email"
                type="email"
                value={props.email}
                autocomplete="email"
                hint="Leave empty when you are the only user."
              />
              <Button>Sign in on this machine</Button>
            </PostForm>
          ) : null}
          {!props.choices.local ? <p class="muted">{props.choices.localHint ?? "No sign-in method is available to this browser. Ask the owner."}</p> : null}
        </div>
        <p class="hint">
          From the machine Hangar runs on, <code>npx hangar login</code> prints a one-time sign-in link.
        </p>
      </section>
    </Layout>
  );
}

/** `/` (where to go), `/login` with its choices, local sign-in, and sign-out. */
export function loginPages(deps: AppDeps) {
  return new Hono<AppEnv>()
    .get("/", async (c) => {
      const inst = await loadInstance(deps);
      if (inst.state !== "ready") return c.redirect("/setup", 303);
      return c.redirect((await browserSession(deps, c)) ? HOME : "/login", 303);
    })
    .get("/login", async (c) => {
      const inst = await loadInstance(deps);
      if (inst.state !== "ready") return c.redirect("/setup", 303);
      if (await browserSession(deps, c)) return c.redirect(safeNext(c.req.query("next")) ?? HOME, 303);
      const choices = await loginChoices(deps, c.get("isLoopback"));
      return renderPage(c, <LoginPage ctx={pageContext(c, deps)} choices={choices} next={safeNext(c.req.query("next"))} />);
    })
    .post("/login/local", async (c) => {
      const form = await c.req.parseBody();
      const email = typeof form.email === "string" && form.email.trim() !== "" ? form.email.trim() : undefined;
      const next = safeNext(c.req.query("next"));
      try {
        const result = await localLogin(deps, { email, isLoopback: c.get("isLoopback") });
        setSessionCookie(c, { token: result.session_token, expiresAt: result.expires_at }, deps.clock.now());
        return c.redirect(next ?? HOME, 303);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        const choices = await loginChoices(deps, c.get("isLoopback"));
        const status = err.status === 409 ? 409 : err.status === 403 ? 403 : 400;
        return renderPage(c, <LoginPage ctx={pageContext(c, deps)} choices={choices} next={next} email={email} error={loginError(err)} />, status);
      }
    })
    .post("/logout", async (c) => {
      const session = await browserSession(deps, c);
      if (session) await revokeSessionStatement(deps, session.sessionId);
      clearSessionCookie(c);
      setFlash(c, "info", "You are signed out.");
      return c.redirect("/login", 303);
    });
}

/** Sign-in errors in words (SPEC auth error rows). */
export function loginError(err: ApiError): string {
  // local_login_disabled arrives with the cli_only setting (auth helper); matched as a string until then.
  if ((err.code as string) === "local_login_disabled") {
    return "Signing in on this machine is switched off. Run npx hangar login on the machine for a one-time link.";
  }
  switch (err.code) {
    case "email_required":
      return "Several people use this Hangar: enter your email.";
    case "user_not_found":
      return "No active user has this email. Ask the owner or an admin to invite you.";
    case "local_login_loopback_required":
      return "Signing in without a password works only on the machine Hangar runs on.";
    case "mode_restricted":
      return "This sign-in method is not available in Hangar's current mode.";
    case "setup_incomplete":
      return "Setup is not complete yet.";
    case "invalid_input":
      return "That email address is not valid.";
    default:
      return sentence(err.message);
  }
}
