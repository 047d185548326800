// Stands in for @neon-rs/load inside dist/hangar.cjs (scripts/build.mjs bundles the `libsql` driver's JavaScript;
// its native binary stays in node_modules/@libsql/<target>). The package's currentTarget() tells glibc from musl
// with process.report.getReport(), about 6 ms of every daemon start (docs/benchmarks.md, "Performance"); detect-libc, which `libsql`
// asks the same question right after, reads /usr/bin/ldd instead and falls back to that same report. The targets
// are @neon-rs/load 0.0.4's.
"use strict";
const { existsSync } = require("node:fs");
const { join } = require("node:path");
const { familySync, GLIBC } = require("detect-libc");

function currentTarget() {
  const { platform, arch } = process;
  const targets = {
    android: { arm: "android-arm-eabi", arm64: "android-arm64" },
    win32: { x64: "win32-x64-msvc", arm64: "win32-arm64-msvc", ia32: "win32-ia32-msvc" },
    darwin: { x64: "darwin-x64", arm64: "darwin-arm64" },
    freebsd: { x64: "freebsd-x64" },
  };
  if (platform === "linux") {
    if (arch === "x64" || arch === "arm64") return `linux-${arch}-${familySync() === GLIBC ? "gnu" : "musl"}`;
    if (arch === "arm") return "linux-arm-gnueabihf";
    throw new Error(`Neon: unsupported Linux architecture: ${arch}`);
  }
  const target = targets[platform]?.[arch];
  if (target) return target;
  throw new Error(targets[platform] ? `Neon: unsupported ${platform} architecture: ${arch}` : `Neon: unsupported system: ${platform}`);
}

function load(dirname) {
  const m = join(dirname, "index.node");
  return existsSync(m) ? require(m) : null;
}

module.exports = { currentTarget, load };
