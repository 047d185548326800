// A real nginx (Debian's package, /usr/sbin/nginx) terminating TLS with a certificate made by `openssl`, in front
// of the real daemon, as a team would run it (docs/team-access.md). Runs as this user with its files in a
// temporary prefix; stopped by its own pid.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const NGINX_PATH = process.env.HANGAR_NGINX_PATH ?? "/usr/sbin/nginx";

/** One `server` block: a TLS port proxying to `upstream`, adding `setHeaders` (a value replaces what the client sent). */
export interface NginxSite {
  upstream: string;
  setHeaders?: Record<string, string>;
}

export interface Nginx {
  /** The host name its certificate is for (a browser maps it to 127.0.0.1). */
  hostName: string;
  /** The certificate (PEM), to trust it. */
  certificate: string;
  /** https://HOSTNAME:PORT of each site, in order. */
  urls: string[];
  ports: number[];
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A header value inside nginx's double quotes. */
function quoted(value: string): string {
  if (/["\\$\r\n]/.test(value)) throw new Error(`header value not supported in the nginx test config: ${value}`);
  return `"${value}"`;
}

export async function startNginx(sites: NginxSite[], hostName = "hangar.test"): Promise<Nginx> {
  if (!existsSync(NGINX_PATH)) throw new Error(`nginx not found at ${NGINX_PATH}: install it: apt-get install -y nginx (or set HANGAR_NGINX_PATH)`);
  const dir = mkdtempSync(join(tmpdir(), "hangar-nginx-"));
  mkdirSync(join(dir, "tmp"));
  const cert = join(dir, "cert.pem");
  const key = join(dir, "key.pem");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-keyout",
      key,
      "-out",
      cert,
      "-subj",
      `/CN=${hostName}`,
      "-addext",
      `subjectAltName=DNS:${hostName}`,
    ],
    { stdio: "ignore" },
  );
  const ports = await Promise.all(sites.map(() => freePort()));
  const servers = sites.map((site, i) => {
    const upstream = new URL(site.upstream);
    const extra = Object.entries(site.setHeaders ?? {})
      .map(([name, value]) => `      proxy_set_header ${name} ${quoted(value)};`)
      .join("\n");
    return `
  server {
    listen 127.0.0.1:${ports[i]} ssl;
    server_name ${hostName};
    ssl_certificate ${cert};
    ssl_certificate_key ${key};
    location / {
      proxy_pass http://${upstream.host};
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_set_header X-Forwarded-Proto https;
${extra}
    }
  }`;
  });
  // Root's nginx would hand its workers to `nobody`, who cannot read this prefix.
  const user = process.getuid?.() === 0 ? "user root;" : "";
  const config = `${user}
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 128; }
http {
  access_log off;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
${servers.join("\n")}
}
`;
  writeFileSync(join(dir, "nginx.conf"), config);
  const proc: ChildProcess = spawn(NGINX_PATH, ["-p", dir, "-c", join(dir, "nginx.conf"), "-e", join(dir, "error.log"), "-g", "daemon off;"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  proc.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  const certificate = readFileSync(cert, "utf8");
  const urls = ports.map((port) => `https://${hostName}:${port}`);
  // Ready when every port answers TLS.
  const deadline = Date.now() + 10_000;
  for (const port of ports) {
    for (;;) {
      if (proc.exitCode !== null)
        throw new Error(`nginx exited: ${stderr}\n${existsSync(join(dir, "error.log")) ? readFileSync(join(dir, "error.log"), "utf8") : ""}`);
      const ok = await new Promise<boolean>((resolve) => {
        const req = httpsRequest({ host: "127.0.0.1", port, servername: hostName, ca: certificate, path: "/healthz", method: "HEAD" }, (res) => {
          res.resume();
          resolve(true);
        });
        req.on("error", () => resolve(false));
        req.end();
      });
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`nginx did not answer on ${port}: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    hostName,
    certificate,
    urls,
    ports,
    close: async () => {
      if (proc.exitCode === null) {
        proc.kill("SIGTERM");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A JSON request to one of nginx's sites over real TLS, checking its certificate for the host name. */
export function httpsJson(
  nginx: Nginx,
  port: number,
  method: string,
  path: string,
  options: { body?: unknown; token?: string; headers?: Record<string, string> } = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- test assertions read arbitrary JSON shapes
): Promise<{ status: number; body: any }> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  const headers: Record<string, string> = { host: `${nginx.hostName}:${port}`, ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (payload !== undefined) headers["content-type"] = "application/json";
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: "127.0.0.1", port, servername: nginx.hostName, ca: nginx.certificate, method, path, headers }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => {
        let body: unknown = text;
        try {
          body = text ? JSON.parse(text) : null;
        } catch {
          // not JSON: kept as text
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on("error", reject);
    req.end(payload);
  });
}
