import { describe, expect, it } from "vitest";
import { isTrustedPeer } from "../../src/domain/auth/trusted-proxy.ts";
import { parseCidr } from "../../src/domain/common/addresses.ts";

describe("isTrustedPeer", () => {
  it.each([
    ["10.1.2.3", ["10.0.0.0/8"], true],
    ["11.0.0.1", ["10.0.0.0/8"], false],
    ["::ffff:10.1.2.3", ["10.0.0.0/8"], true],
    ["::FFFF:10.1.2.3", ["10.0.0.0/8"], true],
    ["10.1.2.3", ["::ffff:10.0.0.0/104"], true],
    ["::ffff:10.1.2.3", ["::ffff:10.0.0.0/104"], true],
    ["10.1.2.3", ["::ffff:11.0.0.0/104"], false],
    ["fd7a:115c:a1e0::1", ["fd7a:115c:a1e0::/48"], true],
    ["fd7a:115c:a1e1::1", ["fd7a:115c:a1e0::/48"], false],
    ["fe80::1%eth0", ["fe80::/10"], true],
    ["10.1.2.3", ["::/0"], false],
    ["2001:db8::1", ["0.0.0.0/0"], false],
    ["192.0.2.7", ["192.0.2.7"], true],
    ["192.0.2.8", ["192.0.2.7/32"], false],
    ["100.100.1.1", ["10.0.0.0/8", "100.64.0.0/10"], true],
    // An empty list trusts loopback peers only.
    ["127.0.0.1", [], true],
    ["127.9.9.9", [], true],
    ["::1", [], true],
    ["::ffff:127.0.0.1", [], true],
    ["10.0.0.1", [], false],
    ["::2", [], false],
    // A non-empty list does not add loopback implicitly.
    ["127.0.0.1", ["10.0.0.0/8"], false],
    [undefined, [], false],
    ["not-an-ip", ["0.0.0.0/0"], false],
  ] as const)("peer %s against %j → %s", (peer, cidrs, expected) => {
    expect(isTrustedPeer(peer, cidrs)).toBe(expected);
  });
});

describe("parseCidr", () => {
  it("canonicalizes valid CIDRs and bare addresses", () => {
    expect(parseCidr("10.0.0.0/8")).toMatchObject({ canonical: "10.0.0.0/8" });
    expect(parseCidr(" FD00:0:0::/8 ")).toMatchObject({ canonical: "fd00::/8" });
    expect(parseCidr("192.0.2.1")).toMatchObject({ canonical: "192.0.2.1/32" });
    expect(parseCidr("::1")).toMatchObject({ canonical: "::1/128" });
  });

  it.each(["10.0.0.0/33", "10.0.0.1/8", "10/8", "010.0.0.0/8", "fd00::1/8", "fe80::1%eth0/64", "", "10.0.0.0/-1", "::/129"])("refuses %j", (text) => {
    expect(parseCidr(text)).toHaveProperty("error");
  });
});
