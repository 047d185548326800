CREATE TABLE `test_cases` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`build_id` text NOT NULL,
	`artifact_id` text NOT NULL,
	`project_id` text NOT NULL,
	`pipeline_id` text NOT NULL,
	`build_number` integer NOT NULL,
	`branch` text NOT NULL,
	`commit_sha` text NOT NULL,
	`suite` text NOT NULL,
	`classname` text NOT NULL,
	`name` text NOT NULL,
	`status` text NOT NULL,
	`duration_ms` integer,
	`message` text,
	`output` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `test_cases_build_status` ON `test_cases` (`build_id`,`status`);--> statement-breakpoint
CREATE INDEX `test_cases_project_test` ON `test_cases` (`project_id`,`name`,`classname`);--> statement-breakpoint
CREATE TABLE `test_reports` (
	`artifact_id` text PRIMARY KEY NOT NULL,
	`build_id` text NOT NULL,
	`status` text NOT NULL,
	`message` text,
	`xml_bytes` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `test_reports_build_id` ON `test_reports` (`build_id`);--> statement-breakpoint
ALTER TABLE `builds` ADD `tests_summary` text;--> statement-breakpoint
ALTER TABLE `artifacts` ADD `kind` text DEFAULT 'file' NOT NULL;