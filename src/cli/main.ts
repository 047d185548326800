import { ConfigError, loadConfig, type HangarConfig } from "../config.ts";
import { ApiError } from "../errors.ts";
import { parseOptions } from "./options.ts";

// The daemon, database and setup modules are imported inside each command: `hangar runner` and `--help`
// then start without loading the whole server (about a second through tsx).
const DEFAULT_BOOTSTRAP_TTL_S = 3600;

const USAGE = `Usage: hangar <command> [options]

Commands:
  serve                 run the daemon (what \`npm start\` runs)
  setup-token [--ttl S] print a fresh one-time bootstrap token for first-run setup (default TTL ${DEFAULT_BOOTSTRAP_TTL_S} s)
  login [--email E] [--print-token]
                        sign in from this machine: a one-time browser link, or a session token
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
  login: `Usage: hangar login [--email EMAIL] [--print-token]

Signs in from this machine, whatever the runtime mode or the local-login setting: reading the database in the data
directory proves you may. Prints a one-time link http://HOST:PORT/login/local/<code> that signs a browser in (it
works once, within 5 minutes; the running daemon's address comes from <data dir>/daemon.url), or with
--print-token a 24-hour user session token for the API (Authorization: Bearer). The sign-in is audited.
  --email EMAIL   the user to sign in (default: the owner)
  --print-token   print a session token instead of a browser link
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
  // Every file the daemon and the CLI create is private to this user (CONTRACT §13): the database holds emails,
  // logs and the audit trail. The runner is left alone: its build steps inherit its umask, and what a build
  // writes is the pipeline's business.
  if (command !== "runner") process.umask(0o077);
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
      case "login":
        return await loginCommand(config, rest);
      case "migrate":
        return await migrateCommand(config);
    }
  } catch (err) {
    if (err instanceof ConfigError || err instanceof ApiError || (err instanceof Error && err.name === "ListenError")) return fail(err.message);
    throw err;
  }
  return 1;
}

async function serveCommand(config: HangarConfig): Promise<undefined> {
  const { startDaemon } = await import("../runtime/node.ts");
  // The handlers go in before the daemon starts: a signal right after the listening line must still stop it
  // cleanly (and remove daemon.url), not kill it with the default action.
  let stopRequested = false;
  let daemon: Awaited<ReturnType<typeof startDaemon>> | undefined;
  const onSignal = () => {
    stopRequested = true;
    if (daemon) void daemon.stop().then(() => process.exit(0));
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
  daemon = await startDaemon(config);
  if (stopRequested) onSignal();
  return undefined;
}

/** Which database a command wrote to, on stderr: with several data directories around, the wrong one is easy. */
function describeStore(config: HangarConfig): string {
  const db = config.databaseUrl.startsWith("file:") ? config.databaseUrl.slice("file:".length) : config.databaseUrl.replace(/\/\/[^@/]*@/, "//");
  return `data directory ${config.dataDir}, database ${db}`;
}

function usageError(message: string, help: string): number {
  process.stderr.write(`hangar: ${message}\n\n${help}`);
  return 2;
}

async function setupTokenCommand(config: HangarConfig, args: string[]): Promise<number> {
  const values = parseOptions(args, { ttl: { type: "string" } });
  if (typeof values === "string") return usageError(values, COMMAND_HELP["setup-token"] ?? USAGE);
  const ttl = values.ttl === undefined ? DEFAULT_BOOTSTRAP_TTL_S : Number(values.ttl);
  if (!Number.isInteger(ttl) || ttl < 1) return fail("--ttl must be a whole number of seconds, 1 or more");
  const { openDb, migrateDb, systemClock, issueBootstrapToken, prepareDataDir } = await loadDbModules();
  prepareDataDir(config.dataDir);
  const opened = await openDb(config.databaseUrl, config.databaseAuthToken, { synchronous: config.dbSynchronous });
  try {
    await migrateDb(opened.db);
    const { token } = await issueBootstrapToken({ db: opened.db, clock: systemClock }, ttl);
    process.stdout.write(`${token}\n`);
    process.stderr.write(`hangar: bootstrap token stored in ${describeStore(config)}\n`);
    return 0;
  } finally {
    opened.close();
  }
}

async function loginCommand(config: HangarConfig, args: string[]): Promise<number> {
  const help = COMMAND_HELP.login ?? USAGE;
  const values = parseOptions(args, { email: { type: "string" }, "print-token": { type: "boolean", default: false } });
  if (typeof values === "string") return usageError(values, help);
  const { openDb, migrateDb, systemClock, prepareDataDir, readDaemonUrl } = await loadDbModules();
  const { createCliSession, createLocalLoginCode } = await import("../domain/local-login-codes.ts");
  const daemonUrl = values["print-token"] ? null : readDaemonUrl(config.dataDir);
  if (!values["print-token"] && !daemonUrl) {
    return fail(`no running daemon found for data directory ${config.dataDir} (no daemon.url): start it with \`hangar serve\`, or use --print-token`);
  }
  prepareDataDir(config.dataDir);
  const opened = await openDb(config.databaseUrl, config.databaseAuthToken, { synchronous: config.dbSynchronous });
  try {
    await migrateDb(opened.db);
    const deps = { db: opened.db, clock: systemClock };
    const email = values.email === undefined ? {} : { email: values.email };
    if (values["print-token"]) {
      const signedIn = await createCliSession(deps, email);
      process.stdout.write(`${signedIn.session_token}\n`);
      process.stderr.write(`hangar: signed in as ${signedIn.user.email} (${signedIn.user.role}) until ${new Date(signedIn.expires_at * 1000).toISOString()}; ${describeStore(config)}\n`);
      return 0;
    }
    const { code, user } = await createLocalLoginCode(deps, email);
    process.stdout.write(`${daemonUrl}/login/local/${code}\n`);
    process.stderr.write(`hangar: open the link within 5 minutes to sign in as ${user.email} (${user.role}); it works once; ${describeStore(config)}\n`);
    return 0;
  } finally {
    opened.close();
  }
}

async function migrateCommand(config: HangarConfig): Promise<number> {
  const { openDb, migrateDb, prepareDataDir } = await loadDbModules();
  prepareDataDir(config.dataDir);
  const opened = await openDb(config.databaseUrl, config.databaseAuthToken, { synchronous: config.dbSynchronous });
  try {
    await migrateDb(opened.db);
    process.stderr.write("hangar: migrations applied\n");
    return 0;
  } finally {
    opened.close();
  }
}

async function loadDbModules() {
  const [{ openDb }, { migrateDb }, { systemClock }, { issueBootstrapToken }, { prepareDataDir, readDaemonUrl }] = await Promise.all([
    import("../db/client.ts"),
    import("../db/migrate.ts"),
    import("../deps.ts"),
    import("../domain/setup.ts"),
    import("../runtime/data-dir.ts"),
  ]);
  return { openDb, migrateDb, systemClock, issueBootstrapToken, prepareDataDir, readDaemonUrl };
}
