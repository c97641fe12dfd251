-- What a submission's job file has that kbot does not run (PostgreSQL
-- dialect; twin: migrations/sqlite/0008_skipped_jobs.sql): a JSON list of
-- {kind, name, reason}, shown with the submission.
ALTER TABLE submissions ADD COLUMN skipped TEXT NOT NULL DEFAULT '[]';
