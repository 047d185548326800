// The runner's own diagnostics go to stderr, one timestamped line each; build output goes to the build log.

export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export function createLogger(stream: NodeJS.WritableStream = process.stderr): Logger {
  const write = (level: string, message: string) => stream.write(`${new Date().toISOString()} hangar runner ${level}: ${message}\n`);
  return {
    info: (m) => write("info", m),
    warn: (m) => write("warn", m),
    error: (m) => write("error", m),
  };
}
