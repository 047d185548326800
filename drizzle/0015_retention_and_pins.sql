CREATE TABLE `project_retention_policies` (
	`project_id` text PRIMARY KEY NOT NULL,
	`policy` text NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `retention_passes` (
	`id` text PRIMARY KEY NOT NULL,
	`trigger` text NOT NULL,
	`actor_user_id` text,
	`actor_email` text,
	`started_at` integer NOT NULL,
	`finished_at` integer,
	`lease_owner` text NOT NULL,
	`lease_expires_at` integer NOT NULL,
	`artifacts_count` integer DEFAULT 0 NOT NULL,
	`artifacts_bytes` integer DEFAULT 0 NOT NULL,
	`logs_count` integer DEFAULT 0 NOT NULL,
	`logs_bytes` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE INDEX `retention_passes_started_at` ON `retention_passes` (`started_at`);--> statement-breakpoint
ALTER TABLE `builds` ADD `pinned` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `builds` ADD `log_expired_at` integer;--> statement-breakpoint
ALTER TABLE `artifacts` ADD `expired_at` integer;--> statement-breakpoint
ALTER TABLE `artifacts` ADD `storage_removed_at` integer;