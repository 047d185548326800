import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Every temporary file of a test run goes under one directory made here and removed when the run ends: the test
 * apps' data directories, the daemons' and runners' work directories, git repositories, signing keychains,
 * browser profiles. `TMPDIR` is set before the test workers start, so they, and every process they spawn, make
 * their temporary files inside it. The run's own cleanup does not depend on each test's: an app made inside a
 * test body cannot register an `afterAll`, and a full run used to leave ~450 directories (~2 GB) in /tmp. The
 * directory has /tmp's mode (everyone may create, the sticky bit keeps each one's entries their own): the
 * `--run-as` tests' build steps run as another user and reach their files through it.
 */
export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), "hangar-tests-"));
  chmodSync(root, 0o1777);
  process.env.TMPDIR = root;
  return () => rmSync(root, { recursive: true, force: true });
}
