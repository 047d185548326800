// Release notes for tester channels (docs/decisions.md "Tester distribution"): after the last step, the runner reads
// the pipeline's `release_notes` file (at most 64 KiB, inside the checkout) and lists the commits up to the build's
// (at most 50, from `git log` in the checkout). The clone fetches the build's commit with `--depth=50`, so at most 50
// commits are there to list; a longer gap since the previous release is cut at 50.
import { execFile } from "node:child_process";
import { open, realpath } from "node:fs/promises";
import { isAbsolute, join, sep } from "node:path";
import { promisify } from "node:util";

export const MAX_RELEASE_NOTES_BYTES = 64 * 1024;
export const MAX_COMMITS = 50;
export const CLONE_DEPTH = MAX_COMMITS;

const run = promisify(execFile);

export interface ReportedCommit {
  sha: string;
  subject: string;
  author: string;
}

/**
 * The notes file's text: null when unset, missing, outside the checkout (a `..` path or a symlink out) or not
 * valid text. Longer files are cut at 64 KiB on a character boundary.
 */
export async function readReleaseNotes(srcDir: string, path: string | undefined): Promise<string | null> {
  if (!path || isAbsolute(path)) return null;
  try {
    const root = await realpath(srcDir);
    const file = await realpath(join(root, path));
    if (!file.startsWith(root + sep)) return null;
    const handle = await open(file, "r");
    try {
      const buffer = Buffer.alloc(MAX_RELEASE_NOTES_BYTES);
      const { bytesRead } = await handle.read(buffer, 0, MAX_RELEASE_NOTES_BYTES, 0);
      // A cut may split a character: drop the incomplete tail rather than send a replacement character.
      let text = new TextDecoder("utf-8", { fatal: false }).decode(buffer.subarray(0, bytesRead));
      if (text.endsWith("\uFFFD")) text = text.replace(/\uFFFD+$/, "");
      while (Buffer.byteLength(text) > MAX_RELEASE_NOTES_BYTES) text = text.slice(0, -1);
      return text;
    } finally {
      await handle.close();
    }
  } catch {
    return null;
  }
}

/** The commits up to `rev`, newest first, as far as the shallow clone reaches (at most 50); [] when git fails. */
export async function recentCommits(srcDir: string, env: NodeJS.ProcessEnv, rev = "HEAD"): Promise<ReportedCommit[]> {
  try {
    const { stdout } = await run("git", ["-c", "safe.directory=*", "log", `-n${MAX_COMMITS}`, "--format=%H%x1f%s%x1f%an%x1e", rev, "--"], {
      cwd: srcDir,
      env,
      maxBuffer: 4 * 1024 * 1024,
    });
    return stdout
      .split("\x1e")
      .map((record) => record.replace(/^\n/, ""))
      .filter((record) => record.length > 0)
      .map((record) => {
        const [sha = "", subject = "", author = ""] = record.split("\x1f");
        return { sha, subject: subject.slice(0, 1000), author: author.slice(0, 320) };
      })
      .filter((c) => /^[0-9a-f]{40,64}$/.test(c.sha));
  } catch {
    return [];
  }
}
