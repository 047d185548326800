import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // One temporary directory per run, removed at its end (test/global-setup.ts).
    globalSetup: ["test/global-setup.ts"],
    // HANGAR_TEST_CLASSES=node (npm run test:node-classes): the daemon's Request and Response classes instead of
    // the platform's (test/setup/node-server-classes.ts).
    setupFiles: process.env.HANGAR_TEST_CLASSES === "node" ? ["test/setup/node-server-classes.ts"] : [],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two cores: more workers only make the process-spawning tests fight over CPU.
    maxWorkers: 2,
  },
});
