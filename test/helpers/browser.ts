// Real Chromium for the UI tests (playwright-core drives Debian's `chromium` package; no browser download).
// One browser per test file: launch it in beforeAll, close it in afterAll. A missing browser fails the test
// with how to install it; it is never skipped.
import { existsSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { serve, type ServerType } from "@hono/node-server";
import type { Context } from "hono";
import { chromium, type Browser, type BrowserContext } from "playwright-core";
import { createApp } from "../../src/app.ts";
import type { AppDeps } from "../../src/deps.ts";
import { nodeLocalUserSocket, nodePeerAddress } from "../../src/runtime/node-deps.ts";
import type { TestApp } from "./app.ts";

export const CHROMIUM_PATH = process.env.HANGAR_CHROMIUM_PATH ?? "/usr/lib/chromium/chromium";

export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
  "--disable-sync",
];

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`Chromium not found at ${CHROMIUM_PATH}: install Chromium: apt-get install -y chromium (or set HANGAR_CHROMIUM_PATH)`);
  }
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true });
}

export interface ServedApp {
  /** http://127.0.0.1:PORT */
  url: string;
  close(): Promise<void>;
}

/**
 * Serves a test app's handler set on 127.0.0.1 port 0 over real HTTP, with the peer address taken from the
 * socket as in the daemon. `deps` overrides apply to this listener only (a fake peer, for a proxy test).
 */
export async function serveTestApp(t: TestApp, overrides: Partial<AppDeps> = {}): Promise<ServedApp> {
  const app = createApp({ ...t.deps, getPeerAddress: (c: Context) => nodePeerAddress(c), isLocalUserSocket: nodeLocalUserSocket([]), ...overrides });
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A fresh browser context (its own cookies), JavaScript on or off. */
export async function newContext(
  browser: Browser,
  options: { javaScriptEnabled?: boolean; viewport?: { width: number; height: number }; colorScheme?: "light" | "dark" } = {},
): Promise<BrowserContext> {
  return browser.newContext({
    javaScriptEnabled: options.javaScriptEnabled ?? true,
    viewport: options.viewport ?? { width: 1280, height: 800 },
    colorScheme: options.colorScheme ?? "light",
  });
}
