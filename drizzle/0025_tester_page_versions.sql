CREATE TABLE `tester_page_versions` (
	`scope` text PRIMARY KEY NOT NULL,
	`version` integer NOT NULL
);
