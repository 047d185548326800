import { describe, expect, it } from "vitest";
import { sha256Hex, sha256HexJs } from "../../src/domain/common/crypto.ts";

describe("sha256Hex", () => {
  it("gives the SHA-256 test vectors, and the same digest natively (Node) as the JS hash Workers use", async () => {
    // FIPS 180-2 vectors: "abc" and the empty string.
    expect(await sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(sha256HexJs("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    // Node hands out its crypto module here, so sha256Hex takes the native path.
    expect(typeof (process as { getBuiltinModule?: unknown }).getBuiltinModule).toBe("function");
    const inputs = ["", "hgu_" + "A".repeat(43), "päßwörd \u202e ✓", new Uint8Array([0, 255, 1, 254]), "x".repeat(10_000)];
    for (const input of inputs) expect(await sha256Hex(input)).toBe(sha256HexJs(input));
  });
});
