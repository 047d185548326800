CREATE TABLE `channels` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`pipeline_id` text NOT NULL,
	`name` text NOT NULL,
	`branches` text,
	`platforms` text,
	`created_by` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `channels_project_id` ON `channels` (`project_id`);--> statement-breakpoint
CREATE UNIQUE INDEX `channels_project_name_unique` ON `channels` (`project_id`,`name`);--> statement-breakpoint
CREATE TABLE `installs` (
	`session_token_hash` text PRIMARY KEY NOT NULL,
	`artifact_id` text NOT NULL,
	`tester_id` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `installs_artifact_id` ON `installs` (`artifact_id`);--> statement-breakpoint
CREATE INDEX `installs_tester_id` ON `installs` (`tester_id`);--> statement-breakpoint
CREATE TABLE `testers` (
	`id` text PRIMARY KEY NOT NULL,
	`channel_id` text NOT NULL,
	`email` text NOT NULL,
	`name` text,
	`token_hash` text NOT NULL,
	`mail_opt_out_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `testers_token_hash_unique` ON `testers` (`token_hash`);--> statement-breakpoint
CREATE UNIQUE INDEX `testers_channel_email_unique` ON `testers` (`channel_id`,`email`);--> statement-breakpoint
ALTER TABLE `builds` ADD `release_notes` text;--> statement-breakpoint
ALTER TABLE `builds` ADD `commits` text;--> statement-breakpoint
CREATE INDEX `builds_pipeline_status_created` ON `builds` (`pipeline_id`,`status`,`created_at`);