// POST /v1/hooks/{id} looks the id up before it reads the body (docs/decisions.md "Webhook deliveries: the id first,
// the payload once"): against the real daemon on a real socket, an unknown id is answered 404 while the body is
// still being sent, so no one can make the daemon buffer 25 MiB for a webhook that does not exist.
import { connect, type Socket } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { makeDataDir, startDaemon, type Daemon } from "../helpers/daemon.ts";
import { removeDir } from "./runner-harness.ts";

let daemon: Daemon | undefined;
const dataDir = makeDataDir();

afterAll(async () => {
  await daemon?.stop();
  removeDir(dataDir);
});

/** Everything the daemon sends on `socket` until `until` matches it or `ms` pass. */
function readUntil(socket: Socket, until: RegExp, ms: number): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    const done = () => {
      clearTimeout(timer);
      socket.off("data", onData);
      resolve(text);
    };
    const onData = (d: Buffer) => {
      text += d.toString("latin1");
      if (until.test(text)) done();
    };
    const timer = setTimeout(done, ms);
    socket.on("data", onData);
    socket.once("close", done);
  });
}

describe("an unknown webhook id (real daemon, real socket)", { timeout: 60_000 }, () => {
  it("is answered 404 not_found while the 25 MiB body is still being sent", async () => {
    daemon = await startDaemon({ HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" });
    const socket = connect(daemon.port, "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", resolve));
    socket.on("error", () => undefined);
    const size = 25 * 1024 * 1024;
    socket.write(
      `POST /v1/hooks/00000000-0000-0000-0000-000000000000 HTTP/1.1\r\nHost: 127.0.0.1:${daemon.port}\r\n` +
        `Content-Type: application/json\r\nX-GitHub-Event: push\r\nContent-Length: ${size}\r\n\r\n`,
    );
    // 64 KiB of the 25 MiB, then nothing more: the answer must not wait for the rest.
    socket.write(Buffer.alloc(64 * 1024, 0x20));
    const answer = await readUntil(socket, /"code":"not_found"/, 10_000);
    expect(answer).toMatch(/^HTTP\/1\.1 404 /);
    expect(answer).toContain('"code":"not_found"');
    socket.destroy();

    // A known route still reads its body as before (the same daemon answers a health check).
    const health = await fetch(`${daemon.url}/healthz`);
    expect(health.status).toBe(200);
  });
});
