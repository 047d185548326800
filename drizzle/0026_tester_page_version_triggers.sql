-- The tester page's version counters (docs/decisions.md "Tester page cache"), bumped in the same statement as a change
-- to what the page shows, whichever code path or daemon makes it: a release is a succeeded build of the channel's
-- pipeline with its files, so a change to a build that is or was succeeded, or to a file of a succeeded build, bumps
-- `pipeline:{id}`; a change to a registered device bumps `devices:{project_id}`. Channel, tester and settings rows
-- are read on each GET themselves and need no counter.
CREATE TRIGGER builds_tester_page_insert AFTER INSERT ON builds WHEN NEW.status = 'succeeded'
BEGIN
  INSERT INTO tester_page_versions (scope, version) VALUES ('pipeline:' || NEW.pipeline_id, 1)
    ON CONFLICT (scope) DO UPDATE SET version = version + 1;
END;
--> statement-breakpoint
CREATE TRIGGER builds_tester_page_update AFTER UPDATE ON builds WHEN NEW.status = 'succeeded' OR OLD.status = 'succeeded'
BEGIN
  INSERT INTO tester_page_versions (scope, version) VALUES ('pipeline:' || NEW.pipeline_id, 1)
    ON CONFLICT (scope) DO UPDATE SET version = version + 1;
  INSERT INTO tester_page_versions (scope, version) SELECT 'pipeline:' || OLD.pipeline_id, 1 WHERE OLD.pipeline_id <> NEW.pipeline_id
    ON CONFLICT (scope) DO UPDATE SET version = version + 1;
END;
--> statement-breakpoint
CREATE TRIGGER builds_tester_page_delete AFTER DELETE ON builds WHEN OLD.status = 'succeeded'
BEGIN
  INSERT INTO tester_page_versions (scope, version) VALUES ('pipeline:' || OLD.pipeline_id, 1)
    ON CONFLICT (scope) DO UPDATE SET version = version + 1;
END;
--> statement-breakpoint
-- A file of a build that has not succeeded yet is no release: the build's own change to succeeded bumps then.
CREATE TRIGGER artifacts_tester_page_insert AFTER INSERT ON artifacts
BEGIN
  INSERT INTO tester_page_versions (scope, version)
    SELECT 'pipeline:' || pipeline_id, 1 FROM builds WHERE id = NEW.build_id AND status = 'succeeded'
    ON CONFLICT (scope) DO UPDATE SET version = version + 1;
END;
--> statement-breakpoint
CREATE TRIGGER artifacts_tester_page_update AFTER UPDATE ON artifacts
BEGIN
  INSERT INTO tester_page_versions (scope, version)
    SELECT 'pipeline:' || pipeline_id, 1 FROM builds WHERE id IN (NEW.build_id, OLD.build_id) AND status = 'succeeded'
    ON CONFLICT (scope) DO UPDATE SET version = version + 1;
END;
--> statement-breakpoint
CREATE TRIGGER artifacts_tester_page_delete AFTER DELETE ON artifacts
BEGIN
  INSERT INTO tester_page_versions (scope, version)
    SELECT 'pipeline:' || pipeline_id, 1 FROM builds WHERE id = OLD.build_id AND status = 'succeeded'
    ON CONFLICT (scope) DO UPDATE SET version = version + 1;
END;
--> statement-breakpoint
CREATE TRIGGER devices_tester_page_insert AFTER INSERT ON devices
BEGIN
  INSERT INTO tester_page_versions (scope, version) VALUES ('devices:' || NEW.project_id, 1)
    ON CONFLICT (scope) DO UPDATE SET version = version + 1;
END;
--> statement-breakpoint
CREATE TRIGGER devices_tester_page_update AFTER UPDATE ON devices
BEGIN
  INSERT INTO tester_page_versions (scope, version) VALUES ('devices:' || NEW.project_id, 1)
    ON CONFLICT (scope) DO UPDATE SET version = version + 1;
  INSERT INTO tester_page_versions (scope, version) SELECT 'devices:' || OLD.project_id, 1 WHERE OLD.project_id <> NEW.project_id
    ON CONFLICT (scope) DO UPDATE SET version = version + 1;
END;
--> statement-breakpoint
CREATE TRIGGER devices_tester_page_delete AFTER DELETE ON devices
BEGIN
  INSERT INTO tester_page_versions (scope, version) VALUES ('devices:' || OLD.project_id, 1)
    ON CONFLICT (scope) DO UPDATE SET version = version + 1;
END;
