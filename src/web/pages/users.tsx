import { Hono, type Context } from "hono";
import { ASSIGNABLE_ROLES, type UserRole } from "../../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { signInUrl } from "../../domain/events/mail.ts";
import { changeUserRole, disableUser, enableUser, inviteUser, listUsers, transferOwnership, type UserRow } from "../../domain/auth/users.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { emailSchema } from "../../http/routes/setup.schemas.ts";
import { signInLink, type SignInLink } from "../../domain/auth/sign-in-link.ts";
import { Button, CopyField, EmptyState, Field, Name, PostForm, Section, Select, StatusBadge, Table, Time } from "../components.tsx";
import { errorMessage } from "../error-messages.ts";
import { setFlash } from "../flash.ts";
import { checkForm } from "../form.ts";
import { Layout, roleLabel, type PageCtx } from "../layout.tsx";
import { clearSessionCookie, pageContext, renderPage, requireBrowserUser } from "../session.tsx";

const ROLE_OPTIONS = ASSIGNABLE_ROLES.map((r) => ({ value: r, label: roleLabel(r) }));

function isAssignable(role: string): role is (typeof ASSIGNABLE_ROLES)[number] {
  return (ASSIGNABLE_ROLES as readonly string[]).includes(role);
}

/** The row's controls: only those the viewer may use on that user (docs/api.md §3): none on the owner, none on oneself. */
function UserActions(props: { viewer: UserRow; user: UserRow }) {
  const { viewer, user } = props;
  if (user.role === "owner" || user.id === viewer.id) return <span class="muted">–</span>;
  return (
    <div class="actions">
      <PostForm action={`/users/${user.id}/role`} class="inline-form">
        <Select label={`Role of ${user.email}`} name="role" options={ROLE_OPTIONS} value={user.role} id={`role-${user.id}`} compact />
        <Button variant="secondary">Change role</Button>
      </PostForm>
      {user.status === "disabled" ? (
        <PostForm action={`/users/${user.id}/enable`} class="inline-form">
          <Button variant="secondary">Enable</Button>
        </PostForm>
      ) : (
        <form method="post" action={`/users/${user.id}/disable`} class="inline-form" data-confirm={`Disable ${user.email}? Their sessions end now.`}>
          <Button variant="danger">Disable</Button>
        </form>
      )}
    </div>
  );
}

/**
 * The link invited people sign in at, to copy into a message (docs/api.md §21); without External Access, what to do
 * first. The copy button needs JavaScript; without it the field's text is still selectable.
 */
function SignInLinkBox(props: { link: SignInLink }) {
  const { sign_in_url: url, sign_in_note: note } = props.link;
  return (
    <div class="sign-in-link" id="sign-in-link">
      {url ? (
        <CopyField id="sign-in-url" label="Send invited people this sign-in link" value={url} />
      ) : (
        <p class="flash flash-info" id="sign-in-note">
          {note}
        </p>
      )}
    </div>
  );
}

function UsersPage(props: { ctx: PageCtx; users: UserRow[]; link: SignInLink; invite?: { email?: string; role?: string; error?: string } }) {
  const viewer = props.ctx.user!;
  const transferTargets = props.users.filter((u) => u.status === "active" && u.role !== "owner");
  return (
    <Layout ctx={props.ctx} title="Users">
      <h1>Users</h1>
      <Section title="Invite someone" id="invite" description="An invited person becomes active at their first sign-in.">
        <PostForm action="/users/invite" class="grid2">
          <Field label="Email" name="email" type="email" required value={props.invite?.email} error={props.invite?.error} autocomplete="off" />
          <Select label="Role" name="role" options={ROLE_OPTIONS} value={props.invite?.role ?? "developer"} />
          <div class="actions">
            <Button>Invite</Button>
          </div>
        </PostForm>
        <SignInLinkBox link={props.link} />
      </Section>
      <Section title="Everyone" id="people">
        {props.users.length === 0 ? (
          <EmptyState title="No users yet" />
        ) : (
          <Table headers={["User", "Role", "Status", "Since", "Actions"]} id="users-table">
            {props.users.map((u) => (
              <tr data-user={u.email}>
                <td>
                  <Name value={u.email} />
                  {u.displayName ? (
                    <div class="hint">
                      <Name value={u.displayName} />
                    </div>
                  ) : null}
                </td>
                <td>{roleLabel(u.role)}</td>
                <td>
                  <StatusBadge status={u.status} />
                </td>
                <td>
                  <Time at={u.createdAt} now={props.ctx.now} />
                </td>
                <td>
                  <UserActions viewer={viewer} user={u} />
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Section>
      {viewer.role === "owner" ? (
        <Section
          title="Transfer ownership"
          id="transfer"
          description="The new owner must be active. You become an admin, and both of you are signed out."
        >
          {transferTargets.length === 0 ? (
            <p class="muted">Nobody else is active yet: invite someone and let them sign in first.</p>
          ) : (
            <form
              method="post"
              action="/users/transfer"
              class="inline-form"
              data-confirm="Transfer ownership? You become an admin and are signed out."
            >
              <Select label="New owner" name="email" options={transferTargets.map((u) => ({ value: u.email, label: u.email }))} />
              <Button variant="danger">Transfer ownership</Button>
            </form>
          )}
        </Section>
      ) : null}
    </Layout>
  );
}

/** /users: list, invite, role change, disable and enable (owner and admins), transfer ownership (owner). */
export function usersPages(deps: AppDeps) {
  const managers = requireBrowserUser(deps, { roles: ROLES.managers });

  /** Runs one change, then back to /users with the outcome as a flash message (post/redirect/get). */
  const act = async (c: Context<AppEnv>, run: () => Promise<string>) => {
    try {
      setFlash(c, "ok", await run());
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      setFlash(c, "error", errorMessage(err, "users"));
    }
    return c.redirect("/users", 303);
  };

  const formText = async (c: Context<AppEnv>, key: string) => {
    const v = (await c.req.parseBody())[key];
    return typeof v === "string" ? v.trim() : "";
  };

  return new Hono<AppEnv>()
    .get("/users", managers, async (c) =>
      renderPage(c, <UsersPage ctx={pageContext(c, deps)} users={await listUsers(deps)} link={await signInLink(deps)} />),
    )
    .post("/users/invite", managers, async (c) => {
      const form = await c.req.parseBody();
      const email = typeof form.email === "string" ? form.email.trim() : "";
      const role = typeof form.role === "string" ? form.role : "";
      const problem = !checkForm(emailSchema, email).ok ? "Enter a valid email address." : !isAssignable(role) ? "Choose a role." : null;
      if (problem || !isAssignable(role)) {
        return renderPage(
          c,
          <UsersPage
            ctx={pageContext(c, deps)}
            users={await listUsers(deps)}
            link={await signInLink(deps)}
            invite={{ email, role, error: problem ?? "" }}
          />,
          400,
        );
      }
      try {
        const link = await signInLink(deps);
        const mailLink = link.sign_in_url ?? (await signInUrl(deps, new URL(c.req.url).origin));
        const user = await inviteUser(deps, c.get("user"), email, role, { signInUrl: mailLink });
        setFlash(
          c,
          "ok",
          `Invited ${user.email} as ${roleLabel(user.role).toLowerCase()}. ${link.sign_in_url ? "Send them the sign-in link below." : "They cannot sign in from another machine until External Access is on (see below)."}`,
        );
        return c.redirect("/users", 303);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        const status = err.status === 409 ? 409 : 400;
        return renderPage(
          c,
          <UsersPage
            ctx={pageContext(c, deps)}
            users={await listUsers(deps)}
            link={await signInLink(deps)}
            invite={{ email, role, error: errorMessage(err, "users") }}
          />,
          status,
        );
      }
    })
    .post("/users/transfer", requireBrowserUser(deps, { roles: ROLES.owner }), async (c) => {
      const email = await formText(c, "email");
      try {
        const result = await transferOwnership(deps, c.get("user"), email);
        // Both users' sessions were revoked, this browser's too.
        clearSessionCookie(c);
        setFlash(c, "ok", `${result.owner.email} is now the owner. Sign in again.`);
        return c.redirect("/login", 303);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        setFlash(c, "error", errorMessage(err, "users"));
        return c.redirect("/users", 303);
      }
    })
    .post("/users/:id/role", managers, async (c) => {
      const role = await formText(c, "role");
      return act(c, async () => {
        if (!isAssignable(role)) throw new ApiError("invalid_input", "invalid role");
        const user = await changeUserRole(deps, c.get("user"), c.req.param("id"), role as UserRole as (typeof ASSIGNABLE_ROLES)[number]);
        return `${user.email} is now ${roleLabel(user.role).toLowerCase()}.`;
      });
    })
    .post("/users/:id/disable", managers, (c) =>
      act(c, async () => `${(await disableUser(deps, c.get("user"), c.req.param("id"))).email} is disabled and signed out.`),
    )
    .post("/users/:id/enable", managers, (c) =>
      act(c, async () => `${(await enableUser(deps, c.get("user"), c.req.param("id"))).email} is enabled.`),
    );
}
