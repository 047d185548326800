// `hangar service --systemd|--launchd` (docs/api.md §13): a unit for this installation. The daemon is started by
// `node` directly (no npm, no shell left in between), so the service manager's stop signal reaches it and it
// drains in-flight requests before exiting.
import { resolve } from "node:path";
import { userInfo } from "node:os";

export interface ServiceSettings {
  /** Absolute path of the node binary running this command. */
  node: string;
  /** Absolute path of bin/hangar.mjs. */
  hangar: string;
  /** The project root: the working directory (data/ resolves from it unless HANGAR_DATA_DIR is absolute). */
  root: string;
  /** The environment file the unit reads (HANGAR_* settings; secrets stay out of the unit). */
  envFile: string;
  user: string;
}

export function defaultServiceSettings(root: string, envFile?: string): ServiceSettings {
  return {
    node: process.execPath,
    hangar: resolve(root, "bin/hangar.mjs"),
    root: resolve(root),
    envFile: resolve(envFile ?? resolve(root, "hangar.env")),
    user: userInfo().username,
  };
}

/** systemd quotes arguments with double quotes and backslash escapes. */
function systemdQuote(value: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(value) ? value : `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

export function systemdUnit(s: ServiceSettings): string {
  return `# Hangar CI daemon. Install: sudo cp hangar.service /etc/systemd/system/ && sudo systemctl daemon-reload
# && sudo systemctl enable --now hangar
[Unit]
Description=Hangar CI daemon
Documentation=file://${s.root}/README.md
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User=${s.user}
WorkingDirectory=${systemdQuote(s.root)}
# HANGAR_* settings (HANGAR_HOST, HANGAR_PORT, HANGAR_DATA_DIR, …); the leading "-" makes the file optional.
EnvironmentFile=-${systemdQuote(s.envFile)}
ExecStart=${systemdQuote(s.node)} ${systemdQuote(s.hangar)} serve
Restart=on-failure
RestartSec=5
# SIGTERM makes the daemon finish in-flight requests (10 s at most), then exit 0.
KillSignal=SIGTERM
TimeoutStopSec=20
UMask=0077
NoNewPrivileges=true

[Install]
WantedBy=multi-user.target
`;
}

function xml(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/**
 * launchd has no environment-file setting: /bin/sh reads the file and then `exec`s node, which replaces the shell,
 * so launchd's SIGTERM reaches the daemon itself. Secrets stay in the file, not in the plist.
 */
export function launchdPlist(s: ServiceSettings): string {
  const script = `set -a; [ -f "$1" ] && . "$1"; set +a; exec "$2" "$3" serve`;
  const args = ["/bin/sh", "-c", script, "hangar", s.envFile, s.node, s.hangar];
  return `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Hangar CI daemon. Install: cp dev.hangar.daemon.plist ~/Library/LaunchAgents/ &&
     launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/dev.hangar.daemon.plist -->
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>dev.hangar.daemon</string>
  <key>ProgramArguments</key>
  <array>
${args.map((a) => `    <string>${xml(a)}</string>`).join("\n")}
  </array>
  <key>WorkingDirectory</key>
  <string>${xml(s.root)}</string>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <dict>
    <key>SuccessfulExit</key>
    <false/>
  </dict>
  <key>ThrottleInterval</key>
  <integer>5</integer>
  <key>Umask</key>
  <integer>63</integer>
  <key>ExitTimeOut</key>
  <integer>20</integer>
  <key>StandardOutPath</key>
  <string>${xml(s.root)}/hangar.log</string>
  <key>StandardErrorPath</key>
  <string>${xml(s.root)}/hangar.log</string>
</dict>
</plist>
`;
}
