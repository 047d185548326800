import { describe, expect, it } from "vitest";
import {
  checkResolved,
  checkUrlWithoutDns,
  DestinationNotAllowedError,
  EMPTY_ALLOW_LIST,
  parseOutboundAllow,
} from "../../src/domain/common/outbound.ts";
import { addressCategory, parseIpLiteral } from "../../src/domain/common/addresses.ts";

const refused = (url: string, allow = EMPTY_ALLOW_LIST): DestinationNotAllowedError => {
  try {
    checkUrlWithoutDns(url, allow);
  } catch (err) {
    if (err instanceof DestinationNotAllowedError) return err;
    throw err;
  }
  throw new Error(`${url} was not refused`);
};

describe("outbound guard: address classes", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["::1", "loopback"],
    ["::ffff:127.0.0.1", "loopback"],
    ["169.254.169.254", "link-local"],
    ["fe80::1", "link-local"],
    ["10.0.0.1", "private"],
    ["172.16.5.4", "private"],
    ["192.168.1.1", "private"],
    ["fc00::1", "private"],
    ["fd12:3456::1", "private"],
    ["::ffff:10.1.2.3", "private"],
    ["100.64.0.1", "shared address space"],
    ["0.0.0.0", "unspecified"],
    ["::", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["ff02::1", "multicast"],
    ["255.255.255.255", "broadcast"],
  ])("refuses %s (%s)", (ip, category) => {
    expect(addressCategory(ip)).toBe(category);
  });

  it("lets public unicast addresses through", () => {
    for (const ip of ["1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) expect([ip, addressCategory(ip)]).toEqual([ip, null]);
  });
});

describe("outbound guard: IP literals in every spelling", () => {
  it.each([
    "http://127.0.0.1/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0x7f.1/",
    "http://0177.0.0.1/",
    "http://017700000001/",
    "http://127.1/",
    "http://127.0.1/",
    "http://127.0.0.1./",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[0:0:0:0:0:ffff:7f00:1]/",
    "http://[0000::1]:8080/",
    "https://localhost/",
    "https://LOCALHOST./",
    "https://api.localhost/",
    "http://0/",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://0xa9fea9fe/",
    "http://10.1/",
    "http://3232235777/",
    "http://[fd00::1]/",
    "http://[fe80::1%25eth0]/",
  ])("refuses %s with the destination named and how to allow it", (url) => {
    const err = refused(url);
    expect(err.message).toMatch(/HANGAR_OUTBOUND_ALLOW/);
    expect(err.message).toMatch(/not allowed/);
  });

  it("normalises literals to the address they reach", () => {
    expect(parseIpLiteral("2130706433")?.toString()).toBe("127.0.0.1");
    expect(parseIpLiteral("0x7f.1")?.toString()).toBe("127.0.0.1");
    expect(parseIpLiteral("[::ffff:7f00:1]")?.toString()).toBe("::ffff:7f00:1");
    expect(parseIpLiteral("example.com")).toBeNull();
    expect(refused("http://2130706433/").message).toContain("add 127.0.0.1/32 to HANGAR_OUTBOUND_ALLOW");
  });

  it("refuses schemes other than http(s)", () => {
    for (const url of ["file:///etc/passwd", "ftp://example.com/", "gopher://example.com/", "data:text/plain,x"]) refused(url);
  });

  it("leaves names to the connect-time check and passes public literals", () => {
    expect(checkUrlWithoutDns("https://example.com/x", EMPTY_ALLOW_LIST)).toEqual({ literal: false, listed: false });
    expect(checkUrlWithoutDns("https://1.1.1.1/x", EMPTY_ALLOW_LIST)).toEqual({ literal: true, listed: false });
  });
});

describe("HANGAR_OUTBOUND_ALLOW", () => {
  it("allows listed ranges, IPv4-mapped forms included, and marks them listed", () => {
    const allow = parseOutboundAllow(" 127.0.0.1/32 , 10.0.0.0/8,fd00::/8");
    expect(checkUrlWithoutDns("http://127.0.0.1:9000/", allow)).toEqual({ literal: true, listed: true });
    expect(checkUrlWithoutDns("http://[::ffff:127.0.0.1]/", allow)).toEqual({ literal: true, listed: true });
    expect(checkUrlWithoutDns("http://10.200.1.1/", allow).listed).toBe(true);
    expect(checkUrlWithoutDns("http://[fd00::5]/", allow).listed).toBe(true);
    expect(checkUrlWithoutDns("http://localhost:1234/", allow).listed).toBe(true);
    refused("http://127.0.0.2/", allow);
    refused("http://192.168.0.1/", allow);
  });

  it("rejects a malformed entry", () => {
    expect(() => parseOutboundAllow("127.0.0.1/33")).toThrow(/HANGAR_OUTBOUND_ALLOW entry/);
    expect(() => parseOutboundAllow("not-a-cidr")).toThrow(/HANGAR_OUTBOUND_ALLOW entry/);
    expect(parseOutboundAllow("").cidrs).toEqual([]);
  });
});

describe("resolved addresses", () => {
  it("keeps only allowed addresses of a mixed answer, and refuses a name with none", () => {
    expect(checkResolved("rebind.example", ["93.184.216.34", "127.0.0.1"], EMPTY_ALLOW_LIST)).toEqual({ usable: ["93.184.216.34"], listed: false });
    expect(() => checkResolved("rebind.example", ["127.0.0.1", "::1"], EMPTY_ALLOW_LIST)).toThrow(/rebind\.example \(127\.0\.0\.1\).*loopback/);
  });
});
