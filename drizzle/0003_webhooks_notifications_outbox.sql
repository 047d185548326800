CREATE TABLE `build_events` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`build_id` text NOT NULL,
	`event` text NOT NULL,
	`expanded` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `build_events_build_event` ON `build_events` (`build_id`,`event`);--> statement-breakpoint
CREATE INDEX `build_events_pending` ON `build_events` (`expanded`,`seq`);--> statement-breakpoint
CREATE TABLE `notifications` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`kind` text NOT NULL,
	`url_sealed` text NOT NULL,
	`on` text NOT NULL,
	`branches` text,
	`secret_sealed` text,
	`base_url` text NOT NULL,
	`disabled_at` integer,
	`created_by` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `notifications_project_id` ON `notifications` (`project_id`);--> statement-breakpoint
CREATE TABLE `outbox` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`event_seq` integer,
	`build_id` text,
	`target_kind` text NOT NULL,
	`target_id` text NOT NULL,
	`event` text NOT NULL,
	`message_id` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at_ms` integer NOT NULL,
	`lease_owner` text,
	`lease_until_ms` integer,
	`last_error` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `outbox_event_target` ON `outbox` (`event_seq`,`target_kind`,`target_id`);--> statement-breakpoint
CREATE INDEX `outbox_due` ON `outbox` (`status`,`next_attempt_at_ms`);--> statement-breakpoint
CREATE INDEX `outbox_build_target` ON `outbox` (`build_id`,`target_kind`,`target_id`);--> statement-breakpoint
CREATE TABLE `outbox_attempts` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`id` text NOT NULL,
	`outbox_seq` integer,
	`target_kind` text NOT NULL,
	`target_id` text NOT NULL,
	`attempt` integer NOT NULL,
	`status_code` integer,
	`error` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `outbox_attempts_target` ON `outbox_attempts` (`target_kind`,`target_id`,`seq`);--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`webhook_id` text NOT NULL,
	`delivery_id` text,
	`dedup_key` text,
	`event` text NOT NULL,
	`outcome` text NOT NULL,
	`reason` text,
	`build_ids` text NOT NULL,
	`received_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `webhook_deliveries_dedup` ON `webhook_deliveries` (`webhook_id`,`dedup_key`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_webhook` ON `webhook_deliveries` (`webhook_id`,`seq`);--> statement-breakpoint
CREATE TABLE `webhooks` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`provider` text NOT NULL,
	`api_url` text,
	`report_status` integer NOT NULL,
	`secret_sealed` text NOT NULL,
	`base_url` text NOT NULL,
	`learned_api_base` text,
	`learned_repo` text,
	`disabled_at` integer,
	`created_by` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `webhooks_project_id` ON `webhooks` (`project_id`);--> statement-breakpoint
ALTER TABLE `builds` ADD `from_fork` integer DEFAULT false NOT NULL;