CREATE TABLE `bootstrap_tokens` (
	`id` integer PRIMARY KEY NOT NULL,
	`token_hash` text NOT NULL,
	`expires_at` integer NOT NULL,
	`consumed_at` integer,
	`failed_attempts` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `instance` (
	`id` integer PRIMARY KEY NOT NULL,
	`instance_id` text NOT NULL,
	`state` text NOT NULL,
	`runtime_mode` text NOT NULL,
	`remote_auth_mode` text NOT NULL,
	`key_storage_mode` text NOT NULL,
	`owner_user_id` text,
	`preferences_updated_at` integer NOT NULL,
	`setup_completed_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `instance_settings` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `audit_events` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`id` text NOT NULL,
	`action` text NOT NULL,
	`actor_user_id` text,
	`actor_email` text,
	`target_type` text,
	`target_id` text,
	`details` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `audit_events_id_unique` ON `audit_events` (`id`);--> statement-breakpoint
CREATE TABLE `setup_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`token_hash` text NOT NULL,
	`expires_at` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `setup_sessions_token_hash_unique` ON `setup_sessions` (`token_hash`);--> statement-breakpoint
CREATE TABLE `user_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`token_hash` text NOT NULL,
	`user_id` text NOT NULL,
	`auth_method` text NOT NULL,
	`expires_at` integer NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `user_sessions_token_hash_unique` ON `user_sessions` (`token_hash`);--> statement-breakpoint
CREATE INDEX `user_sessions_user_id` ON `user_sessions` (`user_id`);--> statement-breakpoint
CREATE TABLE `users` (
	`id` text PRIMARY KEY NOT NULL,
	`email` text NOT NULL,
	`display_name` text,
	`role` text NOT NULL,
	`status` text NOT NULL,
	`avatar_url` text,
	`oidc_subject` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `users_email_unique` ON `users` (`email`);--> statement-breakpoint
CREATE UNIQUE INDEX `users_single_owner` ON `users` (`role`) WHERE role = 'owner';--> statement-breakpoint
CREATE TABLE `oidc_pending_requests` (
	`state_hash` text PRIMARY KEY NOT NULL,
	`purpose` text NOT NULL,
	`code_verifier_sealed` text NOT NULL,
	`nonce` text NOT NULL,
	`redirect_uri` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `oidc_pending_expires_at` ON `oidc_pending_requests` (`expires_at`);--> statement-breakpoint
CREATE TABLE `pipelines` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`name` text NOT NULL,
	`config` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `pipelines_project_id` ON `pipelines` (`project_id`);--> statement-breakpoint
CREATE TABLE `projects` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`repo_url` text NOT NULL,
	`default_branch` text NOT NULL,
	`source_credentials_sealed` text,
	`android_signing_sealed` text,
	`ios_signing_sealed` text,
	`last_build_number` integer DEFAULT 0 NOT NULL,
	`created_by` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `runners` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text,
	`token_hash` text NOT NULL,
	`status` text NOT NULL,
	`capabilities` text NOT NULL,
	`last_heartbeat_at` integer,
	`registered_by` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `runners_token_hash_unique` ON `runners` (`token_hash`);--> statement-breakpoint
CREATE TABLE `build_log_chunks` (
	`build_id` text NOT NULL,
	`start_offset` integer NOT NULL,
	`content` blob NOT NULL,
	PRIMARY KEY(`build_id`, `start_offset`)
);
--> statement-breakpoint
CREATE TABLE `builds` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`pipeline_id` text NOT NULL,
	`build_number` integer NOT NULL,
	`status` text NOT NULL,
	`platform` text NOT NULL,
	`trigger_type` text NOT NULL,
	`trigger_actor` text,
	`trigger_event` text,
	`trigger_ref` text,
	`commit_sha` text NOT NULL,
	`branch` text NOT NULL,
	`config_snapshot` text NOT NULL,
	`timeout_s` integer NOT NULL,
	`runner_id` text,
	`step_results` text,
	`exit_code` integer,
	`failure_reason` text,
	`attempt_count` integer DEFAULT 0 NOT NULL,
	`lease_expires_at` integer,
	`cancel_requested` integer DEFAULT false NOT NULL,
	`log_bytes` integer DEFAULT 0 NOT NULL,
	`queued_at` integer NOT NULL,
	`started_at` integer,
	`finished_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `builds_project_number_unique` ON `builds` (`project_id`,`build_number`);--> statement-breakpoint
CREATE INDEX `builds_status_queued_at` ON `builds` (`status`,`queued_at`);--> statement-breakpoint
CREATE INDEX `builds_runner_id` ON `builds` (`runner_id`);--> statement-breakpoint
CREATE INDEX `builds_created_at` ON `builds` (`created_at`);--> statement-breakpoint
CREATE TABLE `artifacts` (
	`id` text PRIMARY KEY NOT NULL,
	`build_id` text NOT NULL,
	`runner_id` text NOT NULL,
	`filename` text NOT NULL,
	`size_bytes` integer NOT NULL,
	`content_type` text NOT NULL,
	`sha256` text,
	`status` text NOT NULL,
	`storage_location` text NOT NULL,
	`install_metadata` text,
	`upload_expires_at` integer,
	`completed_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `artifacts_build_id` ON `artifacts` (`build_id`);--> statement-breakpoint
CREATE INDEX `artifacts_status_upload_expires` ON `artifacts` (`status`,`upload_expires_at`);--> statement-breakpoint
CREATE TABLE `url_tokens` (
	`token_hash` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`artifact_id` text NOT NULL,
	`expires_at` integer NOT NULL,
	`used_at` integer,
	`details` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `url_tokens_artifact_id` ON `url_tokens` (`artifact_id`);--> statement-breakpoint
CREATE INDEX `url_tokens_expires_at` ON `url_tokens` (`expires_at`);