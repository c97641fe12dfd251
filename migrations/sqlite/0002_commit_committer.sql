-- The committer of each stored commit, beside the author of 0001: robot
-- e-mails copy the committer, and bisection reports name who applied a patch.
-- Empty for rows stored before this migration (none in practice: the server
-- re-reads a commit from its mirror when it is named again).
ALTER TABLE commits ADD COLUMN committer_name TEXT NOT NULL DEFAULT '';
ALTER TABLE commits ADD COLUMN committer_email TEXT NOT NULL DEFAULT '';
