/**
 * Secret masking for build logs in time linear in the chunk (docs/api.md §6): one Aho–Corasick automaton over all of
 * a project's secrets, so a 1 MiB chunk costs one pass whatever the secrets look like. The scan that compared every
 * secret at every position froze the daemon for a minute on a near-miss chunk (docs/decisions.md). Web-standard
 * (Uint8Array only), so the Workers core uses it as it is.
 */
import { concatBytes } from "../common/bytes.ts";

/** Secrets shorter than this are not masked (they would shred the log); longer than the cap are masked by their prefix. */
export const MIN_SECRET_BYTES = 4;
/** Secret variables are at most 64 KiB (docs/api.md §5); nothing longer is put in the automaton. */
export const MAX_SECRET_BYTES = 64 * 1024;

const NONE = -1;
const MANY = -2;

/**
 * A compact Aho–Corasick automaton: most trie nodes of long secrets have one child, kept in two typed arrays;
 * branching nodes keep theirs in a Map keyed by node * 256 + byte.
 */
export class SecretMatcher {
  readonly longest: number;
  private readonly onlyByte: Int16Array;
  private readonly onlyChild: Int32Array;
  private readonly branches = new Map<number, number>();
  private readonly fail: Int32Array;
  /** Length of the longest secret that ends at this node (0: none). */
  private readonly out: Int32Array;
  readonly depth: Int32Array;
  readonly empty: boolean;

  constructor(secrets: readonly Uint8Array[]) {
    const usable = secrets
      .filter((s) => s.length >= MIN_SECRET_BYTES)
      .map((s) => (s.length > MAX_SECRET_BYTES ? s.subarray(0, MAX_SECRET_BYTES) : s));
    const capacity = usable.reduce((n, s) => n + s.length, 0) + 1;
    this.onlyByte = new Int16Array(capacity).fill(NONE);
    this.onlyChild = new Int32Array(capacity);
    this.fail = new Int32Array(capacity);
    this.out = new Int32Array(capacity);
    this.depth = new Int32Array(capacity);
    this.empty = usable.length === 0;
    this.longest = usable.reduce((n, s) => Math.max(n, s.length), 0);
    let nodes = 1;
    for (const secret of usable) {
      let node = 0;
      for (const byte of secret) {
        let next = this.child(node, byte);
        if (next === NONE) {
          next = nodes++;
          this.depth[next] = this.depth[node]! + 1;
          this.addChild(node, byte, next);
        }
        node = next;
      }
      this.out[node] = secret.length;
    }
    // Failure links breadth first: each node's longest proper suffix that is also a trie path.
    const queue = new Int32Array(nodes);
    let head = 0;
    let tail = 0;
    this.forEachChild(0, (_byte, c) => {
      this.fail[c] = 0;
      queue[tail++] = c;
    });
    while (head < tail) {
      const u = queue[head++]!;
      this.forEachChild(u, (byte, v) => {
        let f = this.fail[u]!;
        let target = this.child(f, byte);
        while (target === NONE && f !== 0) {
          f = this.fail[f]!;
          target = this.child(f, byte);
        }
        this.fail[v] = target !== NONE && target !== v ? target : 0;
        if (this.out[v] === 0) this.out[v] = this.out[this.fail[v]!]!;
        queue[tail++] = v;
      });
    }
  }

  private child(node: number, byte: number): number {
    const only = this.onlyByte[node]!;
    if (only === byte) return this.onlyChild[node]!;
    if (only !== MANY) return NONE;
    return this.branches.get(node * 256 + byte) ?? NONE;
  }

  private addChild(node: number, byte: number, child: number): void {
    const only = this.onlyByte[node]!;
    if (only === NONE) {
      this.onlyByte[node] = byte;
      this.onlyChild[node] = child;
      return;
    }
    if (only !== MANY) {
      this.branches.set(node * 256 + only, this.onlyChild[node]!);
      this.onlyByte[node] = MANY;
    }
    this.branches.set(node * 256 + byte, child);
  }

  private forEachChild(node: number, visit: (byte: number, child: number) => void): void {
    const only = this.onlyByte[node]!;
    if (only === NONE) return;
    if (only !== MANY) return visit(only, this.onlyChild[node]!);
    for (let byte = 0; byte < 256; byte++) {
      const c = this.branches.get(node * 256 + byte);
      if (c !== undefined) visit(byte, c);
    }
  }

  /**
   * One pass over `data`: the merged byte ranges covered by any secret occurrence ([start, end) pairs, in order),
   * and the length of the longest suffix of `data` that is a proper start of a secret (what a later chunk may
   * complete). Overlapping occurrences merge, so every byte of every occurrence is covered.
   */
  scan(data: Uint8Array): { runs: number[]; openSuffix: number } {
    const runs: number[] = [];
    let state = 0;
    for (let i = 0; i < data.length; i++) {
      const byte = data[i]!;
      let next = this.child(state, byte);
      while (next === NONE && state !== 0) {
        state = this.fail[state]!;
        next = this.child(state, byte);
      }
      state = next === NONE ? 0 : next;
      const length = this.out[state]!;
      if (length > 0) {
        const start = i + 1 - length;
        const end = i + 1;
        // Runs end in increasing order; a new occurrence may reach back over earlier runs, which it absorbs.
        let from = start;
        while (runs.length > 0 && runs[runs.length - 1]! > from) {
          const prevStart = runs[runs.length - 2]!;
          runs.length -= 2;
          from = Math.min(from, prevStart);
        }
        runs.push(from, end);
      }
    }
    // A full secret at the very end is matched already; its node's depth then equals a secret's length, and the
    // suffix still open is the longest proper prefix state, which the node's depth bounds.
    return { runs, openSuffix: this.depth[state]! };
  }
}

const STARS = new TextEncoder().encode("***");

/**
 * Masks `data` for storage, holding back what a later chunk could turn into a secret: `stored` is safe to show,
 * `pending` (raw bytes) must be joined to the next chunk. With `final`, nothing is held back.
 */
export function maskChunk(matcher: SecretMatcher, data: Uint8Array, final = false): { stored: Uint8Array; pending: Uint8Array } {
  if (matcher.empty) return { stored: data, pending: new Uint8Array(0) };
  const { runs, openSuffix } = matcher.scan(data);
  let cut = final ? data.length : data.length - Math.min(openSuffix, matcher.longest - 1);
  // An occurrence that crosses the cut goes to pending whole: no part of it may be stored unmasked.
  while (!final && runs.length > 0 && runs[runs.length - 1]! > cut) {
    cut = Math.min(cut, runs[runs.length - 2]!);
    runs.length -= 2;
  }
  const pieces: Uint8Array[] = [];
  let at = 0;
  for (let r = 0; r < runs.length; r += 2) {
    pieces.push(data.subarray(at, runs[r]!), STARS);
    at = runs[r + 1]!;
  }
  pieces.push(data.subarray(at, cut));
  return { stored: pieces.length === 1 ? pieces[0]! : concatBytes(pieces), pending: data.subarray(cut) };
}

/**
 * Matchers of recent secret sets, by a key that names the set without holding it (a project's fingerprint of its
 * sealed values): a stream of chunks neither opens the secrets nor rebuilds the automaton for each chunk. Keying by
 * the secrets' own text cost a full copy and compare of them per chunk (docs/decisions.md "Secret variables: caps
 * and masking set-up").
 */
const cache = new Map<string, SecretMatcher>();
const CACHE_ENTRIES = 16;

export async function matcherFor(key: string, load: () => Promise<readonly string[]>): Promise<SecretMatcher> {
  const hit = cache.get(key);
  if (hit) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const encoder = new TextEncoder();
  const matcher = new SecretMatcher((await load()).map((s) => encoder.encode(s)));
  cache.set(key, matcher);
  if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  return matcher;
}
