/**
 * Embedding Hangar in another Node server:
 *
 *   const { deps } = await createNodeDeps(loadConfig(process.env));
 *   http.createServer(createNodeListener(deps)).listen(3000);
 */

export { createApp } from "./app.ts";
export { loadConfig, type HangarConfig } from "./config.ts";
export type { AppDeps, AppEnv, Clock, Logger } from "./deps.ts";
export { createNodeDeps, nodePeerAddress } from "./runtime/node-deps.ts";
export { runMaintenance } from "./domain/setup/maintenance.ts";
/** A `node:http` request listener serving the whole handler set; the socket peer feeds the loopback rules. */
export { createNodeListener } from "./runtime/node-listener.ts";
