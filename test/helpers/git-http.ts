import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, basename } from "node:path";

/**
 * A real smart-HTTP git server on 127.0.0.1 that demands Basic auth: Node's http server in front of
 * `git http-backend` (CGI). Proves that source credentials reach git, and records every Authorization header.
 */
export async function startGitHttpServer(repoPath: string, auth: { username: string; password: string }) {
  const expected = `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString("base64")}`;
  const seen: string[] = [];
  const server: Server = createServer((req, res) => {
    seen.push(req.headers.authorization ?? "");
    if (req.headers.authorization !== expected) {
      res.writeHead(401, { "WWW-Authenticate": 'Basic realm="git"' }).end();
      return;
    }
    relayToGitHttpBackend(req, res, repoPath, auth.username);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/repo`,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Serves one request with `git http-backend` (CGI) for the repository at `repoPath`, exposed as `/repo`. */
export function relayToGitHttpBackend(req: IncomingMessage, res: ServerResponse, repoPath: string, remoteUser?: string): void {
  const url = new URL(req.url ?? "/", "http://localhost");
  const cgi = spawn("git", ["http-backend"], {
    env: {
      PATH: process.env.PATH,
      GIT_PROJECT_ROOT: dirname(repoPath),
      GIT_HTTP_EXPORT_ALL: "1",
      GIT_PROTOCOL: String(req.headers["git-protocol"] ?? ""),
      REQUEST_METHOD: req.method ?? "GET",
      PATH_INFO: url.pathname.replace(/^\/repo/, `/${basename(repoPath)}`),
      QUERY_STRING: url.search.slice(1),
      CONTENT_TYPE: req.headers["content-type"] ?? "",
      ...(remoteUser === undefined ? {} : { REMOTE_USER: remoteUser }),
    },
  });
  req.pipe(cgi.stdin);
  // CGI answers with headers (a Status line among them), a blank line, then the body.
  let buffered = Buffer.alloc(0);
  let headersDone = false;
  cgi.stdout.on("data", (d: Buffer) => {
    if (headersDone) return void res.write(d);
    buffered = Buffer.concat([buffered, d]);
    const end = buffered.indexOf("\r\n\r\n");
    if (end < 0) return;
    headersDone = true;
    let status = 200;
    for (const line of buffered.subarray(0, end).toString().split("\r\n")) {
      const [k, ...v] = line.split(":");
      if (!k) continue;
      if (k.toLowerCase() === "status") status = Number.parseInt(v.join(":").trim(), 10);
      else res.setHeader(k, v.join(":").trim());
    }
    res.writeHead(status);
    res.write(buffered.subarray(end + 4));
  });
  cgi.stdout.on("end", () => res.end());
}
