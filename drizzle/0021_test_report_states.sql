ALTER TABLE `test_reports` ADD `state` text DEFAULT 'stored' NOT NULL;--> statement-breakpoint
ALTER TABLE `test_reports` ADD `lease_owner` text;--> statement-breakpoint
ALTER TABLE `test_reports` ADD `lease_until_ms` integer;--> statement-breakpoint
CREATE INDEX `test_reports_unfinished` ON `test_reports` (`state`) WHERE state != 'stored';