// The project page's credentials section (docs/signing.md): forms for the source credentials, the Android
// keystore, the iOS identity and profiles, the store keys publishing uses (docs/publishing.md), secret
// variables and protection, each saying what is stored and
// never showing a secret again; and the signing health of the project. Plain multipart forms: no JavaScript.
import { Hono, type Context } from "hono";
import type { Child } from "hono/jsx";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  deleteSecret,
  listSecrets,
  protectionSchema,
  putSecret,
  putSecretSchema,
  SECRET_NAME,
  setProtection,
} from "../../domain/projects/project-secrets.ts";
import { sourceCredentialsSchema, storeProjectSecret, type ProjectRow } from "../../domain/projects/projects.ts";
import { projectHealthItems, runSigningHealthPassAfterUpload } from "../../domain/signing/health.ts";
import {
  androidSigningUploadSchema,
  encodeBase64,
  iosSigningUploadSchema,
  storeAndroidSigning,
  storeIosSigning,
} from "../../domain/signing/signing.ts";
import { appStoreConnectKeySchema, googlePlayKeySchema, putAppStoreConnectKey, putGooglePlayKey } from "../../domain/publishing/store-credentials.ts";
import { ApiError } from "../../errors.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { sentence } from "../errors.tsx";
import { setFlash } from "../flash.ts";
import { checkForm, firstMessage, issueField } from "../form.ts";
import type { PageCtx } from "../layout.tsx";
import { requireBrowserUser } from "../session.tsx";
import { type SigningState, type SigningView, ProjectSigning } from "../views/project-signing.tsx";

export async function projectSigningSlot(
  deps: Pick<AppDeps, "db" | "clock">,
  ctx: PageCtx,
  project: ProjectRow,
  state: SigningState,
): Promise<Child> {
  const role = ctx.user?.role ?? "";
  const canWrite = (ROLES.builders as readonly string[]).includes(role);
  const canManage = (ROLES.managers as readonly string[]).includes(role);
  const view: SigningView = { secrets: canWrite ? await listSecrets(deps, project.id) : null, health: projectHealthItems(project, deps.clock.now()) };
  return <ProjectSigning ctx={ctx} project={project} view={view} state={state} canWrite={canWrite} canManage={canManage} />;
}

export type ShowSigning = (c: Context<AppEnv>, projectId: string, state: SigningState, status: 200 | 400) => Promise<Response>;

type Body = Record<string, string | File | (string | File)[]>;
const text = (form: Body, name: string): string => {
  const v = form[name];
  const first = Array.isArray(v) ? v[0] : v;
  return typeof first === "string" ? first : "";
};
const files = (form: Body, name: string): File[] => {
  const v = form[name];
  return (Array.isArray(v) ? v : v === undefined ? [] : [v]).filter((x): x is File => typeof x !== "string" && x.size > 0);
};
const fileBase64 = async (file: File) => encodeBase64(new Uint8Array(await file.arrayBuffer()));
const lines = (value: string) => value.split(/[\s,]+/).filter((l) => l !== "");

/** The message shown beside the form for a refusal the user can fix; anything else is thrown. */
function refusal(err: unknown): string {
  if (err instanceof ApiError && err.status === 400)
    return sentence(err.issues?.[0] && err.code === "invalid_input" ? `${err.issues[0].path}: ${err.issues[0].message}` : err.message);
  throw err;
}

/** A refusal of a store key in the form's words: the API's field names become the labels the form shows. */
function storeRefusal(err: unknown): string {
  if (err instanceof ApiError && err.code === "invalid_store_credentials")
    return sentence(err.message.replace(/^private_key_p8\b/, "the private key").replace(/^service_account_json\b/, "the service account key"));
  return refusal(err);
}

/** POST routes of the section, mounted by the project pages; each answers with a redirect or the page with the error. */
export function projectSigningPages(deps: AppDeps, show: ShowSigning) {
  const builders = requireBrowserUser(deps, { roles: ROLES.builders });
  const managers = requireBrowserUser(deps, { roles: ROLES.managers });
  const done = (c: Context<AppEnv>, id: string, message: string) => {
    setFlash(c, "ok", message);
    return c.redirect(`/projects/${id}#credentials`, 303);
  };
  return new Hono<AppEnv>()
    .post("/projects/:project_id/credentials/source", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = (await c.req.parseBody({ all: true })) as Body;
      const username = text(form, "username").trim();
      const parsed = checkForm(sourceCredentialsSchema, { token: text(form, "token"), ...(username ? { username } : {}) });
      if (!parsed.ok)
        return show(c, id, { form: "source", error: "Enter the token (and a user name of at most 256 characters).", values: { username } }, 400);
      await storeProjectSecret(deps, c.get("user"), id, "sourceCredentialsSealed", parsed.data);
      return done(c, id, "Source credentials saved. They are not shown again.");
    })
    .post("/projects/:project_id/signing/android", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = (await c.req.parseBody({ all: true })) as Body;
      const values = { key_alias: text(form, "key_alias") };
      const keystore = files(form, "keystore")[0];
      const parsed = checkForm(androidSigningUploadSchema, {
        keystore_base64: keystore ? await fileBase64(keystore) : "",
        keystore_password: text(form, "keystore_password"),
        key_alias: values.key_alias,
        key_password: text(form, "key_password"),
      });
      if (!parsed.ok)
        return show(c, id, { form: "android", error: "Choose the keystore file and fill in both passwords and the alias.", values }, 400);
      try {
        await storeAndroidSigning(deps, c.get("user"), id, parsed.data);
      } catch (err) {
        return show(c, id, { form: "android", error: refusal(err), values }, 400);
      }
      await runSigningHealthPassAfterUpload(deps, id);
      return done(c, id, "Android keystore saved. Its passwords are not shown again.");
    })
    .post("/projects/:project_id/signing/ios", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = (await c.req.parseBody({ all: true })) as Body;
      const certificate = files(form, "certificate")[0];
      const profiles = files(form, "profiles");
      const parsed = checkForm(iosSigningUploadSchema, {
        certificate_p12_base64: certificate ? await fileBase64(certificate) : "",
        certificate_password: text(form, "certificate_password"),
        provisioning_profiles_base64: await Promise.all(profiles.map(fileBase64)),
      });
      if (!parsed.ok) return show(c, id, { form: "ios", error: "Choose the .p12 file and at least one provisioning profile." }, 400);
      try {
        await storeIosSigning(deps, c.get("user"), id, parsed.data);
      } catch (err) {
        return show(c, id, { form: "ios", error: refusal(err) }, 400);
      }
      await runSigningHealthPassAfterUpload(deps, id);
      return done(c, id, "Certificate and profiles saved. The certificate's password is not shown again.");
    })
    .post("/projects/:project_id/stores/app-store-connect", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = (await c.req.parseBody({ all: true })) as Body;
      const values = { issuer_id: text(form, "issuer_id"), key_id: text(form, "key_id") };
      const parsed = checkForm(appStoreConnectKeySchema, { ...values, private_key_p8: text(form, "private_key_p8") });
      if (!parsed.ok) {
        const first = parsed.issues[0];
        const apiField = first ? issueField(first) : "";
        const field = { issuer_id: "Issuer ID", key_id: "Key ID", private_key_p8: "Private key" }[apiField] ?? "The form";
        const why = apiField === "key_id" ? "is letters and digits" : "is required";
        return show(c, id, { form: "app_store_connect", error: `${field} ${why}.`, values }, 400);
      }
      try {
        await putAppStoreConnectKey(deps, c.get("user"), id, parsed.data);
      } catch (err) {
        return show(c, id, { form: "app_store_connect", error: storeRefusal(err), values }, 400);
      }
      return done(c, id, "App Store Connect key saved. The private key is not shown again.");
    })
    .post("/projects/:project_id/stores/google-play", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = (await c.req.parseBody({ all: true })) as Body;
      const parsed = checkForm(googlePlayKeySchema, { service_account_json: text(form, "service_account_json") });
      if (!parsed.ok) return show(c, id, { form: "google_play", error: "Paste the service account's JSON key file." }, 400);
      try {
        await putGooglePlayKey(deps, c.get("user"), id, parsed.data);
      } catch (err) {
        return show(c, id, { form: "google_play", error: storeRefusal(err) }, 400);
      }
      return done(c, id, "Google Play service account saved. Its key is not shown again.");
    })
    .post("/projects/:project_id/secrets", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = (await c.req.parseBody({ all: true })) as Body;
      const name = text(form, "name").trim();
      const value = checkForm(putSecretSchema, { value: text(form, "value") });
      if (!SECRET_NAME.test(name))
        return show(
          c,
          id,
          { form: "secret", error: "A name has upper case letters, digits and _ only, and does not start with a digit.", values: { name } },
          400,
        );
      if (!value.ok) return show(c, id, { form: "secret", error: sentence(firstMessage(value.issues, "not a valid value")), values: { name } }, 400);
      try {
        await putSecret(deps, c.get("user"), id, name, value.data.value);
      } catch (err) {
        return show(c, id, { form: "secret", error: refusal(err), values: { name } }, 400);
      }
      return done(c, id, `Secret variable ${name} saved. Its value is not shown again.`);
    })
    .post("/projects/:project_id/secrets/:name/delete", builders, async (c) => {
      const id = c.req.param("project_id");
      const name = c.req.param("name");
      if (!SECRET_NAME.test(name)) throw new ApiError("not_found", "no such secret variable");
      await deleteSecret(deps, c.get("user"), id, name);
      return done(c, id, `Secret variable ${name} deleted.`);
    })
    .post("/projects/:project_id/protection", managers, async (c) => {
      const id = c.req.param("project_id");
      const form = (await c.req.parseBody({ all: true })) as Body;
      const values = { branches: text(form, "branches"), tags: text(form, "tags") };
      const tags = lines(values.tags);
      // `tags` is sent only when given: the protection body takes it where tag protection exists.
      const input = { branches: lines(values.branches), ...(tags.length > 0 ? { tags } : {}) };
      const parsed = checkForm(protectionSchema, input);
      if (!parsed.ok) return show(c, id, { form: "protection", error: sentence(firstMessage(parsed.issues, "not valid")), values }, 400);
      await setProtection(deps, c.get("user"), id, parsed.data);
      return done(c, id, "Protection saved.");
    });
}
