CREATE TABLE `cache_entries` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`trust` text NOT NULL,
	`key` text NOT NULL,
	`status` text NOT NULL,
	`size_bytes` integer NOT NULL,
	`sha256` text NOT NULL,
	`storage_location` text NOT NULL,
	`build_id` text NOT NULL,
	`upload_expires_at` integer NOT NULL,
	`last_used_at` integer NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `cache_entries_scope_key` ON `cache_entries` (`project_id`,`trust`,`status`,`key`);--> statement-breakpoint
CREATE INDEX `cache_entries_status_expiry` ON `cache_entries` (`status`,`upload_expires_at`);--> statement-breakpoint
ALTER TABLE `runners` ADD `free_disk_bytes` integer;--> statement-breakpoint
ALTER TABLE `runners` ADD `low_disk` integer;--> statement-breakpoint
ALTER TABLE `builds` ADD `caches` text;--> statement-breakpoint
CREATE INDEX `builds_pipeline_queued` ON `builds` (`pipeline_id`,`queued_at`);