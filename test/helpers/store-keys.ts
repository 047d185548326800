// Store keys made the way teams make them, with openssl: an App Store Connect API key is an EC P-256 private key
// in a PKCS#8 `.p8` file; a Google service account key is a JSON file holding an RSA private key (PKCS#8 PEM).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface KeyPair {
  privatePem: string;
  publicPem: string;
}

function makeKey(args: string[]): KeyPair {
  const dir = mkdtempSync(join(tmpdir(), "hangar-store-key-"));
  const key = join(dir, "key.pem");
  const pub = join(dir, "pub.pem");
  execFileSync("openssl", ["genpkey", ...args, "-out", key], { stdio: "ignore" });
  execFileSync("openssl", ["pkey", "-in", key, "-pubout", "-out", pub], { stdio: "ignore" });
  return { privatePem: readFileSync(key, "utf8"), publicPem: readFileSync(pub, "utf8") };
}

/** An App Store Connect API key (`AuthKey_<key id>.p8`). */
export function makeAscKey(): KeyPair & { issuerId: string; keyId: string } {
  return { ...makeKey(["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]), issuerId: crypto.randomUUID(), keyId: "2X9R4HXF34" };
}

/** A Google service account key file whose OAuth token endpoint is `tokenUri`. */
export function makeServiceAccount(tokenUri: string): KeyPair & { json: string; clientEmail: string } {
  const pair = makeKey(["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]);
  const clientEmail = "hangar-publisher@example-project.iam.gserviceaccount.com";
  const json = JSON.stringify({
    type: "service_account",
    project_id: "example-project",
    private_key_id: "0123456789abcdef",
    private_key: pair.privatePem,
    client_email: clientEmail,
    client_id: "1234567890",
    auth_uri: "https://accounts.google.com/o/oauth2/auth",
    token_uri: tokenUri,
  });
  return { ...pair, json, clientEmail };
}
