ALTER TABLE `projects` ADD `protected_tags` text;--> statement-breakpoint
ALTER TABLE `runners` ADD `trust` text DEFAULT 'protected' NOT NULL;--> statement-breakpoint
ALTER TABLE `builds` ADD `trust` text DEFAULT 'protected' NOT NULL;--> statement-breakpoint
ALTER TABLE `builds` ADD `job_token_hash` text;--> statement-breakpoint
CREATE INDEX `builds_job_token_hash` ON `builds` (`job_token_hash`);