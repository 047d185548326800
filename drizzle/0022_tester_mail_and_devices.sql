CREATE TABLE `devices` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`udid` text NOT NULL,
	`product` text,
	`version` text,
	`serial` text,
	`tester_id` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `devices_project_udid_unique` ON `devices` (`project_id`,`udid`);--> statement-breakpoint
CREATE INDEX `devices_tester_id` ON `devices` (`tester_id`);--> statement-breakpoint
ALTER TABLE `testers` ADD `opt_out_token_hash` text;--> statement-breakpoint
ALTER TABLE `testers` ADD `opt_out_token_sealed` text;--> statement-breakpoint
ALTER TABLE `testers` ADD `link_base` text;--> statement-breakpoint
CREATE UNIQUE INDEX `testers_opt_out_token_hash_unique` ON `testers` (`opt_out_token_hash`);