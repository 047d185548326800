CREATE TABLE `queue_version` (
	`id` integer PRIMARY KEY NOT NULL,
	`version` integer NOT NULL
);
--> statement-breakpoint
-- The one row daemons poll (CONTRACT §8), bumped in the same statement as a build becomes queued, whichever code
-- path or daemon queues it (trigger, webhook, rerun, a lapsed lease, a removed runner). Added by hand after
-- drizzle-kit's table: triggers and the row are not part of drizzle's schema model.
INSERT INTO `queue_version` (`id`, `version`) VALUES (1, 0);
--> statement-breakpoint
CREATE TRIGGER builds_queue_version_insert AFTER INSERT ON builds WHEN NEW.status = 'queued'
BEGIN
  UPDATE queue_version SET version = version + 1 WHERE id = 1;
END;
--> statement-breakpoint
CREATE TRIGGER builds_queue_version_requeue AFTER UPDATE OF status ON builds WHEN NEW.status = 'queued' AND OLD.status <> 'queued'
BEGIN
  UPDATE queue_version SET version = version + 1 WHERE id = 1;
END;
