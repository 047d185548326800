CREATE TABLE `publishes` (
	`id` text PRIMARY KEY NOT NULL,
	`build_id` text NOT NULL,
	`project_id` text NOT NULL,
	`to` text NOT NULL,
	`config` text NOT NULL,
	`state` text NOT NULL,
	`detail` text,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at_ms` integer NOT NULL,
	`lease_owner` text,
	`lease_until_ms` integer,
	`progress` text,
	`processing_since_ms` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `publishes_build_to` ON `publishes` (`build_id`,`to`);--> statement-breakpoint
CREATE INDEX `publishes_due` ON `publishes` (`state`,`next_attempt_at_ms`);--> statement-breakpoint
ALTER TABLE `projects` ADD `app_store_connect_sealed` text;--> statement-breakpoint
ALTER TABLE `projects` ADD `google_play_sealed` text;--> statement-breakpoint
ALTER TABLE `projects` ADD `store_credentials_info` text;