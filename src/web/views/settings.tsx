// The Settings page as HTML: view components only; the routes that save each section are src/web/pages/settings.tsx.
import type { Child } from "hono/jsx";
import type { readArtifactStorageSettings } from "../../domain/settings/artifact-storage-update.ts";
import type { LocalLoginMode } from "../../domain/auth/local-login.ts";
import type { readNetworkSettings } from "../../domain/settings/network-settings.ts";
import type { readPreferences } from "../../domain/auth/preferences.ts";
import type { Preflight } from "../../domain/setup/preflight.ts";
import type { readTrustedProxySettingsJson } from "../../domain/auth/trusted-proxy.ts";
import { AssertionFields, OIDC_PRESETS, PresetLinks, PROXY_PRESETS, type ProxyPreset } from "../team-presets.tsx";
import { Button, Checkbox, CopyField, Field, PostForm, RadioGroup, Section, TextArea } from "../components.tsx";
import { sentence } from "../errors.tsx";
import { Layout, type PageCtx } from "../layout.tsx";
import type { DiskUsage } from "../../domain/retention/disk.ts";
import type { lastPass } from "../../domain/retention/pass.ts";
import type { EffectivePolicy } from "../../domain/retention/policy.ts";
import type { NameDirectory } from "../../domain/projects/projects.ts";
import { DiskSection, RetentionSection } from "../pages/retention.tsx";

export type SectionId = "mode" | "network" | "oidc" | "trusted-proxy" | "storage" | "local-login" | "retention";

export interface SettingsData {
  preferences: Awaited<ReturnType<typeof readPreferences>>["preferences"];
  preflight: Preflight;
  network: Awaited<ReturnType<typeof readNetworkSettings>>;
  oidc: { issuer_url: string; client_id: string; has_client_secret: boolean } | null;
  trustedProxy: Awaited<ReturnType<typeof readTrustedProxySettingsJson>>;
  callbackUri: string;
  storage: Awaited<ReturnType<typeof readArtifactStorageSettings>>;
  localLogin: LocalLoginMode;
  retention: EffectivePolicy;
  lastPass: Awaited<ReturnType<typeof lastPass>>;
  disk: DiskUsage;
  names: NameDirectory;
}

/** A refused form: the section it belongs to, the words to show, and the values to put back. */
interface FormProblem {
  section: SectionId;
  message: string;
  values: Record<string, string>;
}

/**
 * The local-login setting (docs/api.md §3, owner only): `loopback` lets any process on this machine sign in without a
 * password; `cli_only` leaves only `hangar login`, which needs access to the data directory.
 */
export function localLoginSection(mode: LocalLoginMode, remote: boolean, problem: FormProblem | null): Child {
  return (
    <Section
      title="Sign-in on this machine"
      id="local-login"
      description="Any program on this machine can open a connection to Hangar, a build step included. When runners share the machine, leave only hangar login."
    >
      <Problem problem={problem} section="local-login" />
      <PostForm action="/settings/local-login">
        <RadioGroup
          legend="Local sign-in"
          name="mode"
          value={mode}
          options={[
            {
              value: "loopback",
              label: remote
                ? "Allow \u201cSign in on this machine\u201d (also in remote mode: every visitor through a proxy on this host looks local)"
                : "Allow \u201cSign in on this machine\u201d from this machine's browser",
            },
            { value: "cli_only", label: "Only through npx hangar login (a one-time link printed on this machine)" },
          ]}
        />
        <Button>Save local sign-in</Button>
      </PostForm>
    </Section>
  );
}

function Problem(props: { problem: FormProblem | null; section: SectionId }) {
  if (!props.problem || props.problem.section !== props.section) return null;
  return (
    <div class="flash flash-error" role="alert" id={`${props.section}-error`}>
      {props.problem.message}
    </div>
  );
}

function Checklist(props: { preflight: Preflight }) {
  return (
    <ul class="checklist" id="preflight">
      {props.preflight.checks.map((check) => (
        <li class={check.ok ? "pass" : check.required ? "fail" : "warn"} data-check={check.id}>
          <span class="mark" aria-hidden="true">
            {check.ok ? "✓" : check.required ? "✗" : "!"}
          </span>
          <span>
            <strong>{check.label}</strong>
            <span class="visually-hidden">{check.ok ? " (passed)" : check.required ? " (failed)" : " (warning)"}</span>
            <span class="hint">{sentence(check.message)}</span>
          </span>
        </li>
      ))}
    </ul>
  );
}

/** The trusted-proxy form's values: what was refused, else a chosen preset's, else what is stored. */
function proxyFormValues(data: SettingsData, problem: FormProblem | null, preset: ProxyPreset | null): Record<string, string> {
  if (problem?.section === "trusted-proxy") return problem.values;
  const stored = data.trustedProxy;
  const cidrs = stored.trusted_proxy_cidrs.join("\n");
  if (preset) return { user_email_header: "", trusted_proxy_cidrs: cidrs, ...preset.values };
  const a = stored.assertion;
  return {
    user_email_header: stored.configured ? stored.user_email_header : "",
    trusted_proxy_cidrs: cidrs,
    assertion_header: a?.header ?? "",
    jwks_url: a?.jwks_url ?? "",
    assertion_issuer: a?.issuer ?? "",
    audience: a?.audience ?? "",
    email_claim: a && a.email_claim !== "email" ? a.email_claim : "",
  };
}

function TrustedProxySection(props: { data: SettingsData; problem: FormProblem | null; preset: ProxyPreset | null }) {
  const values = proxyFormValues(props.data, props.problem, props.preset);
  const stored = props.data.trustedProxy;
  return (
    <Section
      title="Sign-in through a trusted proxy"
      id="trusted-proxy"
      description="Tailscale Serve, an access gateway or oauth2-proxy signs your team in and tells Hangar who they are. Saving makes it the sign-in of External Access."
    >
      <Problem problem={props.problem} section="trusted-proxy" />
      <PresetLinks list={PROXY_PRESETS} href={(id) => `/settings?proxy_preset=${id}#trusted-proxy`} chosen={props.preset} id="proxy-presets" />
      <PostForm action="/settings/trusted-proxy">
        <Field
          label="Identity header"
          name="user_email_header"
          value={values.user_email_header}
          placeholder="x-hangar-user-email"
          spellcheck={false}
          hint="The header holding the user's email; the default when empty."
        />
        <TextArea
          label="Proxy addresses (CIDR)"
          name="trusted_proxy_cidrs"
          value={values.trusted_proxy_cidrs}
          hint="One per line. Empty: only a proxy on this machine (127.0.0.1, ::1) is trusted."
        />
        <Field
          label="Shared secret"
          name="shared_secret"
          type="password"
          autocomplete="off"
          hint={
            stored.has_shared_secret
              ? "A secret is stored; leave empty to keep it. The proxy sends it as X-Hangar-Trusted-Proxy-Secret."
              : "Optional, at least 16 characters: the proxy sends it as X-Hangar-Trusted-Proxy-Secret."
          }
        />
        <AssertionFields values={values} />
        <Button>Save the trusted proxy</Button>
      </PostForm>
      {stored.configured ? (
        <p class="hint" id="trusted-proxy-state">
          {stored.in_use ? "The trusted proxy is the sign-in of External Access." : "Saved, but OIDC is the sign-in of External Access now."}
        </p>
      ) : null}
    </Section>
  );
}

export function SettingsPage(props: {
  ctx: PageCtx;
  data: SettingsData;
  problem?: FormProblem | null;
  presets?: { proxy: ProxyPreset | null; oidc: ProxyPreset | null };
}) {
  const { data } = props;
  const oidcPreset = props.presets?.oidc ?? null;
  const isOwner = props.ctx.user?.role === "owner";
  const problem = props.problem ?? null;
  const v = (section: SectionId, key: string, fallback: string | null | undefined) =>
    problem?.section === section && key in problem.values ? problem.values[key] : (fallback ?? "");
  const remote = data.preferences.runtime_mode === "remote";
  const s3 = data.storage.s3;
  return (
    <Layout ctx={props.ctx} title="Settings">
      <h1>Settings</h1>

      <Section title="External Access" id="mode" description="Let your team reach Hangar from other machines, through your HTTPS proxy.">
        <Problem problem={problem} section="mode" />
        {data.preflight.checks.some((c) => c.id === "trusted_proxy_secret" && !c.ok) ? (
          <div class="flash flash-error" role="alert" id="trusted-proxy-warning">
            The trusted proxy has neither a shared secret nor proxy addresses: any program on this machine can sign in as anyone by sending the
            identity header. A proxy configured with a shared secret (the setup wizard makes one by default) sends it as
            X-Hangar-Trusted-Proxy-Secret, and Hangar then refuses every request without it.
          </div>
        ) : null}
        <p>
          Hangar is in <strong id="runtime-mode">{remote ? "remote mode (External Access on)" : "local mode (this machine only)"}</strong>.
          {data.preferences.restart_required
            ? " Restart the daemon with HANGAR_HOST=0.0.0.0 (or the proxy-facing address): it still listens on loopback only."
            : ""}
        </p>
        <h3>Preflight</h3>
        <Checklist preflight={data.preflight} />
        {isOwner ? (
          <form method="post" action="/settings/mode" class="actions" data-confirm="Changing the mode signs everyone out, you included. Continue?">
            <input type="hidden" name="runtime_mode" value={remote ? "local" : "remote"} />
            <Button variant={remote ? "secondary" : "primary"}>{remote ? "Switch back to local mode" : "Switch External Access on"}</Button>
            <span class="hint">Everyone is signed out, you included.</span>
          </form>
        ) : (
          <p class="hint">Only the owner can switch External Access.</p>
        )}
      </Section>

      {isOwner ? (
        <Section title="Network" id="network" description="Where people and devices reach Hangar when External Access is on.">
          <Problem problem={problem} section="network" />
          <PostForm action="/settings/network">
            <Field
              label="Public URL"
              name="public_url"
              type="url"
              value={v("network", "public_url", data.network.public_url)}
              placeholder="https://ci.example.com"
              hint="The HTTPS address of your proxy in front of Hangar."
            />
            <TextArea
              label="Allowed origins"
              name="allowed_origins"
              value={v("network", "allowed_origins", data.network.allowed_origins.join("\n"))}
              hint="One per line; must include the public URL's origin."
            />
            <Field
              label="Artifact delivery URL"
              name="artifact_delivery_url"
              type="url"
              value={v("network", "artifact_delivery_url", data.network.artifact_delivery_url)}
              hint="Optional HTTPS address for installer downloads; the public URL otherwise."
            />
            <Button>Save network settings</Button>
          </PostForm>
        </Section>
      ) : null}

      {isOwner ? (
        <Section title="Sign-in with OIDC" id="oidc" description="Your identity provider, for signing in from other machines.">
          <Problem problem={problem} section="oidc" />
          <PresetLinks list={OIDC_PRESETS} href={(id) => `/settings?oidc_preset=${id}#oidc`} chosen={oidcPreset} id="oidc-presets" />
          <CopyField id="oidc-redirect" label="Redirect URI to register at the provider" value={data.callbackUri} />
          <PostForm action="/settings/oidc">
            <Field
              label="Issuer URL"
              name="issuer_url"
              type="url"
              value={v("oidc", "issuer_url", oidcPreset?.values.issuer_url ?? data.oidc?.issuer_url)}
              placeholder="https://accounts.example.com"
            />
            <Field label="Client ID" name="client_id" value={v("oidc", "client_id", data.oidc?.client_id)} autocomplete="off" />
            <Field
              label="Client secret"
              name="client_secret"
              type="password"
              autocomplete="off"
              hint={data.oidc?.has_client_secret ? "A secret is stored; leave empty to keep it." : "Optional for public clients. Stored encrypted."}
            />
            <Button>Save and check the provider</Button>
          </PostForm>
        </Section>
      ) : null}

      {isOwner ? <TrustedProxySection data={data} problem={problem} preset={props.presets?.proxy ?? null} /> : null}

      <Section
        title="Artifact storage"
        id="storage"
        description="Where build artifacts are kept. Artifacts stored earlier stay readable where they were written."
      >
        <Problem problem={problem} section="storage" />
        <PostForm action="/settings/storage">
          <RadioGroup
            legend="Provider"
            name="provider"
            value={v("storage", "provider", data.storage.provider)}
            options={[
              { value: "local", label: "This machine's disk" },
              { value: "s3", label: "S3 or an S3-compatible store" },
              { value: "r2", label: "Cloudflare R2" },
            ]}
          />
          <Field
            label="Local directory"
            name="base_dir"
            value={v("storage", "base_dir", data.storage.local.base_dir)}
            hint="An absolute path the daemon can write (local disk)."
          />
          <div class="grid2">
            <Field
              label="Endpoint"
              name="endpoint"
              type="url"
              value={v("storage", "endpoint", s3.endpoint)}
              placeholder="https://s3.eu-west-1.amazonaws.com"
            />
            <Field label="Region" name="region" value={v("storage", "region", s3.region)} placeholder="eu-west-1 (auto for R2)" />
            <Field label="Bucket" name="bucket" value={v("storage", "bucket", s3.bucket)} />
            <Field label="Key prefix" name="prefix" value={v("storage", "prefix", s3.prefix)} placeholder="hangar/" />
            <Field label="Access key ID" name="access_key_id" value={v("storage", "access_key_id", s3.access_key_id)} autocomplete="off" />
            <Field
              label="Secret access key"
              name="secret_access_key"
              type="password"
              autocomplete="off"
              hint={s3.has_secret_access_key ? "A key is stored; leave empty to keep it." : undefined}
            />
          </div>
          <Checkbox
            label="Path-style URLs (MinIO and most self-hosted stores)"
            name="force_path_style"
            checked={v("storage", "force_path_style", s3.force_path_style ? "1" : "") === "1"}
          />
          <Button>Save storage</Button>
        </PostForm>
      </Section>

      <RetentionSection
        policy={data.retention}
        last={data.lastPass}
        now={props.ctx.now}
        problem={problem?.section === "retention" ? problem.message : null}
      />
      <DiskSection disk={data.disk} names={data.names} />

      {isOwner ? localLoginSection(data.localLogin, remote, problem) : null}
    </Layout>
  );
}
