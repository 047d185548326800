import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../config.ts";
import { ApiError } from "../errors.ts";

// The daemon, database and setup modules are imported inside each command: `hangar runner` and `--help`
// then start without loading the whole server (about a second through tsx).
const DEFAULT_BOOTSTRAP_TTL_S = 3600;

const USAGE = `Usage: hangar <command> [options]

Commands:
  serve                 run the daemon (what \`npm start\` runs)
  setup-token [--ttl S] print a fresh one-time bootstrap token for first-run setup (default TTL ${DEFAULT_BOOTSTRAP_TTL_S} s)
  migrate               apply database migrations and exit
  runner                run the reference build runner (\`hangar runner --help\`)

Environment: HANGAR_HOST, HANGAR_PORT, HANGAR_DATA_DIR, HANGAR_DATABASE_URL, HANGAR_DATABASE_AUTH_TOKEN,
HANGAR_RUNNER_OFFLINE_AFTER_S, HANGAR_JOB_LEASE_S, HANGAR_QUEUE_TTL_S, HANGAR_BUILD_TIMEOUT_S,
HANGAR_SWEEP_INTERVAL_MS, HANGAR_MAX_UPLOAD_BYTES (see README.md).

Run \`hangar <command> --help\` for a command's options.
`;

const COMMAND_HELP: Record<string, string> = {
  serve: `Usage: hangar serve

Runs the daemon: applies migrations, listens on HANGAR_HOST:HANGAR_PORT (default 127.0.0.1:8080) and prints
"hangar listening on http://HOST:PORT". SIGTERM or SIGINT stops it after in-flight requests finish (10 s at most).
`,
  "setup-token": `Usage: hangar setup-token [--ttl SECONDS]

Makes a fresh 64-hex-character bootstrap token, replaces any earlier unused one and prints it as the only line on
stdout. Only its SHA-256 hash is stored. Refused once setup is complete. Works while the daemon runs.
  --ttl SECONDS   how long the token stays valid (default ${DEFAULT_BOOTSTRAP_TTL_S})
`,
  migrate: `Usage: hangar migrate

Applies the migrations in drizzle/ to HANGAR_DATABASE_URL (default file:<HANGAR_DATA_DIR>/hangar.db) and exits.
`,
};

function fail(message: string): number {
  process.stderr.write(`hangar: ${message}\n`);
  return 1;
}

/** The `hangar` dispatcher; returns the exit code (undefined while a long-running command keeps going). */
export async function main(argv: string[]): Promise<number | undefined> {
  const [command, ...rest] = argv;
  if (!command || command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(USAGE);
    return command ? 0 : 1;
  }
  if (command === "runner") {
    const { runnerMain } = await import("./runner/main.ts");
    return runnerMain(rest);
  }
  const help = COMMAND_HELP[command];
  if (!help) return fail(`unknown command '${command}'\n\n${USAGE}`);
  if (rest.includes("--help") || rest.includes("-h")) {
    process.stdout.write(help);
    return 0;
  }
  try {
    const config = loadConfig(process.env);
    switch (command) {
      case "serve":
        return await serveCommand(config);
      case "setup-token":
        return await setupTokenCommand(config, rest);
      case "migrate":
        return await migrateCommand(config);
    }
  } catch (err) {
    if (err instanceof ConfigError || err instanceof ApiError || (err instanceof Error && err.name === "ListenError")) return fail(err.message);
    throw err;
  }
  return 1;
}

async function serveCommand(config: ReturnType<typeof loadConfig>): Promise<undefined> {
  const { startDaemon } = await import("../runtime/node.ts");
  const daemon = await startDaemon(config);
  const onSignal = () => {
    void daemon.stop().then(() => process.exit(0));
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
  return undefined;
}

async function setupTokenCommand(config: ReturnType<typeof loadConfig>, args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { ttl: { type: "string" } }, strict: true });
  const ttl = values.ttl === undefined ? DEFAULT_BOOTSTRAP_TTL_S : Number(values.ttl);
  if (!Number.isInteger(ttl) || ttl < 1) return fail("--ttl must be a whole number of seconds, 1 or more");
  const { openDb, migrateDb, systemClock, issueBootstrapToken } = await loadDbModules();
  const opened = await openDb(config.databaseUrl, config.databaseAuthToken);
  try {
    await migrateDb(opened.db);
    const { token } = await issueBootstrapToken({ db: opened.db, clock: systemClock }, ttl);
    process.stdout.write(`${token}\n`);
    return 0;
  } finally {
    opened.close();
  }
}

async function migrateCommand(config: ReturnType<typeof loadConfig>): Promise<number> {
  const { openDb, migrateDb } = await loadDbModules();
  const opened = await openDb(config.databaseUrl, config.databaseAuthToken);
  try {
    await migrateDb(opened.db);
    process.stderr.write("hangar: migrations applied\n");
    return 0;
  } finally {
    opened.close();
  }
}

async function loadDbModules() {
  const [{ openDb }, { migrateDb }, { systemClock }, { issueBootstrapToken }] = await Promise.all([
    import("../db/client.ts"),
    import("../db/migrate.ts"),
    import("../deps.ts"),
    import("../domain/setup.ts"),
  ]);
  return { openDb, migrateDb, systemClock, issueBootstrapToken };
}
