CREATE TABLE `signing_notices` (
	`project_id` text NOT NULL,
	`item_key` text NOT NULL,
	`state` text NOT NULL,
	`notified_at` integer NOT NULL,
	PRIMARY KEY(`project_id`, `item_key`)
);
--> statement-breakpoint
ALTER TABLE `projects` ADD `ios_signing_info` text;--> statement-breakpoint
ALTER TABLE `projects` ADD `android_signing_info` text;--> statement-breakpoint
ALTER TABLE `outbox` ADD `payload` text;