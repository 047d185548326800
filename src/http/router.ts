import type { Result, Router } from "hono/router";
import { RegExpRouter } from "hono/router/reg-exp-router";
import { SmartRouter } from "hono/router/smart-router";
import { TrieRouter } from "hono/router/trie-router";
import { mayCarryToken } from "./middleware/context.ts";

/**
 * Hono's default router (RegExpRouter, else TrieRouter) with its answers remembered per method and path.
 * Hangar's route table mixes static and parameter segments under one prefix for one method
 * (`POST /v1/users/invite` beside `POST /v1/users/:user_id/enable`), which RegExpRouter refuses, so Hono falls back
 * to TrieRouter: its search walked the 430-entry table and allocated ~3 KB on every request, the largest single
 * allocation of an API request (docs/benchmarks.md). A route table does not change once requests flow, so the same
 * method and path always match the same handlers and parameters: the first answer is kept. Hono only reads match
 * results. Bounded: past `limit` paths the memory starts over. Paths that may carry a token are not kept, so no
 * token outlives its request in this map.
 */
export class MemoRouter<T> implements Router<T> {
  private readonly inner: Router<T> = new SmartRouter<T>({ routers: [new RegExpRouter<T>(), new TrieRouter<T>()] });
  private readonly answers = new Map<string, Result<T>>();

  constructor(private readonly limit = 2048) {}

  get name(): string {
    return `MemoRouter(${this.inner.name})`;
  }

  add(method: string, path: string, handler: T): void {
    this.answers.clear();
    this.inner.add(method, path, handler);
  }

  match(method: string, path: string): Result<T> {
    const key = `${method} ${path}`;
    const known = this.answers.get(key);
    if (known) return known;
    const result = this.inner.match(method, path);
    // A path that may carry a token (install links, uploads) is not remembered.
    if (!mayCarryToken(path)) {
      if (this.answers.size >= this.limit) this.answers.clear();
      this.answers.set(key, result);
    }
    return result;
  }
}
