import { Hono, type Context } from "hono";
import type { StorageProvider } from "../../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { readArtifactStorageSettings, updateArtifactStorageSettings } from "../../domain/settings/artifact-storage-update.ts";
import { LOCAL_LOGIN_MODES, readLocalLoginSetting, updateLocalLoginSetting } from "../../domain/auth/local-login.ts";
import { readNetworkSettings, updateNetworkSettings } from "../../domain/settings/network-settings.ts";
import { configureOidcSettings, readOidcSettings, standardCallbackUri } from "../../domain/auth/oidc.ts";
import { readPreferences, updatePreferences } from "../../domain/auth/preferences.ts";
import { runPreflight } from "../../domain/setup/preflight.ts";
import {
  cidrListSchema,
  readTrustedProxySettingsJson,
  sharedSecretSchema,
  updateTrustedProxySettings,
  userEmailHeaderSchema,
} from "../../domain/auth/trusted-proxy.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { assertionFromForm, OIDC_PRESETS, PROXY_PRESETS, presetById } from "../team-presets.tsx";
import { errorMessage } from "../error-messages.ts";
import { setFlash } from "../flash.ts";
import { checkForm, firstMessage } from "../form.ts";
import { clearSessionCookie, pageContext, renderPage, requireBrowserUser } from "../session.tsx";
import { diskUsage } from "../../domain/retention/disk.ts";
import { lastPass } from "../../domain/retention/pass.ts";
import { readInstancePolicy } from "../../domain/retention/policy.ts";
import { nameDirectory } from "../../domain/projects/projects.ts";
import { retentionPages } from "./retention.tsx";
import { type SectionId, type SettingsData, SettingsPage } from "../views/settings.tsx";

async function loadSettings(deps: AppDeps, requestUrl: string): Promise<SettingsData> {
  const oidc = await readOidcSettings(deps);
  return {
    preferences: (await readPreferences(deps)).preferences,
    preflight: await runPreflight(deps),
    network: await readNetworkSettings(deps),
    oidc: oidc ? { issuer_url: oidc.issuer_url, client_id: oidc.client_id, has_client_secret: oidc.client_secret_sealed !== null } : null,
    trustedProxy: await readTrustedProxySettingsJson(deps),
    callbackUri: await standardCallbackUri(deps, new URL(requestUrl).origin),
    storage: await readArtifactStorageSettings(deps),
    localLogin: (await readLocalLoginSetting(deps)).mode,
    retention: await readInstancePolicy(deps),
    lastPass: await lastPass(deps),
    disk: await diskUsage(deps),
    names: await nameDirectory(deps),
  };
}

function strings(form: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(form)) if (typeof val === "string") out[k] = val;
  return out;
}

const lines = (text: string | undefined) => (text ?? "").split(/[\s,]+/).filter((s) => s !== "");
const orNull = (text: string | undefined) => (text === undefined || text.trim() === "" ? null : text.trim());

/** /settings (owner and admins; owner-only sections hidden from admins): External Access, network, OIDC, storage. */
export function settingsPages(deps: AppDeps) {
  const managers = requireBrowserUser(deps, { roles: ROLES.managers });
  const owner = requireBrowserUser(deps, { roles: ROLES.owner });

  /** Runs a settings change; a refusal re-renders the page with the section's error and the values sent. */
  const change = (section: SectionId, run: (c: Context<AppEnv>, form: Record<string, string>) => Promise<string>) => async (c: Context<AppEnv>) => {
    const form = strings(await c.req.parseBody());
    try {
      const message = await run(c, form);
      setFlash(c, "ok", message);
      return c.redirect(`/settings#${section}`, 303);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      const { secret_access_key: _s, client_secret: _c, shared_secret: _p, ...values } = form;
      const problem = { section, message: errorMessage(err, "settings"), values };
      return renderPage(
        c,
        <SettingsPage ctx={pageContext(c, deps)} data={await loadSettings(deps, c.req.url)} problem={problem} />,
        err.status === 403 ? 403 : 400,
      );
    }
  };

  const retention = retentionPages(deps, async (c, message) =>
    renderPage(
      c,
      <SettingsPage ctx={pageContext(c, deps)} data={await loadSettings(deps, c.req.url)} problem={{ section: "retention", message, values: {} }} />,
      400,
    ),
  );
  return new Hono<AppEnv>()
    .route("/", retention)
    .get("/settings", managers, async (c) => {
      const presets = { proxy: presetById(PROXY_PRESETS, c.req.query("proxy_preset")), oidc: presetById(OIDC_PRESETS, c.req.query("oidc_preset")) };
      return renderPage(c, <SettingsPage ctx={pageContext(c, deps)} data={await loadSettings(deps, c.req.url)} presets={presets} />);
    })
    .post("/settings/mode", owner, async (c) => {
      const form = strings(await c.req.parseBody());
      const target = form.runtime_mode === "remote" ? "remote" : "local";
      try {
        const result = await updatePreferences(deps, c.get("user"), { runtime_mode: target });
        if (!result.sessions_revoked) {
          setFlash(c, "info", "Nothing changed.");
          return c.redirect("/settings", 303);
        }
        // Every session went with the switch, this browser's too.
        clearSessionCookie(c);
        setFlash(
          c,
          "ok",
          target === "remote"
            ? "External Access is on. Everyone was signed out: sign in again."
            : "Hangar is back in local mode. Everyone was signed out.",
        );
        return c.redirect("/login", 303);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        const problem = { section: "mode" as const, message: errorMessage(err, "settings"), values: {} };
        return renderPage(c, <SettingsPage ctx={pageContext(c, deps)} data={await loadSettings(deps, c.req.url)} problem={problem} />, 400);
      }
    })
    .post(
      "/settings/network",
      owner,
      change("network", async (c, form) => {
        await updateNetworkSettings(deps, c.get("user"), {
          public_url: form.public_url ?? "",
          artifact_delivery_url: orNull(form.artifact_delivery_url),
          allowed_origins: lines(form.allowed_origins),
          isLoopback: c.get("isLoopback"),
        });
        return "Network settings saved.";
      }),
    )
    .post(
      "/settings/oidc",
      owner,
      change("oidc", async (c, form) => {
        const issuer = (form.issuer_url ?? "").trim();
        const clientId = (form.client_id ?? "").trim();
        if (issuer === "" || clientId === "") throw new ApiError("invalid_input", "enter the issuer URL and the client ID");
        const secret = form.client_secret ?? "";
        const saved = await configureOidcSettings(deps, c.get("user"), {
          issuer_url: issuer,
          client_id: clientId,
          ...(secret !== "" ? { client_secret: secret } : {}),
        });
        return `The provider ${saved.discovered_issuer} answered; sign-in with OIDC is configured.`;
      }),
    )
    .post(
      "/settings/trusted-proxy",
      owner,
      change("trusted-proxy", async (c, form) => {
        const headerText = (form.user_email_header ?? "").trim();
        const header = headerText === "" ? null : checkForm(userEmailHeaderSchema, headerText);
        if (header && !header.ok) throw new ApiError("invalid_input", "the identity header must be an HTTP header name that is not reserved");
        const cidrs = lines(form.trusted_proxy_cidrs);
        const cidrCheck = checkForm(cidrListSchema, cidrs);
        if (!cidrCheck.ok) throw new ApiError("invalid_input", `not a valid address range: ${firstMessage(cidrCheck.issues)}`);
        const secret = form.shared_secret ?? "";
        if (secret !== "" && !checkForm(sharedSecretSchema, secret).ok)
          throw new ApiError("invalid_input", "the shared secret must be 16 to 512 visible characters without spaces");
        const assertion = assertionFromForm(form);
        if (!assertion.ok)
          throw new ApiError(
            "invalid_input",
            `signed assertion, ${Object.entries(assertion.errors).map(([field, message]) => `${field}: ${message}`)[0] ?? "not valid"}`,
          );
        await updateTrustedProxySettings(deps, c.get("user"), {
          ...(header ? { user_email_header: header.data } : {}),
          trusted_proxy_cidrs: cidrs,
          ...(secret !== "" ? { shared_secret: secret } : {}),
          assertion: assertion.assertion,
        });
        return "The trusted proxy is saved and is now the sign-in of External Access.";
      }),
    )
    .post(
      "/settings/local-login",
      owner,
      change("local-login", async (c, form) => {
        const mode = LOCAL_LOGIN_MODES.find((m) => m === form.mode);
        if (!mode) throw new ApiError("invalid_input", "choose how people may sign in on this machine");
        await updateLocalLoginSetting(deps, c.get("user"), mode);
        return mode === "cli_only" ? "Sign-in on this machine now needs npx hangar login." : "Sign in on this machine is allowed.";
      }),
    )
    .post(
      "/settings/storage",
      managers,
      change("storage", async (c, form) => {
        const provider = (["local", "s3", "r2"] as const).find((p) => p === form.provider);
        if (!provider) throw new ApiError("invalid_input", "choose a storage provider");
        const secret = form.secret_access_key ?? "";
        await updateArtifactStorageSettings(deps, c.get("user"), {
          provider: provider as StorageProvider,
          local: { base_dir: orNull(form.base_dir) },
          s3: {
            endpoint: orNull(form.endpoint),
            region: orNull(form.region),
            bucket: orNull(form.bucket),
            prefix: orNull(form.prefix),
            access_key_id: orNull(form.access_key_id),
            force_path_style: form.force_path_style === "1",
            ...(secret !== "" ? { secret_access_key: secret } : {}),
          },
        });
        return "Artifact storage saved.";
      }),
    );
}
