// A signed-assertion issuer as an access gateway runs one (Cloudflare Access, Google IAP, Pomerium): a key set
// served over real HTTP on 127.0.0.1, and JWTs signed with its private keys (jose). Counts the key set's fetches,
// and can rotate its keys, for the cache and rotation tests (docs/api.md §21).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type CryptoKey, type JWK, type JWTPayload, SignJWT } from "jose";

export interface IssuerKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export interface JwksIssuer {
  /** http://127.0.0.1:PORT/cdn-cgi/access/certs */
  jwksUrl: string;
  /** The `iss` of its assertions. */
  issuer: string;
  /** How many times the key set was fetched. */
  fetches(): number;
  /** The keys served now (the first signs by default). */
  keys(): IssuerKey[];
  /** Makes a new key, served instead of the current ones; answers it. */
  rotate(): Promise<IssuerKey>;
  /** A key the issuer does not serve (yet). */
  newKey(): Promise<IssuerKey>;
  /** Serves exactly these keys. */
  serve(keys: IssuerKey[]): void;
  /** An assertion for `email`: RS256, `aud`, `iss`, `iat` now and `exp` in 5 minutes, from `nowS` (Unix seconds). */
  sign(
    email: string,
    options: { nowS: number; audience: string; key?: IssuerKey; issuer?: string; expiresInS?: number; claims?: JWTPayload },
  ): Promise<string>;
  close(): Promise<void>;
}

let counter = 0;

async function makeKey(): Promise<IssuerKey> {
  const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
  const kid = `key-${++counter}-${Math.random().toString(36).slice(2, 8)}`;
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" } };
}

export async function startJwksIssuer(): Promise<JwksIssuer> {
  let served: IssuerKey[] = [await makeKey()];
  let fetches = 0;
  const server: Server = createServer((req, res) => {
    if (req.url !== "/cdn-cgi/access/certs") {
      res.writeHead(404).end();
      return;
    }
    fetches++;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ keys: served.map((k) => k.publicJwk) }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    jwksUrl: `${origin}/cdn-cgi/access/certs`,
    issuer: origin,
    fetches: () => fetches,
    keys: () => served,
    rotate: async () => {
      const key = await makeKey();
      served = [key];
      return key;
    },
    newKey: makeKey,
    serve: (keys) => {
      served = keys;
    },
    sign: (email, o) => {
      const key = o.key ?? served[0]!;
      return new SignJWT({ email, ...o.claims })
        .setProtectedHeader({ alg: "RS256", kid: key.kid, typ: "JWT" })
        .setIssuer(o.issuer ?? origin)
        .setAudience(o.audience)
        .setSubject(email)
        .setIssuedAt(o.nowS)
        .setExpirationTime(o.nowS + (o.expiresInS ?? 300))
        .sign(key.privateKey);
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
