// The project page's credentials, signing and store-key sections as HTML: view components only; the routes that save
// them are src/web/pages/project-signing.tsx.
import type { Child } from "hono/jsx";
import { protectedBranches } from "../../domain/projects/project-secrets.ts";
import type { ProjectRow } from "../../domain/projects/projects.ts";
import type { SigningHealthItem } from "../../domain/signing/health.ts";
import { toStoresJson } from "../../domain/publishing/store-credentials.ts";
import { Button, Field, Name, Section, StatusBadge, Table, TextArea, Time } from "../components.tsx";
import type { PageCtx } from "../layout.tsx";

/** Which form failed and why; the page is answered again with the message beside that form. */
export interface SigningState {
  form?: "source" | "android" | "ios" | "app_store_connect" | "google_play" | "secret" | "protection";
  error?: string;
  /** What was typed in the non-secret fields (secrets are never echoed back). */
  values?: Record<string, string>;
}

const HEALTH_BADGES: Record<SigningHealthItem["state"], { status: string; label: string }> = {
  ok: { status: "succeeded", label: "ok" },
  expiring: { status: "queued", label: "expiring" },
  expired: { status: "failed", label: "expired" },
};

const KIND_WORDS: Record<SigningHealthItem["kind"], string> = {
  ios_certificate: "iOS certificate",
  ios_profile: "iOS profile",
  android_certificate: "Android certificate",
};

function FormError(props: { state: SigningState; form: SigningState["form"] }) {
  if (props.state.form !== props.form || !props.state.error) return null;
  return (
    <p class="error" role="alert">
      {props.state.error}
    </p>
  );
}

/** A multipart POST form (file inputs); the same-origin check of every UI POST applies. */
function UploadForm(props: { action: string; id: string; children: Child }) {
  return (
    <form method="post" action={props.action} enctype="multipart/form-data" id={props.id}>
      {props.children}
    </form>
  );
}

function FileField(props: { label: string; name: string; id: string; multiple?: boolean; accept?: string; hint?: Child }) {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      <input id={props.id} name={props.name} type="file" multiple={props.multiple} accept={props.accept} required />
      {props.hint ? <p class="hint">{props.hint}</p> : null}
    </div>
  );
}

export interface SigningView {
  secrets: Array<{ name: string; updated_at: number }> | null;
  health: SigningHealthItem[];
}

export function ProjectSigning(props: {
  ctx: PageCtx;
  project: ProjectRow;
  view: SigningView;
  state: SigningState;
  canWrite: boolean;
  canManage: boolean;
}) {
  const p = props.project;
  const s = props.state;
  const ios = p.iosSigningInfo;
  const android = p.androidSigningInfo;
  const base = `/projects/${p.id}`;
  return (
    <Section
      title="Credentials and signing"
      id="credentials"
      description="Stored encrypted. Hangar never shows a secret again: only what it holds (names, subjects, expiry dates)."
    >
      {props.view.health.length > 0 ? (
        <Table headers={["Signing item", "Name", "Expires", "State"]} id="signing-health">
          {props.view.health.map((item) => (
            <tr>
              <td>{KIND_WORDS[item.kind]}</td>
              <td>
                <Name value={item.name} />
              </td>
              <td>
                <Time at={item.expires_at} now={props.ctx.now} />
              </td>
              <td>
                <StatusBadge status={HEALTH_BADGES[item.state].status} label={HEALTH_BADGES[item.state].label} />
              </td>
            </tr>
          ))}
        </Table>
      ) : null}

      <h3>Source credentials</h3>
      <p class="muted" id="source-state">
        {p.sourceCredentialsSealed !== null
          ? "Set: a token that clones the repository (stored encrypted)."
          : "Not set: the repository is cloned without credentials."}
      </p>
      {props.canWrite ? (
        <details open={s.form === "source" ? true : undefined}>
          <summary>{p.sourceCredentialsSealed !== null ? "Replace source credentials" : "Set source credentials"}</summary>
          <form method="post" action={`${base}/credentials/source`} id="source-form">
            <Field
              label="User name (optional)"
              name="username"
              id="source-username"
              value={s.form === "source" ? s.values?.username : undefined}
              autocomplete="off"
            />
            <Field
              label="Token"
              name="token"
              id="source-token"
              type="password"
              autocomplete="new-password"
              required
              hint="A personal or project access token with read access to the repository."
            />
            <FormError state={s} form="source" />
            <Button>Save source credentials</Button>
          </form>
        </details>
      ) : null}

      <h3>Android signing</h3>
      {android ? (
        <dl class="kv" id="android-state">
          <dt>Key alias</dt>
          <dd>
            <Name value={android.key_alias} />
          </dd>
          <dt>Certificate</dt>
          <dd>
            <Name value={android.certificate.subject} />
          </dd>
          <dt>Expires</dt>
          <dd>
            <Time at={android.certificate.expires_at} now={props.ctx.now} />
          </dd>
        </dl>
      ) : (
        <p class="muted" id="android-state">
          {p.androidSigningSealed !== null ? "Set (stored before descriptions existed)." : "Not set."}
        </p>
      )}
      {props.canWrite ? (
        <details open={s.form === "android" ? true : undefined}>
          <summary>{p.androidSigningSealed !== null ? "Replace the keystore" : "Upload a keystore"}</summary>
          <UploadForm action={`${base}/signing/android`} id="android-form">
            <FileField
              label="Keystore (.jks, .keystore or .p12)"
              name="keystore"
              id="android-keystore"
              hint="Opened on upload with the passwords below; JKS and PKCS#12 keystores."
            />
            <Field
              label="Keystore password"
              name="keystore_password"
              id="android-store-password"
              type="password"
              autocomplete="new-password"
              required
            />
            <Field
              label="Key alias"
              name="key_alias"
              id="android-alias"
              value={s.form === "android" ? s.values?.key_alias : undefined}
              required
              autocomplete="off"
            />
            <Field
              label="Key password"
              name="key_password"
              id="android-key-password"
              type="password"
              autocomplete="new-password"
              required
              hint="For a PKCS#12 keystore, the keystore password again."
            />
            <FormError state={s} form="android" />
            <Button>Upload keystore</Button>
          </UploadForm>
        </details>
      ) : null}

      <h3>iOS signing</h3>
      {ios ? (
        <div id="ios-state">
          <dl class="kv">
            <dt>Certificate</dt>
            <dd>
              <Name value={ios.certificate.subject} />
            </dd>
            <dt>Serial</dt>
            <dd>
              <code>{ios.certificate.serial}</code>
            </dd>
            <dt>Expires</dt>
            <dd>
              <Time at={ios.certificate.expires_at} now={props.ctx.now} />
            </dd>
          </dl>
          <Table headers={["Profile", "App id", "Kind", "Devices", "Expires"]} id="ios-profiles">
            {ios.profiles.map((profile) => (
              <tr>
                <td>
                  <Name value={profile.name} /> <code class="muted">{profile.uuid}</code>
                </td>
                <td>
                  <code>
                    <Name value={profile.app_id} />
                  </code>
                </td>
                <td>{profile.kind.replace("_", " ")}</td>
                <td>{profile.device_count ?? "–"}</td>
                <td>
                  <Time at={profile.expires_at} now={props.ctx.now} />
                </td>
              </tr>
            ))}
          </Table>
        </div>
      ) : (
        <p class="muted" id="ios-state">
          {p.iosSigningSealed !== null ? "Set (stored before descriptions existed)." : "Not set."}
        </p>
      )}
      {props.canWrite ? (
        <details open={s.form === "ios" ? true : undefined}>
          <summary>{p.iosSigningSealed !== null ? "Replace the certificate and profiles" : "Upload a certificate and profiles"}</summary>
          <UploadForm action={`${base}/signing/ios`} id="ios-form">
            <FileField
              label="Certificate with its private key (.p12)"
              name="certificate"
              id="ios-certificate"
              accept=".p12,.pfx"
              hint="Exported from Keychain Access with its key."
            />
            <Field label="Certificate password" name="certificate_password" id="ios-password" type="password" autocomplete="new-password" />
            <FileField
              label="Provisioning profiles (.mobileprovision): the app and each extension"
              name="profiles"
              id="ios-profiles-input"
              multiple
              accept=".mobileprovision"
            />
            <FormError state={s} form="ios" />
            <Button>Upload certificate and profiles</Button>
          </UploadForm>
        </details>
      ) : null}

      <StoreKeys project={p} state={s} canWrite={props.canWrite} />

      {props.view.secrets !== null ? (
        <>
          <h3>Secret variables</h3>
          <p class="muted">Given to builds of protected refs as environment variables and masked in logs. Only names are shown.</p>
          {props.view.secrets.length > 0 ? (
            <Table headers={["Name", "Updated", ""]} id="secret-variables">
              {props.view.secrets.map((secret) => (
                <tr>
                  <td>
                    <code>{secret.name}</code>
                  </td>
                  <td>
                    <Time at={secret.updated_at} now={props.ctx.now} />
                  </td>
                  <td>
                    <form method="post" action={`${base}/secrets/${secret.name}/delete`} class="inline-form" data-confirm={`Delete ${secret.name}?`}>
                      <Button variant="danger">Delete</Button>
                    </form>
                  </td>
                </tr>
              ))}
            </Table>
          ) : (
            <p class="muted">No secret variables.</p>
          )}
          <details open={s.form === "secret" ? true : undefined}>
            <summary>Add or replace a secret variable</summary>
            <form method="post" action={`${base}/secrets`} id="secret-form">
              <Field
                label="Name"
                name="name"
                id="secret-name"
                value={s.form === "secret" ? s.values?.name : undefined}
                required
                autocomplete="off"
                hint="Upper case letters, digits and _, not starting with a digit. An existing name is replaced."
              />
              <Field label="Value" name="value" id="secret-value" type="password" autocomplete="new-password" required />
              <FormError state={s} form="secret" />
              <Button>Save secret variable</Button>
            </form>
          </details>
        </>
      ) : null}

      <h3>Protection</h3>
      <p class="muted" id="protection-state">
        Signing material and secret variables go only to builds of these branches: <code>{protectedBranches(p).join(", ")}</code>
      </p>
      {props.canManage ? (
        <details open={s.form === "protection" ? true : undefined}>
          <summary>Change protection</summary>
          <form method="post" action={`${base}/protection`} id="protection-form">
            <TextArea
              label="Protected branches (globs, one per line)"
              name="branches"
              id="protection-branches"
              value={s.form === "protection" ? s.values?.branches : protectedBranches(p).join("\n")}
            />
            <TextArea
              label="Protected tags (globs, one per line; empty keeps them as they are)"
              name="tags"
              id="protection-tags"
              value={s.form === "protection" ? s.values?.tags : ""}
            />
            <FormError state={s} form="protection" />
            <Button>Save protection</Button>
          </form>
        </details>
      ) : null}
    </Section>
  );
}

/** The store keys publishing uses: what is stored (never the key itself) and a form to set or replace each. */
function StoreKeys(props: { project: ProjectRow; state: SigningState; canWrite: boolean }) {
  const stores = toStoresJson(props.project);
  const s = props.state;
  const base = `/projects/${props.project.id}/stores`;
  const asc = stores.app_store_connect;
  const play = stores.google_play;
  return (
    <div id="stores">
      <h3>App Store Connect (TestFlight)</h3>
      {asc ? (
        <dl class="kv" id="asc-state">
          <dt>Issuer ID</dt>
          <dd>
            <code>
              <Name value={asc.issuer_id} />
            </code>
          </dd>
          <dt>Key ID</dt>
          <dd>
            <code>
              <Name value={asc.key_id} />
            </code>
          </dd>
          <dt>Private key</dt>
          <dd>{asc.has_private_key ? "Stored (encrypted; not shown again)" : "Missing"}</dd>
        </dl>
      ) : (
        <p class="muted" id="asc-state">
          Not set: builds cannot be published to TestFlight.
        </p>
      )}
      {props.canWrite ? (
        <details open={s.form === "app_store_connect" ? true : undefined}>
          <summary>{asc ? "Replace the App Store Connect key" : "Set an App Store Connect key"}</summary>
          <form method="post" action={`${base}/app-store-connect`} id="asc-form">
            <Field
              label="Issuer ID"
              name="issuer_id"
              id="asc-issuer"
              value={s.form === "app_store_connect" ? s.values?.issuer_id : undefined}
              required
              autocomplete="off"
              hint="Users and Access → Integrations → App Store Connect API, above the list of keys."
            />
            <Field
              label="Key ID"
              name="key_id"
              id="asc-key-id"
              value={s.form === "app_store_connect" ? s.values?.key_id : undefined}
              required
              autocomplete="off"
            />
            <TextArea
              label="Private key (the contents of the AuthKey_….p8 file)"
              name="private_key_p8"
              id="asc-p8"
              rows={6}
              hint="Paste the whole file, from -----BEGIN PRIVATE KEY----- to -----END PRIVATE KEY-----."
            />
            <FormError state={s} form="app_store_connect" />
            <Button>Save App Store Connect key</Button>
          </form>
        </details>
      ) : null}

      <h3>Google Play</h3>
      {play ? (
        <dl class="kv" id="play-state">
          <dt>Service account</dt>
          <dd>
            <code>
              <Name value={play.client_email} />
            </code>
          </dd>
          <dt>Google Cloud project</dt>
          <dd>
            <Name value={play.project_id} />
          </dd>
          <dt>Key</dt>
          <dd>{play.has_service_account ? "Stored (encrypted; not shown again)" : "Missing"}</dd>
        </dl>
      ) : (
        <p class="muted" id="play-state">
          Not set: builds cannot be published to Google Play.
        </p>
      )}
      {props.canWrite ? (
        <details open={s.form === "google_play" ? true : undefined}>
          <summary>{play ? "Replace the service account" : "Set a service account"}</summary>
          <form method="post" action={`${base}/google-play`} id="play-form">
            <TextArea
              label="Service account key (JSON)"
              name="service_account_json"
              id="play-json"
              rows={8}
              hint="The JSON key file Google Cloud made for a service account invited in Play Console."
            />
            <FormError state={s} form="google_play" />
            <Button>Save service account</Button>
          </form>
        </details>
      ) : null}
    </div>
  );
}
