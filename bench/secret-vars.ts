// `npm run bench:secret-vars`: what a project's secret variables cost the daemon on every log chunk its builds send
// (src/domain/logs/logs.ts appendLog: the secrets to mask, then one masking pass). Two sets: 400 variables of 64 KiB
// (what the API accepted before the caps, 25 MiB) and 100 of 10 KiB (about the caps: 100 variables, 1 MiB in all).
// For each: sealing them all, then per chunk the set-up as it was (open every sealed value, key the matcher cache by
// their text: JSON.stringify and a Map lookup) and as it is (a query of the sealed values' IVs, the same lookup), and
// the first chunk's automaton build. The old per-chunk set-up is re-enacted here with the same calls it made.
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { loadConfig } from "../src/config.ts";
import { projects, projectSecrets } from "../src/db/schema/index.ts";
import { getProject, projectLogSecrets, projectLogSecretsFingerprint } from "../src/domain/projects/projects.ts";
import { matcherFor, SecretMatcher } from "../src/domain/logs/log-mask.ts";
import { createNodeDeps } from "../src/runtime/node-deps.ts";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const f = (n: number) => n.toFixed(1);

async function time(fn: () => Promise<unknown>, rounds = ROUNDS): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < rounds; i++) await fn();
  return (performance.now() - started) / rounds;
}

const dataDir = mkdtempSync(join(tmpdir(), "hangar-bench-secrets-"));
const { deps, close } = await createNodeDeps(loadConfig({ HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" }), { log: () => {} });
console.log(`bench:secret-vars — ${ROUNDS} rounds per chunk figure; ${cpus().length} cores, load ${loadavg()[0]!.toFixed(2)}`);
console.log("set                seal all ms  first build ms  per chunk before ms  per chunk now ms");
try {
  for (const [count, size] of [
    [400, 64 * 1024],
    [100, 10 * 1024],
  ] as const) {
    const id = `bench-${count}-${size}`;
    await deps.db.insert(projects).values({ id, name: id, repoUrl: "https://example.com/r.git", defaultBranch: "main", createdAt: 0, updatedAt: 0 });
    const values = Array.from({ length: count }, () => randomBytes(size / 2).toString("hex"));
    const s0 = performance.now();
    const sealed = await Promise.all(values.map((v) => deps.secrets.seal(v)));
    const sealMs = performance.now() - s0;
    for (let i = 0; i < count; i += 50) {
      await deps.db
        .insert(projectSecrets)
        .values(sealed.slice(i, i + 50).map((valueSealed, j) => ({ projectId: id, name: `VAR_${i + j}`, valueSealed, createdAt: 0, updatedAt: 0 })));
    }
    const project = await getProject(deps, id);

    const b0 = performance.now();
    const secrets = await projectLogSecrets(deps, project);
    const encoder = new TextEncoder();
    new SecretMatcher(secrets.map((s) => encoder.encode(s)));
    const buildMs = performance.now() - b0;

    // Before: every chunk opened every secret and looked the matcher up by their JSON text.
    const oldCache = new Map<string, true>([[JSON.stringify(secrets), true]]);
    const beforeMs = await time(async () => {
      const opened = await projectLogSecrets(deps, project);
      if (!oldCache.has(JSON.stringify(opened))) throw new Error("cache miss");
    });
    // Now: the IVs name the set; the first call builds (timed above), later ones hit.
    await matcherFor(await projectLogSecretsFingerprint(deps, project), () => projectLogSecrets(deps, project));
    const nowMs = await time(async () => {
      await matcherFor(await projectLogSecretsFingerprint(deps, project), () => Promise.reject(new Error("cache miss")));
    }, ROUNDS * 20);
    console.log(
      `${`${count} × ${size / 1024} KiB`.padEnd(18)} ${f(sealMs).padStart(11)}  ${f(buildMs).padStart(14)}  ${f(beforeMs).padStart(19)}  ${f(nowMs).padStart(16)}`,
    );
  }
} finally {
  close();
  rmSync(dataDir, { recursive: true, force: true });
}
