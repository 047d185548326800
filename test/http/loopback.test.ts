import { describe, expect, it } from "vitest";
import { isLoopbackAddress, isLoopbackHost } from "../../src/domain/common/addresses.ts";
import { isLoopbackRequest } from "../../src/http/middleware/loopback.ts";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup } from "../helpers/factories.ts";

// docs/api.md §3's whole list, the prefixes with a few members, and the underscore spellings.
const FORWARDING = [
  "Forwarded",
  "Via",
  "X-Real-IP",
  "X-Client-IP",
  "X-Cluster-Client-IP",
  "CF-Connecting-IP",
  "True-Client-IP",
  "Fastly-Client-IP",
  "X-Forwarded-For",
  "X-Forwarded-Host",
  "X-Forwarded-Proto",
  "X-Forwarded-Port",
  "X-Forwarded-Server",
  "X-Forwarded-Anything",
  "X-Original-Forwarded-For",
  "X-Original-Forwarded-Host",
  "X_Forwarded_For",
  "X_Real_IP",
  "x_forwarded_host",
  "True_Client_IP",
];

describe("isLoopbackAddress", () => {
  it.each(["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "::FFFF:127.10.0.1"])(
    "accepts the peer %s",
    (address) => expect(isLoopbackAddress(address)).toBe(true),
  );

  it.each([
    undefined,
    "",
    "10.0.0.1",
    "128.0.0.1",
    "126.255.255.255",
    "192.168.1.10",
    "::2",
    "fe80::1",
    "::ffff:10.0.0.1",
    "::ffff:128.0.0.1",
    "localhost",
    "127.0.0.1.evil.com",
    "1127.0.0.1",
    "0.0.0.0",
    "::",
  ])("refuses the peer %s", (address) => expect(isLoopbackAddress(address)).toBe(false));
});

describe("isLoopbackHost", () => {
  it.each(["localhost", "LOCALHOST", "localhost:8080", "127.0.0.1", "127.0.0.1:80", "127.3.2.1:65535", "[::1]", "[::1]:8080"])(
    "accepts the Host %s",
    (host) => expect(isLoopbackHost(host)).toBe(true),
  );

  it.each([
    undefined,
    "",
    "hangar.example.com",
    "localhost.evil.com",
    "evil-localhost",
    "127.0.0.1.nip.io",
    "0.0.0.0:8080",
    "192.168.1.10:8080",
    "[::2]",
    "[::1]x",
    "[::1",
    "::1",
    "localhost:abc",
    "localhost:80:80",
    "[fe80::1]:80",
  ])("refuses the Host %s", (host) => expect(isLoopbackHost(host)).toBe(false));
});

describe("isLoopbackRequest", () => {
  it("needs a loopback peer, no forwarding header and a loopback Host", () => {
    expect(isLoopbackRequest("127.0.0.1", new Headers({ host: "127.0.0.1:8080" }), "ignored")).toBe(true);
    expect(isLoopbackRequest("::1", new Headers(), "localhost:8080")).toBe(true);
    expect(isLoopbackRequest("10.1.1.1", new Headers({ host: "localhost" }), "localhost")).toBe(false);
    expect(isLoopbackRequest(undefined, new Headers({ host: "localhost" }), "localhost")).toBe(false);
    expect(isLoopbackRequest("127.0.0.1", new Headers({ host: "hangar.example.com" }), "localhost")).toBe(false);
    // The Host header wins over the URL: a rebinding page's request names the attacker's host there.
    expect(isLoopbackRequest("127.0.0.1", new Headers({ host: "attacker.test:8080" }), "127.0.0.1:8080")).toBe(false);
  });

  it.each(FORWARDING)("is refused with a %s header, whatever its value", (name) => {
    for (const value of ["127.0.0.1", "for=127.0.0.1", ""]) {
      expect(isLoopbackRequest("127.0.0.1", new Headers({ host: "localhost", [name]: value }), "localhost")).toBe(false);
    }
  });
});

describe("local login through the app", () => {
  async function ready() {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    return t;
  }

  it("works from a loopback peer with a loopback Host", async () => {
    const t = await ready();
    for (const [peer, host] of [
      ["127.0.0.1", undefined],
      ["::1", "[::1]:8080"],
      ["::ffff:127.0.0.1", "localhost:8080"],
      ["127.0.0.5", "127.0.0.1:9"],
    ]) {
      const res = await t.call("POST", "/v1/auth/local/login", { body: {}, peer, headers: host ? { host } : {} });
      expect(res.status, `${peer} ${host}`).toBe(200);
    }
  });

  it.each(FORWARDING)("answers 403 local_login_loopback_required with %s", async (name) => {
    const t = await ready();
    const res = await t.call("POST", "/v1/auth/local/login", { body: {}, headers: { [name]: "127.0.0.1" } });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe("local_login_loopback_required");
  });

  it("answers 403 local_login_loopback_required for a non-loopback Host (DNS rebinding, local reverse proxy)", async () => {
    const t = await ready();
    for (const host of ["hangar.example.com", "attacker.test:8080", "192.168.1.10:8080", "0.0.0.0:8080"]) {
      const res = await t.call("POST", "/v1/auth/local/login", { body: {}, headers: { host } });
      expect(res.status, host).toBe(403);
      expect(res.body.code).toBe("local_login_loopback_required");
    }
  });

  it("answers 403 local_login_loopback_required for a non-loopback peer, or none (Workers)", async () => {
    const t = await ready();
    for (const peer of ["192.168.1.10", "10.0.0.1", "::ffff:10.0.0.1", "fe80::1", ""]) {
      const res = await t.call("POST", "/v1/auth/local/login", { body: {}, peer });
      expect(res.status, peer).toBe(403);
      expect(res.body.code).toBe("local_login_loopback_required");
    }
  });
});
