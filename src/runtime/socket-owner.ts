// Which OS user owns the other end of a loopback TCP connection (docs/decisions.md "Local login: the socket's
// owner"). Any process on the machine can open a loopback connection, a build step run as another user included,
// so local login also asks who opened it. It needs only the connection's four addresses and ports, so it works
// under whichever HTTP listener hands over the socket.
//
// Linux: /proc/net/tcp and /proc/net/tcp6 list every TCP socket of this network namespace with its owner's uid.
// macOS: `lsof` lists the sockets of the processes this user may see; a connection opened by another user's
// process is not among them (unless the daemon runs as root), so it is never taken for ours.
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { isIPv4, isIPv6 } from "node:net";
import { endianness } from "node:os";

/** The connection as the daemon's socket sees it: `local` is the daemon's end, `remote` the client's. */
export interface SocketEnds {
  localAddress: string;
  localPort: number;
  remoteAddress: string;
  remotePort: number;
}

/** An address as 16 bytes (IPv4 as `::ffff:a.b.c.d`), so a v4 socket and a v4-mapped v6 socket compare equal. */
export function addressBytes(address: string): Uint8Array | null {
  const a = address.replace(/%.*$/, "");
  if (isIPv4(a)) return Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...a.split(".").map(Number)]);
  if (!isIPv6(a)) return null;
  const mapped = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  let text = a;
  if (mapped) {
    const [b0, b1, b2, b3] = mapped[2]!.split(".").map(Number) as [number, number, number, number];
    text = `${mapped[1]}${((b0 << 8) | b1).toString(16)}:${((b2 << 8) | b3).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const headGroups = head === "" ? [] : head.split(":");
  const tailGroups = tail === undefined || tail === "" ? [] : tail.split(":");
  const groups =
    tail === undefined ? headGroups : [...headGroups, ...new Array<string>(8 - headGroups.length - tailGroups.length).fill("0"), ...tailGroups];
  if (groups.length !== 8) return null;
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    const v = parseInt(g, 16);
    out[i * 2] = v >> 8;
    out[i * 2 + 1] = v & 0xff;
  });
  return out;
}

/** `/proc/net/tcp{,6}`'s `ADDR:PORT`: the address is 32-bit words in the kernel's byte order, the port plain hex. */
export function parseProcAddress(field: string, littleEndian = endianness() === "LE"): { bytes: Uint8Array; port: number } | null {
  const [hex, portHex] = field.split(":");
  if (!hex || !portHex || (hex.length !== 8 && hex.length !== 32)) return null;
  const raw = new Uint8Array(hex.length / 2);
  for (let word = 0; word < hex.length / 8; word++) {
    for (let i = 0; i < 4; i++) {
      const byte = parseInt(hex.slice(word * 8 + i * 2, word * 8 + i * 2 + 2), 16);
      raw[word * 4 + (littleEndian ? 3 - i : i)] = byte;
    }
  }
  const bytes = raw.length === 4 ? Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...raw]) : raw;
  return { bytes, port: parseInt(portHex, 16) };
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((v, i) => v === b[i]);

/**
 * The uid owning the client's end of the connection in a `/proc/net/tcp`-format table: the row whose local end is
 * the client's and whose remote end is the daemon's (the daemon's own row is the mirror image, owned by the daemon).
 */
export function findOwnerInProcTable(table: string, ends: SocketEnds, littleEndian = endianness() === "LE"): number | null {
  const client = addressBytes(ends.remoteAddress);
  const server = addressBytes(ends.localAddress);
  if (!client || !server) return null;
  for (const line of table.split("\n")) {
    const cols = line.trim().split(/\s+/);
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
    if (cols.length < 8 || !cols[0]!.endsWith(":")) continue;
    const local = parseProcAddress(cols[1]!, littleEndian);
    const remote = parseProcAddress(cols[2]!, littleEndian);
    if (!local || !remote) continue;
    if (local.port !== ends.remotePort || remote.port !== ends.localPort) continue;
    if (!sameBytes(local.bytes, client) || !sameBytes(remote.bytes, server)) continue;
    const uid = Number(cols[7]);
    return Number.isInteger(uid) ? uid : null;
  }
  return null;
}

async function linuxSocketOwner(ends: SocketEnds): Promise<number | null> {
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let table: string;
    try {
      table = await readFile(file, "utf8");
    } catch {
      continue;
    }
    const uid = findOwnerInProcTable(table, ends);
    if (uid !== null) return uid;
  }
  return null;
}

/** `lsof -F` output: `p<pid>`, then per file `f<fd>`, `u<uid>`… and `n<local>-><remote>`; `u` comes per process. */
export function findOwnerInLsof(output: string, ends: SocketEnds): number | null {
  const client = addressBytes(ends.remoteAddress);
  const server = addressBytes(ends.localAddress);
  if (!client || !server) return null;
  let uid: number | null = null;
  const endOf = (text: string) => {
    const m = /^\[?([^\]]*?)\]?:(\d+)$/.exec(text);
    return m ? { bytes: addressBytes(m[1]!), port: Number(m[2]) } : null;
  };
  for (const line of output.split("\n")) {
    if (line.startsWith("p")) uid = null;
    else if (line.startsWith("u")) uid = Number(line.slice(1));
    else if (line.startsWith("n") && uid !== null) {
      const [from, to] = line.slice(1).split("->");
      const a = from ? endOf(from) : null;
      const b = to ? endOf(to) : null;
      if (!a?.bytes || !b?.bytes) continue;
      if (a.port === ends.remotePort && b.port === ends.localPort && sameBytes(a.bytes, client) && sameBytes(b.bytes, server)) return uid;
    }
  }
  return null;
}

function macSocketOwner(ends: SocketEnds): Promise<number | null> {
  return new Promise((resolve) => {
    // -a: both selections; -iTCP:<port>: sockets with the client's port at either end; -F pun: pid, uid, name.
    execFile("lsof", ["-nP", "-a", `-iTCP:${ends.remotePort}`, "-sTCP:ESTABLISHED", "-F", "pun"], { timeout: 5_000 }, (err, stdout) => {
      // lsof exits 1 when it found nothing (err set, stdout empty): not ours.
      void err;
      resolve(typeof stdout === "string" && stdout !== "" ? findOwnerInLsof(stdout, ends) : null);
    });
  });
}

/** The uid owning the client's end of a loopback connection, or null when it cannot be told (then: not ours). */
export function socketOwnerUid(ends: SocketEnds): Promise<number | null> {
  if (process.platform === "linux") return linuxSocketOwner(ends);
  if (process.platform === "darwin") return macSocketOwner(ends);
  return Promise.resolve(null);
}
