-- Log search (docs/log-search.md): one FTS5 row per non-empty log line. The rowid is the build's search number
-- (log_search_builds.seq) times 2^27 plus the line number, so a build's rows are one rowid range (dropped in one
-- range delete) and re-indexing a line replaces it rather than adding a copy. build_id and line_number are stored
-- beside the text, not indexed.
CREATE VIRTUAL TABLE `log_search` USING fts5(`line`, `build_id` UNINDEXED, `line_number` UNINDEXED);
--> statement-breakpoint
-- Per build: its search number and how far its stored log is indexed (complete lines up to `indexed_bytes`,
-- numbered from 1; `next_line` is the number of the line that starts there). `complete` = 1 once the whole log of
-- a final build, its last unterminated line included, is indexed.
CREATE TABLE `log_search_builds` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`build_id` text NOT NULL,
	`indexed_bytes` integer NOT NULL DEFAULT 0,
	`next_line` integer NOT NULL DEFAULT 1,
	`complete` integer NOT NULL DEFAULT 0
);
--> statement-breakpoint
CREATE UNIQUE INDEX `log_search_builds_build_id` ON `log_search_builds` (`build_id`);
