// Command-line option parsing shared by every `hangar` command (docs/api.md §3 and §13).
import { readFileSync } from "node:fs";
import { parseArgs, type ParseArgsConfig } from "node:util";

export type OptionsConfig = NonNullable<ParseArgsConfig["options"]>;
export type ParsedOptions<O extends OptionsConfig> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: false }>
>["values"];

/**
 * An option that takes a value takes the next argument whatever it is, as getopt does: `--session -abc` is the
 * session `-abc`. node:util parseArgs refuses a value starting with `-` unless written `--session=-abc`, and one
 * token in 64 used to start with `-`; joining `--name value` into `--name=value` first settles it.
 */
function joinOptionValues(args: string[], options: OptionsConfig): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "--") {
      out.push(...args.slice(i));
      break;
    }
    const long = arg.startsWith("--") && !arg.includes("=") ? arg.slice(2) : undefined;
    const short = /^-[^-]$/.test(arg) ? Object.keys(options).find((k) => options[k]?.short === arg.slice(1)) : undefined;
    const name = long ?? short;
    if (name !== undefined && options[name]?.type === "string" && i + 1 < args.length) {
      out.push(`--${name}=${args[i + 1]}`);
      i++;
      continue;
    }
    out.push(arg);
  }
  return out;
}

/** The named options (no positionals, unknown ones refused), or parseArgs' message when they do not parse. */
export function parseOptions<const O extends OptionsConfig>(args: string[], options: O): ParsedOptions<O> | string {
  try {
    return parseArgs({ args: joinOptionValues(args, options), options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    return (err as Error).message;
  }
}

export class SecretOptionError extends Error {}

export interface SecretSources {
  /** The value given on the command line (`--token T`). */
  value?: string;
  /** A file holding the value (`--token-file F`): a command line is visible to every user of the machine. */
  file?: string;
  /** The environment variable's value. */
  env?: string;
  /** Option names for messages, e.g. `--token`, `--token-file`, `HANGAR_RUNNER_TOKEN`. */
  names: { value: string; file: string; env: string };
}

/**
 * A token from the command line, a file or the environment, in that order (docs/api.md §3). A file's value is its
 * content without the line break around it, so `echo $TOKEN > file` works. Undefined when none is given.
 */
export function readSecretOption(sources: SecretSources): string | undefined {
  const { names } = sources;
  if (sources.value !== undefined && sources.file !== undefined) {
    throw new SecretOptionError(`give ${names.value} or ${names.file}, not both`);
  }
  if (sources.value !== undefined) {
    if (sources.value === "") throw new SecretOptionError(`${names.value} is empty`);
    return sources.value;
  }
  if (sources.file !== undefined) {
    let text: string;
    try {
      text = readFileSync(sources.file, "utf8");
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? "an error";
      throw new SecretOptionError(`cannot read ${names.file} ${sources.file}: ${code}`);
    }
    const value = text.trim();
    if (value === "") throw new SecretOptionError(`${names.file} ${sources.file} is empty`);
    if (/\s/.test(value)) throw new SecretOptionError(`${names.file} ${sources.file} must hold one token and nothing else`);
    return value;
  }
  return sources.env === "" ? undefined : sources.env;
}
