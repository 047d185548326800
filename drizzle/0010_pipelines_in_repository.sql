CREATE TABLE `pipeline_badges` (
	`pipeline_id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`token_hash` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `pipeline_badges_token_hash_unique` ON `pipeline_badges` (`token_hash`);--> statement-breakpoint
CREATE TABLE `pipeline_schedules` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`pipeline_id` text NOT NULL,
	`origin` text NOT NULL,
	`cron` text NOT NULL,
	`timezone` text NOT NULL,
	`branch` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `pipeline_schedules_project` ON `pipeline_schedules` (`project_id`);--> statement-breakpoint
CREATE TABLE `schedule_runs` (
	`project_id` text NOT NULL,
	`pipeline_id` text NOT NULL,
	`schedule_key` text NOT NULL,
	`due_at` integer NOT NULL,
	`build_id` text,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`pipeline_id`, `schedule_key`, `due_at`)
);
--> statement-breakpoint
ALTER TABLE `pipelines` ADD `source` text DEFAULT 'stored' NOT NULL;--> statement-breakpoint
ALTER TABLE `pipelines` ADD `file_commit` text;--> statement-breakpoint
ALTER TABLE `pipelines` ADD `file_config` text;--> statement-breakpoint
ALTER TABLE `projects` ADD `config_path` text;--> statement-breakpoint
ALTER TABLE `projects` ADD `schedules_read_at` integer;