-- The outbox rows of CONTRACT §12, written in the same transaction as the build change that causes them,
-- whichever code path makes the change (trigger, claim, runner report, cancel, sweeper, rerun).
CREATE TRIGGER builds_outbox_insert AFTER INSERT ON builds
BEGIN
  INSERT OR IGNORE INTO build_events (build_id, event, expanded, created_at) VALUES (NEW.id, NEW.status, 0, NEW.updated_at);
END;
--> statement-breakpoint
CREATE TRIGGER builds_outbox_status AFTER UPDATE OF status ON builds
WHEN NEW.status <> OLD.status AND NEW.status IN ('queued', 'running', 'succeeded', 'failed', 'canceled', 'timed_out', 'expired')
BEGIN
  INSERT OR IGNORE INTO build_events (build_id, event, expanded, created_at) VALUES (NEW.id, NEW.status, 0, NEW.updated_at);
END;
