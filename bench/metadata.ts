// bench:metadata — app metadata extraction (what complete does for an .ipa/.apk: zip directory, Info.plist,
// provisioning profile, CgBI icon; AndroidManifest.xml, resources.arsc, launcher icon) on a 200 MiB IPA and a
// 100 MiB APK that are mostly incompressible filler, beside reading the same file once from disk (the limit:
// a reader that looked at every byte could not be faster). Each measurement runs in a fresh child process so
// its peak RSS is its own. The files sit in the page cache for both (the same footing).
import { execFileSync } from "node:child_process";
import { createReadStream, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const MiB = 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

interface ChildResult {
  ms: number[];
  baselineRssMiB: number;
  peakRssMiB: number;
  summary?: unknown;
}

async function child(mode: string, file: string, platform: string): Promise<void> {
  const baselineRssMiB = process.memoryUsage().rss / MiB;
  const ms: number[] = [];
  let summary: unknown;
  if (mode === "extract") {
    const { extractAppMetadata } = await import("../src/domain/artifacts/app-metadata.ts");
    const size = statSync(file).size;
    const handle = await open(file, "r");
    // The same ranged read the local store does (src/storage/local-disk.ts readRange).
    let bytesRead = 0;
    const read = async (range: { start: number; end: number }) => {
      bytesRead += range.end - range.start + 1;
      const out = new Uint8Array(range.end - range.start + 1);
      let filled = 0;
      while (filled < out.length) {
        const { bytesRead } = await handle.read(out, filled, out.length - filled, range.start + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return out.subarray(0, filled);
    };
    for (let i = 0; i < ROUNDS; i++) {
      bytesRead = 0;
      const started = performance.now();
      const result = await extractAppMetadata(read, size, platform as "ios" | "android");
      ms.push(performance.now() - started);
      if (!result) throw new Error("no metadata extracted");
      summary = { ...result.app, icon_bytes: result.icon?.length ?? 0, bytes_read: bytesRead };
    }
    await handle.close();
  } else {
    for (let i = 0; i < ROUNDS; i++) {
      const started = performance.now();
      let total = 0;
      for await (const chunk of createReadStream(file, { highWaterMark: MiB })) total += (chunk as Buffer).length;
      ms.push(performance.now() - started);
      summary = { bytes: total };
    }
  }
  // VmHWM, not getrusage's maxRSS: Linux carries maxRSS over from the parent that forked this process.
  const peakRssMiB = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"))?.[1]) / 1024;
  const out: ChildResult = { ms, baselineRssMiB, peakRssMiB, summary };
  process.stdout.write(JSON.stringify(out));
}

function run(mode: string, file: string, platform: string): ChildResult {
  const self = fileURLToPath(import.meta.url);
  const out = execFileSync(process.execPath, ["--import", "tsx", self, "--child", mode, file, platform], { maxBuffer: 16 * MiB });
  return JSON.parse(out.toString()) as ChildResult;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  const { DEMO_INFO, encodeCgbi, encodePng, makeApk, makeIpaArchive, makeProfile, samplePixels } = await import("../test/helpers/app-fixtures.ts");
  const dir = mkdtempSync(join(tmpdir(), "hangar-bench-metadata-"));
  try {
    const ipaPath = join(dir, "big.ipa");
    const apkPath = join(dir, "big.apk");
    writeFileSync(
      ipaPath,
      makeIpaArchive({
        info: DEMO_INFO,
        profile: makeProfile({ kind: "ad_hoc", devices: 100 }),
        icons: {
          "AppIcon60x60@3x.png": encodeCgbi(180, 180, samplePixels(180, 180)),
          "AppIcon60x60@2x.png": encodeCgbi(120, 120, samplePixels(120, 120)),
        },
        fillerBytes: 200 * MiB,
      }),
    );
    writeFileSync(
      apkPath,
      makeApk({
        icons: [
          { density: 640, png: encodePng(192, 192, samplePixels(192, 192)) },
          { density: 480, png: encodePng(144, 144, samplePixels(144, 144)) },
        ],
        fillerBytes: 100 * MiB,
      }),
    );
    console.log(
      `bench:metadata — ${ROUNDS} rounds each, median; load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")} on this machine`,
    );
    const rows: string[] = [];
    for (const [label, file, platform] of [
      ["IPA", ipaPath, "ios"],
      ["APK", apkPath, "android"],
    ] as const) {
      const size = statSync(file).size;
      const extract = run("extract", file, platform);
      const read = run("read", file, platform);
      const e = median(extract.ms);
      const r = median(read.ms);
      console.log(`${label} ${(size / MiB).toFixed(0)} MiB: ${JSON.stringify(extract.summary)}`);
      console.log(
        `  extract ${e.toFixed(1)} ms, peak RSS ${extract.peakRssMiB.toFixed(0)} MiB (+${(extract.peakRssMiB - extract.baselineRssMiB).toFixed(0)} over the process at start)`,
      );
      console.log(`  read once ${r.toFixed(1)} ms (${(size / MiB / (r / 1000)).toFixed(0)} MiB/s), peak RSS ${read.peakRssMiB.toFixed(0)} MiB`);
      console.log(
        `  ratio: extraction takes ${((e / r) * 100).toFixed(2)}% of one full read; extra memory ${(((extract.peakRssMiB - extract.baselineRssMiB) / (size / MiB)) * 100).toFixed(1)}% of the file size`,
      );
      rows.push(
        `| ${label} | ${(size / MiB).toFixed(0)} MiB | ${e.toFixed(1)} ms | ${r.toFixed(1)} ms | ${((e / r) * 100).toFixed(2)}% | ${extract.peakRssMiB.toFixed(0)} MiB (+${(extract.peakRssMiB - extract.baselineRssMiB).toFixed(0)}) | ${read.peakRssMiB.toFixed(0)} MiB |`,
      );
    }
    console.log(
      "\n| archive | size | extract (median) | read once (median) | ratio | extract peak RSS (over start) | read peak RSS |\n|---|---|---|---|---|---|---|",
    );
    for (const row of rows) console.log(row);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "--child") {
  await child(process.argv[3]!, process.argv[4]!, process.argv[5]!);
} else {
  await main();
}
