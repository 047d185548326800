import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { listAuditEvents } from "../../domain/common/audit.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { EmptyState, Name, Section, Table, Time } from "../components.tsx";
import { Layout, type PageCtx } from "../layout.tsx";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";

type AuditEvent = Awaited<ReturnType<typeof listAuditEvents>>[number];

const LIMITS = [50, 200, 500] as const;

/** Details as "key: value" pairs; values are outside strings (emails, names) and shown neutralised. */
function Details(props: { details: Record<string, unknown> }) {
  const entries = Object.entries(props.details);
  if (entries.length === 0) return <span class="muted">–</span>;
  return (
    <dl class="kv">
      {entries.map(([k, val]) => (
        <>
          <dt>{k}</dt>
          <dd>
            <Name value={typeof val === "string" ? val : JSON.stringify(val)} />
          </dd>
        </>
      ))}
    </dl>
  );
}

function AuditPage(props: { ctx: PageCtx; events: AuditEvent[]; limit: number }) {
  return (
    <Layout ctx={props.ctx} title="Audit log">
      <h1>Audit log</h1>
      <p class="muted">
        The latest {props.limit} events, newest first. Show{" "}
        {LIMITS.map((l, i) => (
          <>
            {i > 0 ? " · " : ""}
            {l === props.limit ? <strong>{l}</strong> : <a href={`/audit?limit=${l}`}>{l}</a>}
          </>
        ))}
      </p>
      <Section title="Events" id="events">
        {props.events.length === 0 ? (
          <EmptyState title="No events yet" />
        ) : (
          <Table headers={["When", "Action", "By", "Target", "Details"]} id="audit-table">
            {props.events.map((e) => (
              <tr>
                <td>
                  <Time at={e.created_at} now={props.ctx.now} />
                </td>
                <td>
                  <code>{e.action}</code>
                </td>
                <td>
                  <Name value={e.actor_email} fallback="Hangar" />
                </td>
                <td>
                  {e.target_type ? (
                    <>
                      {e.target_type} <span class="hint mono">{e.target_id ?? ""}</span>
                    </>
                  ) : (
                    <span class="muted">–</span>
                  )}
                </td>
                <td>
                  <Details details={e.details as Record<string, unknown>} />
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Section>
    </Layout>
  );
}

/** /audit (owner and admins): the audit log, newest first. */
export function auditPages(deps: AppDeps) {
  return new Hono<AppEnv>().get("/audit", requireBrowserUser(deps, { roles: ROLES.managers }), async (c) => {
    const asked = Number(c.req.query("limit"));
    const limit = (LIMITS as readonly number[]).includes(asked) ? asked : LIMITS[0];
    return renderPage(c, <AuditPage ctx={pageContext(c, deps)} events={await listAuditEvents(deps, limit)} limit={limit} />);
  });
}
