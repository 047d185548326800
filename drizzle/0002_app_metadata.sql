CREATE TABLE `artifact_icons` (
	`artifact_id` text PRIMARY KEY NOT NULL,
	`png_base64` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE `artifacts` ADD `app_metadata` text;