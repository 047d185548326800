-- Builds queued before runner trust existed got the column default, `protected`; a fork's pull request is `fork`,
-- so that a queued one goes only to an open runner (docs/decisions.md, "Runner trust and job tokens").
UPDATE `builds` SET `trust` = 'fork' WHERE `from_fork` = 1;
