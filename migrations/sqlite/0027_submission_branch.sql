-- The branch a robot's pair is on (sqlite dialect; twin:
-- migrations/postgres/0027_submission_branch.sql).
--
-- Only a watch's runs fed the trend pages (metric_summaries), so a list's
-- base, measured again with every series posted on it, had no history. A
-- pair now names the branch it was taken from: a watch's (both commits lie
-- on it) or a list's (the base a series was applied on). Its runs on that
-- branch feed the branch's trend: both sides of a watch pair, the base
-- side of a series pair.
ALTER TABLE submissions ADD COLUMN branch TEXT;
UPDATE submissions SET branch = (SELECT w.branch FROM watches w WHERE w.id = submissions.watch_id)
 WHERE watch_id IS NOT NULL;
UPDATE submissions SET branch = (SELECT l.branch FROM series se JOIN lists l ON l.id = se.list_id
                                  WHERE se.submission_id = submissions.id
                                  ORDER BY se.id LIMIT 1)
 WHERE branch IS NULL AND kind = 'user';
CREATE INDEX submissions_branch ON submissions (repo_id, branch, id);
-- Rebuilt from the stored results at start (jobs::summaries::backfill_pending).
INSERT INTO pending_backfills (name) VALUES ('metric_summaries') ON CONFLICT DO NOTHING;
