// Opening uploaded signing material (docs/signing.md): an iOS PKCS#12 (.p12) and an Android keystore (PKCS#12 or
// JKS), with their passwords, to refuse a wrong password or a file without a private key at upload time rather
// than an hour later in `xcodebuild` or Gradle. PKCS#12 goes through node-forge: pure JavaScript (the core also
// runs on Workers) and, unlike Web Crypto based readers, it opens the legacy RC2/3DES files that Keychain Access
// and older OpenSSL write as well as OpenSSL 3's AES/PBKDF2 ones. JKS has no maintained reader that runs outside
// Node, so its small, documented format is read here (with @noble/hashes for SHA-1).
import forge from "node-forge";
import { sha1 } from "@noble/hashes/legacy.js";
import { concatBytes } from "../common/bytes.ts";

export interface CertificateInfo {
  /** RFC 4514 order: `CN=…, OU=…, O=…, C=…`. */
  subject: string;
  /** Upper-case hex, without leading zero bytes. */
  serial: string;
  /** Unix seconds. */
  expires_at: number;
  /** The subject's OU: where Apple puts the team identifier of a signing certificate. */
  team_id: string | null;
  /** The DER bytes, to find the certificate in a profile's DeveloperCertificates. */
  der: Uint8Array;
}

export class SigningMaterialError extends Error {}

const SHORT_NAMES: Record<string, string> = {
  "2.5.4.3": "CN",
  "2.5.4.6": "C",
  "2.5.4.7": "L",
  "2.5.4.8": "ST",
  "2.5.4.10": "O",
  "2.5.4.11": "OU",
  "0.9.2342.19200300.100.1.1": "UID",
  "1.2.840.113549.1.9.1": "emailAddress",
};

const asn1 = forge.asn1;
type Asn1 = forge.asn1.Asn1;

function bytesToBinary(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 0x8000) out += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return out;
}

function binaryToBytes(binary: string): Uint8Array {
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

/**
 * `asn1.fromDer` with its options object (the typings know only the older boolean form): not strict, since
 * PKCS#12 writers pad and nest loosely, and without decoding BIT STRING contents, which re-encodes exactly.
 */
function fromDer(bytes: Uint8Array, options: { strict: boolean; decodeBitStrings?: boolean }): Asn1 {
  const read = asn1.fromDer as unknown as (input: forge.util.ByteStringBuffer, options: object) => Asn1;
  return read(forge.util.createBuffer(bytesToBinary(bytes)), options);
}

function children(node: Asn1 | undefined): Asn1[] {
  return node && Array.isArray(node.value) ? (node.value as Asn1[]) : [];
}

function primitive(node: Asn1 | undefined): string {
  return node && typeof node.value === "string" ? node.value : "";
}

/** A Name's attributes as `CN=…, O=…` in RFC 4514 order (last RDN first). */
function nameText(name: Asn1 | undefined): { text: string; values: Map<string, string> } {
  const parts: string[] = [];
  const values = new Map<string, string>();
  for (const rdn of children(name)) {
    for (const attribute of children(rdn)) {
      const [type, value] = children(attribute);
      const oid = asn1.derToOid(primitive(type));
      const label = SHORT_NAMES[oid] ?? oid;
      const raw = primitive(value);
      // UTF8String (12) holds UTF-8; the others here are ASCII or Latin-1 subsets.
      const text = value?.type === asn1.Type.UTF8 ? forge.util.decodeUtf8(raw) : raw;
      if (!values.has(label)) values.set(label, text);
      parts.push(`${label}=${text}`);
    }
  }
  return { text: parts.reverse().join(", "), values };
}

function timeOf(node: Asn1 | undefined): number {
  const text = primitive(node);
  const date = node?.type === asn1.Type.UTCTIME ? asn1.utcTimeToDate(text) : asn1.generalizedTimeToDate(text);
  const seconds = Math.floor(date.getTime() / 1000);
  if (!Number.isFinite(seconds)) throw new SigningMaterialError("the certificate's validity cannot be read");
  return seconds;
}

/** Reads the fields a person checks on a certificate straight from its ASN.1 (RSA, EC or any other key). */
export function describeCertificateDer(der: Uint8Array): CertificateInfo {
  let cert: Asn1;
  try {
    cert = fromDer(der, { strict: false, decodeBitStrings: false });
  } catch {
    throw new SigningMaterialError("not an X.509 certificate");
  }
  const tbs = children(children(cert)[0]);
  // An explicit [0] version comes first in v2/v3 certificates.
  const at = tbs[0]?.tagClass === asn1.Class.CONTEXT_SPECIFIC ? 1 : 0;
  const serialBytes = primitive(tbs[at]);
  const validity = children(tbs[at + 3]);
  const subject = nameText(tbs[at + 4]);
  if (!serialBytes || validity.length !== 2) throw new SigningMaterialError("not an X.509 certificate");
  const serial = forge.util
    .bytesToHex(serialBytes)
    .replace(/^(00)+(?=.)/, "")
    .toUpperCase();
  return { subject: subject.text, serial, expires_at: timeOf(validity[1]), team_id: subject.values.get("OU") ?? null, der };
}

function derOfCertBag(bag: forge.pkcs12.Bag): Uint8Array | null {
  // forge keeps the parsed ASN.1 of a certificate it could not turn into an RSA certificate object.
  const node = bag.cert ? forge.pki.certificateToAsn1(bag.cert) : (bag as { asn1?: Asn1 }).asn1;
  return node ? binaryToBytes(asn1.toDer(node).getBytes()) : null;
}

interface OpenedPkcs12 {
  keys: forge.pkcs12.Bag[];
  certs: forge.pkcs12.Bag[];
}

function openPkcs12(bytes: Uint8Array, password: string): OpenedPkcs12 {
  let p12: forge.pkcs12.Pkcs12Pfx;
  try {
    const parsed = fromDer(bytes, { strict: false });
    p12 = forge.pkcs12.pkcs12FromAsn1(parsed, false, password);
  } catch (err) {
    const message = err instanceof Error ? err.message : "";
    throw new SigningMaterialError(
      /password|MAC|decrypt/i.test(message)
        ? "the password does not open this PKCS#12 file"
        : "not a PKCS#12 file (or one in a form that cannot be read)",
    );
  }
  const bagsOf = (type: string) => p12.getBags({ bagType: type })[type] ?? [];
  return {
    keys: [...bagsOf(forge.pki.oids.pkcs8ShroudedKeyBag!), ...bagsOf(forge.pki.oids.keyBag!)],
    certs: bagsOf(forge.pki.oids.certBag!),
  };
}

function localKeyId(bag: forge.pkcs12.Bag): string | null {
  return (bag.attributes?.localKeyId as string[] | undefined)?.[0] ?? null;
}

function friendlyName(bag: forge.pkcs12.Bag): string | null {
  return (bag.attributes?.friendlyName as string[] | undefined)?.[0] ?? null;
}

/** The certificate that goes with a key bag: same localKeyId, else the only certificate in the file. */
function certificateForKey(opened: OpenedPkcs12, key: forge.pkcs12.Bag): Uint8Array | null {
  const id = localKeyId(key);
  const match = (id && opened.certs.find((c) => localKeyId(c) === id)) || (opened.certs.length === 1 ? opened.certs[0] : undefined);
  return match ? derOfCertBag(match) : null;
}

/** Opens an iOS signing identity (.p12): it must hold a private key and its certificate. */
export function openSigningIdentity(bytes: Uint8Array, password: string): CertificateInfo {
  const opened = openPkcs12(bytes, password);
  const key = opened.keys[0];
  if (!key) throw new SigningMaterialError("the PKCS#12 file holds no private key: export the certificate with its key from Keychain Access");
  const der = certificateForKey(opened, key);
  if (!der) throw new SigningMaterialError("the PKCS#12 file holds no certificate for its private key");
  return describeCertificateDer(der);
}

const JKS_MAGIC = 0xfeedfeed;
const JCEKS_MAGIC = 0xcececece;
/** Sun's key protection algorithm (a SHA-1 keystream), the only one JKS files use. */
const JKS_KEY_PROTECTOR_OID = "1.3.6.1.4.1.42.2.17.1.1";

/** JKS passwords are hashed as UTF-16 big-endian code units. */
function passwordBytes(password: string): Uint8Array {
  const out = new Uint8Array(password.length * 2);
  for (let i = 0; i < password.length; i++) {
    out[i * 2] = password.charCodeAt(i) >> 8;
    out[i * 2 + 1] = password.charCodeAt(i) & 0xff;
  }
  return out;
}

class JksReader {
  at = 0;
  constructor(private readonly bytes: Uint8Array) {}
  private need(n: number): void {
    if (this.at + n > this.bytes.length) throw new SigningMaterialError("the JKS keystore is truncated");
  }
  u16(): number {
    this.need(2);
    const v = (this.bytes[this.at]! << 8) | this.bytes[this.at + 1]!;
    this.at += 2;
    return v;
  }
  u32(): number {
    this.need(4);
    const v = ((this.bytes[this.at]! << 24) >>> 0) + (this.bytes[this.at + 1]! << 16) + (this.bytes[this.at + 2]! << 8) + this.bytes[this.at + 3]!;
    this.at += 4;
    return v;
  }
  take(n: number): Uint8Array {
    this.need(n);
    const v = this.bytes.subarray(this.at, this.at + n);
    this.at += n;
    return v;
  }
  /** Java's modified UTF-8 with a 2-byte length; aliases are plain text, so standard UTF-8 decoding suffices. */
  utf(): string {
    return new TextDecoder().decode(this.take(this.u16()));
  }
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * A JKS keystore (the format of `keytool` before Java 9): checks the store password against the file's keyed
 * SHA-1 digest, finds the private-key entry `alias` and undoes its key protection with the key password (whose
 * own SHA-1 check tells a wrong password). Returns the entry's first certificate.
 */
function openJks(bytes: Uint8Array, storePassword: string, alias: string, keyPassword: string): CertificateInfo {
  if (bytes.length < 32) throw new SigningMaterialError("the JKS keystore is truncated");
  const body = bytes.subarray(0, bytes.length - 20);
  const expected = sha1(concatBytes([passwordBytes(storePassword), new TextEncoder().encode("Mighty Aphrodite"), body]));
  if (!equalBytes(expected, bytes.subarray(bytes.length - 20))) throw new SigningMaterialError("the keystore password does not open this keystore");
  const reader = new JksReader(body);
  reader.u32();
  const version = reader.u32();
  if (version !== 1 && version !== 2) throw new SigningMaterialError(`JKS version ${version} is not known`);
  const count = reader.u32();
  for (let i = 0; i < count; i++) {
    const tag = reader.u32();
    const name = reader.utf();
    reader.take(8); // creation time
    if (tag === 2) {
      if (version === 2) reader.utf();
      reader.take(reader.u32());
      continue;
    }
    if (tag !== 1) throw new SigningMaterialError("the JKS keystore holds an entry of an unknown kind");
    const protectedKey = reader.take(reader.u32());
    const chain: Uint8Array[] = [];
    const chainLength = reader.u32();
    for (let c = 0; c < chainLength; c++) {
      if (version === 2) reader.utf();
      chain.push(reader.take(reader.u32()));
    }
    // keytool stores aliases in lower case and matches them without regard to case.
    if (name.toLowerCase() !== alias.toLowerCase()) continue;
    checkJksKeyPassword(protectedKey, keyPassword);
    if (!chain[0]) throw new SigningMaterialError(`the key "${alias}" has no certificate`);
    return describeCertificateDer(chain[0]);
  }
  throw new SigningMaterialError(`the keystore has no private key named "${alias}"`);
}

function checkJksKeyPassword(encryptedPrivateKeyInfo: Uint8Array, keyPassword: string): void {
  let algorithm = "";
  let encrypted: Uint8Array;
  try {
    const node = fromDer(encryptedPrivateKeyInfo, { strict: false });
    const [identifier, data] = children(node);
    algorithm = asn1.derToOid(primitive(children(identifier)[0]));
    encrypted = binaryToBytes(primitive(data));
  } catch {
    throw new SigningMaterialError("the key entry cannot be read");
  }
  if (algorithm !== JKS_KEY_PROTECTOR_OID) throw new SigningMaterialError("the key entry is protected by an unknown algorithm");
  if (encrypted.length < 40) throw new SigningMaterialError("the key entry is truncated");
  const password = passwordBytes(keyPassword);
  const salt = encrypted.subarray(0, 20);
  const cipher = encrypted.subarray(20, encrypted.length - 20);
  const check = encrypted.subarray(encrypted.length - 20);
  const plain = new Uint8Array(cipher.length);
  let digest: Uint8Array = salt;
  for (let i = 0; i < cipher.length; i += 20) {
    digest = sha1(concatBytes([password, digest]));
    for (let j = 0; j < 20 && i + j < cipher.length; j++) plain[i + j] = cipher[i + j]! ^ digest[j]!;
  }
  if (!equalBytes(sha1(concatBytes([password, plain])), check)) throw new SigningMaterialError(`the key password does not open the key`);
}

/**
 * Opens an Android keystore: JKS (by its magic number) or PKCS#12, with its store password, finding the key
 * `alias`. A PKCS#12 keystore has one password for the store and its keys (keytool ignores another key password
 * for it), so the key password is tried only when the store password fails.
 */
export function openAndroidKeystore(bytes: Uint8Array, storePassword: string, alias: string, keyPassword: string): CertificateInfo {
  const magic = bytes.length >= 4 ? ((bytes[0]! << 24) >>> 0) + (bytes[1]! << 16) + (bytes[2]! << 8) + bytes[3]! : 0;
  if (magic === JKS_MAGIC) return openJks(bytes, storePassword, alias, keyPassword);
  if (magic === JCEKS_MAGIC)
    throw new SigningMaterialError("JCEKS keystores are not supported: convert it with keytool -importkeystore -deststoretype PKCS12");
  let opened: OpenedPkcs12;
  try {
    opened = openPkcs12(bytes, storePassword);
  } catch (err) {
    if (keyPassword === storePassword) throw err;
    opened = openPkcs12(bytes, keyPassword);
  }
  const key = opened.keys.find((k) => friendlyName(k)?.toLowerCase() === alias.toLowerCase());
  if (!key) throw new SigningMaterialError(`the keystore has no private key named "${alias}"`);
  const der = certificateForKey(opened, key);
  if (!der) throw new SigningMaterialError(`the key "${alias}" has no certificate`);
  return describeCertificateDer(der);
}
