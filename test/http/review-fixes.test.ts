// Regression tests for review findings: each one failed (or hung) before its fix.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseBinaryPlist } from "../../src/domain/ipa-metadata.ts";
import { makeTestApp } from "../helpers/app.ts";
import { artifactWorld, uploadArtifact } from "../helpers/artifact-world.ts";

// ---------------------------------------------------------------------------------------------------------
// 1. Binary plist: shared references must not cost 2^depth.

/**
 * A bplist00 written byte by byte: a top dict with a bundle id and a version, plus "junk" → a chain of `depth`
 * arrays where each array holds the next one twice. Decoding it as a tree visits 2^depth leaves.
 */
function exponentialPlist(depth: number, cycle = false): Uint8Array {
  const ascii = (s: string): number[] => {
    const head = s.length < 15 ? [0x50 | s.length] : [0x5f, 0x10, s.length];
    return [...head, ...Array.from(s, (c) => c.charCodeAt(0))];
  };
  const firstArray = 6;
  const leaf = firstArray + depth;
  const objects: number[][] = [
    [0xd3, 1, 2, 3, 4, 5, firstArray],
    ascii("CFBundleIdentifier"),
    ascii("CFBundleShortVersionString"),
    ascii("junk"),
    ascii("com.example.bomb"),
    ascii("1.0"),
  ];
  for (let i = 0; i < depth; i++) {
    const next = cycle && i === depth - 1 ? firstArray : firstArray + i + 1;
    objects.push([0xa2, next, next]);
  }
  objects.push(ascii("x"));
  if (objects.length !== leaf + 1 || objects.length > 255) throw new Error("test plist layout");
  const out: number[] = [...Array.from("bplist00", (c) => c.charCodeAt(0))];
  const offsets: number[] = [];
  for (const o of objects) {
    offsets.push(out.length);
    out.push(...o);
  }
  const tableOffset = out.length;
  for (const off of offsets) out.push(off >> 8, off & 0xff);
  const u64 = (n: number) => [0, 0, 0, 0, 0, 0, (n >> 8) & 0xff, n & 0xff];
  out.push(0, 0, 0, 0, 0, 0, 2, 1, ...u64(objects.length), ...u64(0), ...u64(tableOffset));
  return Uint8Array.from(out);
}

/** An IPA (python3 zipfile) whose Info.plist holds exactly `plist`. */
function ipaWithRawPlist(plist: Uint8Array): Uint8Array {
  const dir = mkdtempSync(join(tmpdir(), "hangar-ipa-raw-"));
  try {
    writeFileSync(join(dir, "Info.plist"), plist);
    const script = `
import sys, zipfile
with zipfile.ZipFile(sys.argv[2], "w") as z:
    z.write(sys.argv[1], "Payload/Bomb.app/Info.plist", compress_type=zipfile.ZIP_DEFLATED)
`;
    execFileSync("python3", ["-c", script, join(dir, "Info.plist"), join(dir, "bomb.ipa")]);
    return new Uint8Array(readFileSync(join(dir, "bomb.ipa")));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("binary plist with shared references", () => {
  it("decodes a 2^22-leaf reference chain in well under a second", () => {
    const started = performance.now();
    const parsed = parseBinaryPlist(exponentialPlist(22)) as Record<string, unknown>;
    expect(performance.now() - started).toBeLessThan(1000);
    expect(parsed.CFBundleIdentifier).toBe("com.example.bomb");
  });

  it("refuses a reference cycle", () => {
    expect(() => parseBinaryPlist(exponentialPlist(3, true))).toThrow(/cycle/);
  });

  it("complete answers at once for an IPA whose Info.plist is a 2^60 reference chain", async () => {
    const t = await makeTestApp();
    const w = await artifactWorld(t);
    const ipa = ipaWithRawPlist(exponentialPlist(60));
    const started = performance.now();
    const artifact = await uploadArtifact(t, w, "Bomb.ipa", ipa);
    expect(performance.now() - started).toBeLessThan(1000);
    expect(artifact.status).toBe("available");
    expect(artifact.install_metadata).toEqual({ bundle_identifier: "com.example.bomb", bundle_version: "1.0", title: "com.example.bomb" });
  });
});
