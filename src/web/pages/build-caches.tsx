// The build page's cache table (docs/api.md §16): per `cache` entry of the runner's final report, the key, whether it
// was an exact hit, a partial one (through a restore key) or a miss, what was restored from where, its size and the
// restore and save times. Keys come from the repository and the runner: shown through <Name> (escaped, neutralised).
import type { Child } from "hono/jsx";
import type { BuildRow } from "../../domain/builds/builds.ts";
import { toCacheReports, type CacheEntryReportJson } from "../../domain/caches/cache-report.ts";
import { Name, Section, StatusBadge, Table } from "../components.tsx";
import { formatBytes } from "../text.ts";

const RESULT_TEXT = { exact: "hit", partial: "partial", miss: "miss" } as const;
const RESULT_TONE = { exact: "succeeded", partial: "queued", miss: "neutral" } as const;

function millis(ms: number | null): Child {
  if (ms === null) return <span class="muted">–</span>;
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function saveCell(entry: CacheEntryReportJson): Child {
  if (entry.saved) return millis(entry.save_ms);
  // Why nothing was saved, as far as the report tells.
  return <span class="muted">{entry.result === "exact" ? "not needed (exact hit)" : "not saved"}</span>;
}

/** The section, or nothing when the runner reported no cache entry for this build. */
export function BuildCachesSection(props: { build: BuildRow }): Child {
  const entries = toCacheReports(props.build.caches);
  if (entries.length === 0) return null;
  return (
    <Section title="Caches" id="caches">
      <Table headers={["Key", "Result", "Restored", "Size", "Restore", "Save"]} id="caches-table">
        {entries.map((e) => (
          <tr data-cache-result={e.result}>
            <td class="mono">
              <Name value={e.key} />
            </td>
            <td>
              <StatusBadge status={RESULT_TONE[e.result]} label={RESULT_TEXT[e.result]} />
            </td>
            <td>
              {e.restored_key === null ? (
                <span class="muted">nothing</span>
              ) : (
                <>
                  <span class="mono">
                    <Name value={e.restored_key} />
                  </span>
                  {e.source ? <div class="hint">from the {e.source === "shared" ? "shared (S3/R2)" : "runner's local"} cache</div> : null}
                </>
              )}
            </td>
            <td>{e.size_bytes === null ? <span class="muted">–</span> : formatBytes(e.size_bytes)}</td>
            <td>{millis(e.restore_ms)}</td>
            <td>{saveCell(e)}</td>
          </tr>
        ))}
      </Table>
    </Section>
  );
}
