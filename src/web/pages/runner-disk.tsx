// Free disk on the Runners page (docs/api.md §16): the cell of each runner's last report, and one warning naming the
// runners low on disk with what to do about it. Kept apart from runners.tsx so the page stays one table of parts.
import type { Child } from "hono/jsx";
import type { RunnerRow } from "../../domain/runners/runner-auth.ts";
import { Name } from "../components.tsx";
import { formatBytes } from "../text.ts";

/** The "Free disk" cell: the runner's last report, marked when it is below its --min-free-gb. */
export function RunnerDiskCell(props: { runner: RunnerRow }): Child {
  const { freeDiskBytes, lowDisk } = props.runner;
  if (freeDiskBytes === null) return <td class="runner-disk muted">not reported</td>;
  return (
    <td class="runner-disk" data-low-disk={lowDisk ? "true" : "false"}>
      {formatBytes(freeDiskBytes)}
      {lowDisk ? <div class="error">low on disk: takes no builds</div> : null}
    </td>
  );
}

/** Shown above the list while some runner reports low disk: it claims nothing until space is freed. */
export function LowDiskWarning(props: { runners: RunnerRow[] }): Child {
  const low = props.runners.filter((r) => r.lowDisk === true);
  if (low.length === 0) return null;
  return (
    <div class="flash flash-warn" role="alert" id="low-disk-warning">
      {low.length === 1 ? "A runner is" : `${low.length} runners are`} low on disk (
      {low.map((r, i) => (
        <>
          {i > 0 ? ", " : ""}
          <Name value={r.name} fallback={r.id.slice(0, 8)} />
        </>
      ))}
      ) and take no builds until space is freed. Free space on the machine (old build outputs, simulators, caches), or start the runner with a lower{" "}
      <code>--min-free-gb</code>.
    </div>
  );
}
