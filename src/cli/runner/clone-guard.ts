// The runner's clone under the daemon's outbound guard (docs/runner-isolation.md): the repository's host is
// resolved and every address checked with the daemon's own rules and the allow-list the daemon hands out with the
// job, before git runs at all, so a refused destination never sees a connection, let alone a credential. Over
// http(s) git is then pinned to the checked addresses (`http.curloptResolve`): no second DNS answer to rebind to.
import { lookup } from "node:dns/promises";
import {
  checkResolved,
  checkUrlWithoutDns,
  type DestinationNotAllowedError,
  findDestinationNotAllowed,
  parseOutboundAllow,
  type OutboundAllowList,
} from "../../domain/common/outbound.ts";
import { parseIpLiteral } from "../../domain/common/addresses.ts";

/** What git may be pointed at: the transports it may use and, for http(s), the pinned `host:port:addresses`. */
export type CloneTarget = { ok: true; protocols: string; pins: string[] } | { ok: false; message: string };

export function parseAllow(cidrs: readonly string[] | undefined): OutboundAllowList {
  // An entry the daemon sent that does not parse is dropped, never widened into something else.
  const valid = (cidrs ?? []).filter((c) => {
    try {
      parseOutboundAllow(c);
      return true;
    } catch {
      return false;
    }
  });
  return parseOutboundAllow(valid.join(","));
}

/** Host and port of an ssh or git URL (`ssh://u@h:22/p`, `git://h/p`, scp-like `u@h:p`), or null. */
function otherHost(url: string): { host: string; protocol: string } | null {
  if (URL.canParse(url)) {
    const u = new URL(url);
    const scheme = u.protocol.replace(/:$/, "");
    if (scheme === "ssh" || scheme === "git+ssh" || scheme === "ssh+git") return { host: u.hostname, protocol: "ssh" };
    if (scheme === "git") return { host: u.hostname, protocol: "git" };
    return null;
  }
  const scp = /^(?:[^@/]+@)?(\[[^\]]+\]|[^:/]+):/.exec(url);
  return scp ? { host: scp[1]!, protocol: "ssh" } : null;
}

async function resolveAll(host: string): Promise<string[]> {
  const literal = parseIpLiteral(host);
  if (literal) return [literal.toString()];
  return (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
}

/** Checks one repository URL; `local` paths and file:// URLs are the daemon's decision (made when it was saved). */
export async function checkCloneTarget(repoUrl: string, allow: OutboundAllowList): Promise<CloneTarget> {
  if (repoUrl.startsWith("/") || /^file:/i.test(repoUrl)) return { ok: true, protocols: "file", pins: [] };
  try {
    if (/^https?:\/\//i.test(repoUrl)) {
      const parsed = new URL(repoUrl);
      const port = parsed.port || (parsed.protocol === "https:" ? "443" : "80");
      const { literal } = checkUrlWithoutDns(parsed, allow);
      if (literal) {
        // A localhost name is pinned to 127.0.0.1, so no resolver decides where it goes.
        const pins = parseIpLiteral(parsed.hostname) ? [] : [`${parsed.hostname}:${port}:127.0.0.1`];
        return { ok: true, protocols: "http:https", pins };
      }
      const addresses = await resolveAll(parsed.hostname).catch(() => null);
      if (!addresses || addresses.length === 0) return { ok: false, message: `the repository's host ${parsed.hostname} does not resolve` };
      const { usable } = checkResolved(parsed.hostname, addresses, allow);
      return {
        ok: true,
        protocols: "http:https",
        pins: [`${parsed.hostname}:${port}:${usable.map((a) => (a.includes(":") ? `[${a}]` : a)).join(",")}`],
      };
    }
    const other = otherHost(repoUrl);
    if (!other) return { ok: false, message: "the repository URL is neither http(s), ssh, git nor a local path" };
    const host = other.host.replace(/^\[|\]$/g, "");
    const addresses = await resolveAll(host).catch(() => null);
    if (!addresses || addresses.length === 0) return { ok: false, message: `the repository's host ${host} does not resolve` };
    // ssh and git:// connect through their own resolver, which cannot be pinned: every address must pass.
    for (const address of addresses) checkResolved(host, [address], allow);
    return { ok: true, protocols: other.protocol, pins: [] };
  } catch (err) {
    const refused = findDestinationNotAllowed(err);
    if (!refused) throw err;
    return { ok: false, message: refusalMessage(refused) };
  }
}

/** The daemon's message names its own setting; on the runner it is the daemon's setting too. */
function refusalMessage(refused: DestinationNotAllowedError): string {
  return `${refused.message} (on the daemon: the runner clones under the daemon's outbound guard)`;
}
