import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { HangarConfig } from "../config.ts";
import { loadInstance } from "../domain/setup/instance.ts";
import { runMaintenance } from "../domain/setup/maintenance.ts";
import { createHttpServer } from "./http-server.ts";
import { consoleToLog, createNodeListener } from "./node-listener.ts";
import { createNodeDeps } from "./node-deps.ts";
import { startOutboxLoop } from "./outbox-loop.ts";
import { startRetentionLoop } from "./retention-loop.ts";
import { prepareDataDir, removeDaemonUrl, writeDaemonUrl } from "./data-dir.ts";
import { defaultLocalBaseDir, readActiveStorageSettings } from "../domain/settings/artifact-storage-settings.ts";
import { describeError } from "../errors.ts";
import { removePartialUploads } from "../storage/local-disk.ts";

const SHUTDOWN_GRACE_MS = 10_000;

/** The listener could not be opened (port in use, unknown address, no permission). */
export class ListenError extends Error {
  override name = "ListenError";
}

export interface RunningDaemon {
  url: string;
  stop(): Promise<void>;
}

/** `hangar serve`: database, migrations, app, listener, periodic maintenance; stops cleanly on SIGTERM/SIGINT. */
export async function startDaemon(config: HangarConfig): Promise<RunningDaemon> {
  prepareDataDir(config.dataDir);
  const runtime = await createNodeDeps(config);
  const { deps } = runtime;
  // stderr carries JSON records only, whatever a library prints (docs/api.md §1).
  consoleToLog(deps.log);
  // Before the listener opens, so no upload of this process can be in flight (docs/api.md §7's last rule).
  await removeCrashLeftovers(deps);

  let server: Server;
  try {
    server = await new Promise((resolve, reject) => {
      const s = createHttpServer(createNodeListener(deps, { hostname: config.host }), {
        headersTimeoutMs: config.headersTimeoutMs,
        bodyTimeoutMs: config.bodyTimeoutMs,
      });
      s.listen(config.port, config.host, () => resolve(s));
      // A taken port or an address this machine does not have: a clear message instead of a crash.
      s.once("error", (err: NodeJS.ErrnoException) =>
        reject(new ListenError(`cannot listen on ${config.host}:${config.port}: ${err.code ?? err.message}`)),
      );
    });
  } catch (err) {
    runtime.close();
    throw err;
  }
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;

  let maintenanceRunning = false;
  const timer = setInterval(() => {
    if (maintenanceRunning) return;
    maintenanceRunning = true;
    runMaintenance(deps).finally(() => {
      maintenanceRunning = false;
    });
  }, config.sweepIntervalMs);
  timer.unref();
  const outboxLoop = startOutboxLoop(deps);
  const retentionLoop = startRetentionLoop(deps);

  // For `hangar login`, which finds the daemon through the data directory whatever port it chose (docs/api.md §3).
  const localUrl = writeDaemonUrl(config.dataDir, url);
  // stdout carries exactly this one line (docs/api.md §1); everything else goes to stderr as JSON records.
  process.stdout.write(`hangar listening on ${url}\n`);
  const inst = await loadInstance(deps);
  if (inst.state !== "ready") {
    deps.log({
      time: new Date().toISOString(),
      level: "info",
      msg: `setup is not complete: run \`npx hangar setup-token\` and POST the token to ${url}/v1/setup/bootstrap-token/verify`,
    });
  }

  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      clearInterval(timer);
      removeDaemonUrl(config.dataDir, localUrl);
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          if ("closeAllConnections" in server) server.closeAllConnections();
          resolve();
        }, SHUTDOWN_GRACE_MS);
        force.unref();
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        if ("closeIdleConnections" in server) server.closeIdleConnections();
      });
      await outboxLoop.stop();
      await retentionLoop.stop();
      runtime.close();
    })();
    return stopping;
  };
  return { url, stop };
}

/** Partial uploads a crashed daemon left in the default store and in the configured local one. */
async function removeCrashLeftovers(deps: Awaited<ReturnType<typeof createNodeDeps>>["deps"]): Promise<void> {
  const dirs = new Set([defaultLocalBaseDir(deps)]);
  try {
    const active = await readActiveStorageSettings(deps);
    if (active.provider === "local") dirs.add(active.baseDir);
  } catch (err) {
    deps.log({ time: new Date().toISOString(), level: "warn", msg: "could not read the artifact storage settings", error: describeError(err) });
  }
  for (const dir of dirs) {
    const removed = await removePartialUploads(dir);
    if (removed > 0) deps.log({ time: new Date().toISOString(), level: "info", msg: `removed ${removed} partial upload(s) left by a crash`, dir });
  }
}
