import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ConfigError, loadConfig, type HangarConfig } from "../config.ts";
import { ApiError } from "../errors.ts";
import { HANGAR_VERSION } from "../version.ts";
import { BackupError } from "./backup.ts";
import { parseOptions, type OptionsConfig, type ParsedOptions } from "./options.ts";

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
  backup --out DIR      copy the database, key file (and --with-artifacts) while the daemon runs
  restore --from DIR    put a backup into an empty data directory (daemon stopped)
  service --systemd|--launchd
                        print a service unit that starts this installation at boot
  runner                run the reference build runner (\`hangar runner --help\`)
  --version             print the version

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
  backup: `Usage: hangar backup --out DIR [--with-artifacts]

Takes a consistent snapshot of the embedded database while the daemon runs (VACUUM INTO), checks it with
PRAGMA integrity_check, and writes to DIR (created; it must be new or empty): hangar.db, master.key (0600) and
manifest.json (row counts and SHA-256 checksums). --with-artifacts also copies the local artifacts the snapshot
lists into DIR/artifacts/. Prints a JSON summary on stdout and progress on stderr.
  --out DIR          where the backup goes (outside the data directory)
  --with-artifacts   copy local-disk artifacts too (S3/R2 artifacts stay in their bucket)
`,
  restore: `Usage: hangar restore --from DIR

Checks a backup's checksums and puts it into the data directory HANGAR_DATA_DIR names, which must be empty or
absent. Run it with the daemon stopped, then start the daemon on that directory.
  --from DIR         a directory written by hangar backup
`,
  service: `Usage: hangar service --systemd|--launchd [--environment-file FILE]

Prints a service unit for this installation on stdout: systemd (Linux) or launchd (macOS). The unit runs
node directly on bin/hangar.mjs serve (so the stop signal reaches the daemon), restarts it on failure, and
reads HANGAR_* settings from an environment file (default: hangar.env in the project root).
  --systemd | --launchd   which kind of unit
  --environment-file FILE the environment file the unit reads
`,
};

function fail(message: string): number {
  process.stderr.write(`hangar: ${message}\n`);
  return 1;
}

/** A usage error (docs/api.md §13): the message and the command's usage on stderr, exit code 2. */
function usageError(message: string, usage: string): number {
  process.stderr.write(`hangar: ${message}\n\n${usage}`);
  return 2;
}

/** Options each command accepts: anything else is refused (`serve --port 9000` used to start on 8080). */
const COMMAND_OPTIONS = {
  serve: {},
  "setup-token": { ttl: { type: "string" } },
  login: { email: { type: "string" }, "print-token": { type: "boolean" } },
  migrate: {},
  backup: { out: { type: "string" }, "with-artifacts": { type: "boolean" } },
  restore: { from: { type: "string" } },
  service: { systemd: { type: "boolean" }, launchd: { type: "boolean" }, "environment-file": { type: "string" } },
} as const satisfies Record<string, OptionsConfig>;

type CommandName = keyof typeof COMMAND_OPTIONS;

/** This installation's root and package.json, found upward from this module (src/cli/ from source, dist/ bundled). */
function findPackage(): { root: string } | undefined {
  for (const relative of ["../../", "../"]) {
    try {
      const root = fileURLToPath(new URL(relative, import.meta.url));
      const pkg = JSON.parse(readFileSync(`${root}package.json`, "utf8")) as { name?: string };
      if (pkg.name === "hangar") return { root };
    } catch {
      // not at this level; try the next
    }
  }
  return undefined;
}

export function hangarVersion(): string {
  return HANGAR_VERSION;
}

/** Errors from the file system or the database that a user can act on: one line, never a stack trace. */
function operationalMessage(err: unknown): string | undefined {
  if (err instanceof ConfigError || err instanceof ApiError || err instanceof BackupError) return err.message;
  if (!(err instanceof Error)) return undefined;
  if (err.name === "ListenError" || err.name === "DataDirError") return err.message;
  const e = err as NodeJS.ErrnoException;
  if (typeof e.code === "string" && /^E[A-Z]+$/.test(e.code)) return `${e.code}: ${e.message.replace(/^E[A-Z]+: /, "")}`;
  // libSQL reports a database it cannot open or use with a SQLITE_* code.
  if (typeof e.code === "string" && e.code.startsWith("SQLITE_")) return `the database cannot be used (${e.code}): ${e.message}`;
  return undefined;
}

/** The `hangar` dispatcher; returns the exit code (undefined while a long-running command keeps going). */
export async function main(argv: string[]): Promise<number | undefined> {
  const [command, ...rest] = argv;
  // Every file the daemon and the CLI create is private to this user (docs/api.md §13): the database holds emails,
  // logs and the audit trail. The runner is left alone: its build steps inherit its umask, and what a build
  // writes is the pipeline's business.
  if (command !== "runner") process.umask(0o077);
  if (command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  if (command === "--version" || command === "-V" || command === "version") {
    process.stdout.write(`hangar ${hangarVersion()}\n`);
    return 0;
  }
  if (!command) return usageError("no command given", USAGE);
  if (command === "runner") {
    const { runnerMain } = await import("./runner/main.ts");
    return runnerMain(rest);
  }
  if (!Object.hasOwn(COMMAND_OPTIONS, command)) return usageError(`unknown command '${command}'`, USAGE);
  const name = command as CommandName;
  const help = COMMAND_HELP[name] ?? USAGE;
  if (rest.includes("--help") || rest.includes("-h")) {
    process.stdout.write(help);
    return 0;
  }
  const parsed = parseOptions(rest, COMMAND_OPTIONS[name]);
  if (typeof parsed === "string") return usageError(parsed, help);
  try {
    // The data directory first, before the heavier modules load: one that cannot be created or written stops the
    // command at once with its name (docs/decisions.md "An unusable data directory").
    if (name === "serve" || name === "setup-token" || name === "migrate" || name === "login") {
      const { prepareDataDir } = await import("../runtime/data-dir.ts");
      prepareDataDir(loadConfig(process.env).dataDir);
    }
    switch (name) {
      case "serve":
        return await serveCommand(loadConfig(process.env));
      case "setup-token": {
        const { ttl } = parsed as ParsedOptions<(typeof COMMAND_OPTIONS)["setup-token"]>;
        const seconds = ttl === undefined ? DEFAULT_BOOTSTRAP_TTL_S : Number(ttl);
        if (!/^\d+$/.test(ttl ?? "1") || !Number.isSafeInteger(seconds) || seconds < 1) {
          return usageError("--ttl must be a whole number of seconds, 1 or more", help);
        }
        return await setupTokenCommand(loadConfig(process.env), seconds);
      }
      case "login":
        return await loginCommand(loadConfig(process.env), rest);
      case "migrate":
        return await migrateCommand(loadConfig(process.env));
      case "backup": {
        const o = parsed as ParsedOptions<(typeof COMMAND_OPTIONS)["backup"]>;
        if (!o.out) return usageError("--out DIR is required", help);
        return await backupCommand(loadConfig(process.env), o.out, o["with-artifacts"] === true);
      }
      case "restore": {
        const o = parsed as ParsedOptions<(typeof COMMAND_OPTIONS)["restore"]>;
        if (!o.from) return usageError("--from DIR is required", help);
        return await restoreCommand(loadConfig(process.env), o.from);
      }
      case "service": {
        const o = parsed as ParsedOptions<(typeof COMMAND_OPTIONS)["service"]>;
        if (o.systemd === o.launchd) return usageError("give exactly one of --systemd or --launchd", help);
        return await serviceCommand(o.systemd ? "systemd" : "launchd", o["environment-file"]);
      }
    }
  } catch (err) {
    const message = operationalMessage(err);
    if (message !== undefined) return fail(message);
    throw err;
  }
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

async function setupTokenCommand(config: HangarConfig, ttl: number): Promise<number> {
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
  const { createCliSession, createLocalLoginCode } = await import("../domain/auth/local-login-codes.ts");
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
      process.stderr.write(
        `hangar: signed in as ${signedIn.user.email} (${signedIn.user.role}) until ${new Date(signedIn.expires_at * 1000).toISOString()}; ${describeStore(config)}\n`,
      );
      return 0;
    }
    const { code, user } = await createLocalLoginCode(deps, email);
    process.stdout.write(`${daemonUrl}/login/local/${code}\n`);
    process.stderr.write(
      `hangar: open the link within 5 minutes to sign in as ${user.email} (${user.role}); it works once; ${describeStore(config)}\n`,
    );
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
    import("../domain/setup/setup.ts"),
    import("../runtime/data-dir.ts"),
  ]);
  return { openDb, migrateDb, systemClock, issueBootstrapToken, prepareDataDir, readDaemonUrl };
}

async function backupCommand(config: HangarConfig, out: string, withArtifacts: boolean): Promise<number> {
  const [{ runBackup }, { openDb }] = await Promise.all([import("./backup.ts"), import("../db/client.ts")]);
  const manifest = await runBackup(config, { out, withArtifacts, version: hangarVersion() }, { openDb }, (line) => process.stderr.write(`${line}\n`));
  const bytes = manifest.files.reduce((n, f) => n + f.bytes, 0);
  process.stdout.write(`${JSON.stringify({ out, files: manifest.files.length, bytes, counts: manifest.counts })}\n`);
  return 0;
}

async function restoreCommand(config: HangarConfig, from: string): Promise<number> {
  const [{ runRestore }, { openDb }] = await Promise.all([import("./backup.ts"), import("../db/client.ts")]);
  await runRestore(config, { from }, { openDb }, (line) => process.stderr.write(`${line}\n`));
  return 0;
}

async function serviceCommand(kind: "systemd" | "launchd", envFile: string | undefined): Promise<number> {
  const { defaultServiceSettings, launchdPlist, systemdUnit } = await import("./service.ts");
  const root = findPackage()?.root;
  if (!root) return fail("cannot find this installation's package.json");
  const settings = defaultServiceSettings(root, envFile);
  process.stdout.write(kind === "systemd" ? systemdUnit(settings) : launchdPlist(settings));
  return 0;
}
