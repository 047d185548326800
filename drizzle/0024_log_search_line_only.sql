-- Log search keeps only the line text (docs/decisions.md, "Log search index size"): build_id and line_number were
-- stored beside every line although the rowid already holds both (log_search_builds.seq × 2^27 + the line
-- number), and the per-line token counts (columnsize) serve only ranking, which search does not use. Detail stays
-- full: phrases and NEAR need token positions (docs/api.md §17). The index is rebuilt from the old table's rows.
CREATE VIRTUAL TABLE `log_search_lines` USING fts5(`line`, columnsize=0);
--> statement-breakpoint
INSERT INTO `log_search_lines` (rowid, `line`) SELECT rowid, `line` FROM `log_search`;
--> statement-breakpoint
DROP TABLE `log_search`;
--> statement-breakpoint
ALTER TABLE `log_search_lines` RENAME TO `log_search`;
