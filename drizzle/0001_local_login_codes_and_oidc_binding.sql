CREATE TABLE `local_login_codes` (
	`id` text PRIMARY KEY NOT NULL,
	`code_hash` text NOT NULL,
	`user_id` text NOT NULL,
	`expires_at` integer NOT NULL,
	`consumed_at` integer,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `local_login_codes_code_hash_unique` ON `local_login_codes` (`code_hash`);--> statement-breakpoint
CREATE INDEX `local_login_codes_expires_at` ON `local_login_codes` (`expires_at`);--> statement-breakpoint
ALTER TABLE `users` ADD `oidc_issuer` text;--> statement-breakpoint
ALTER TABLE `oidc_pending_requests` ADD `client` text;--> statement-breakpoint
CREATE INDEX `oidc_pending_client` ON `oidc_pending_requests` (`client`,`expires_at`);