-- A protected build that succeeds gets one publish row per `publish` entry of its config, in the same statement
-- as the status change, whatever code made it (docs/publishing.md). Open and fork builds never publish.
CREATE TRIGGER publishes_on_success AFTER UPDATE OF status ON builds
WHEN NEW.status = 'succeeded' AND OLD.status <> 'succeeded' AND NEW.trust = 'protected'
BEGIN
  INSERT OR IGNORE INTO publishes (id, build_id, project_id, "to", config, state, detail, attempts, next_attempt_at_ms, created_at, updated_at)
  SELECT lower(hex(randomblob(16))), NEW.id, NEW.project_id, json_extract(e.value, '$.to'), e.value, 'pending', NULL, 0,
    CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER), NEW.updated_at, NEW.updated_at
  FROM json_each(NEW.config_snapshot, '$.publish') e
  WHERE json_extract(e.value, '$.to') IN ('testflight', 'google_play');
END;
