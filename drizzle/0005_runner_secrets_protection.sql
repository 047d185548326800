CREATE TABLE `project_secrets` (
	`project_id` text NOT NULL,
	`name` text NOT NULL,
	`value_sealed` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`project_id`, `name`)
);
--> statement-breakpoint
ALTER TABLE `projects` ADD `protected_branches` text;