-- What a submission was queued for, and whether that feature has heard it
-- ended (postgres dialect; twin: migrations/sqlite/0029_submission_origin.sql).
--
-- Watches, lists and bisections each asked every second or two whether
-- their pairs had ended. A submission now names its origin (who queued it
-- and why: user, watch, series, build_probe, recheck, bisect_probe,
-- verify), and the comparison worker, which ends submissions, tells that
-- origin once: `dispatch_at` is when the ended submission is next due to be
-- told (set when it ends, moved on while a replica holds it, NULL once
-- told or for a submission that has not ended).
ALTER TABLE submissions ADD COLUMN origin TEXT NOT NULL DEFAULT 'user';
ALTER TABLE submissions ADD COLUMN dispatch_at BIGINT;

UPDATE submissions SET origin = 'watch' WHERE kind = 'watch';
UPDATE submissions SET origin = 'bisect_probe' WHERE kind = 'bisect';
UPDATE submissions SET origin = 'series'
 WHERE kind = 'user' AND id IN (SELECT submission_id FROM series WHERE submission_id IS NOT NULL);
UPDATE submissions SET origin = 'verify'
 WHERE kind = 'verify'
   AND id IN (SELECT verify_submission_id FROM bisections WHERE verify_submission_id IS NOT NULL);
UPDATE submissions SET origin = 'recheck'
 WHERE kind = 'verify' AND origin = 'user'
   AND id IN (SELECT submission_id FROM list_commands WHERE submission_id IS NOT NULL);
-- The one other source of verify pairs: a series' build probes.
UPDATE submissions SET origin = 'build_probe' WHERE kind = 'verify' AND origin = 'user';

-- Ended pairs whose origin was still to look at them: it is told at start.
UPDATE submissions SET dispatch_at = COALESCE(finished_at, 0)
 WHERE state <> 'active'
   AND (id IN (SELECT current_submission_id FROM watches WHERE current_submission_id IS NOT NULL)
     OR id IN (SELECT submission_id FROM series
                WHERE state = 'testing' AND submission_id IS NOT NULL)
     OR id IN (SELECT submission_id FROM series_build_probes)
     OR id IN (SELECT submission_id FROM list_commands
                WHERE state = 'testing' AND submission_id IS NOT NULL)
     OR id IN (SELECT verify_submission_id FROM bisections
                WHERE state = 'verifying' AND verify_submission_id IS NOT NULL));

CREATE INDEX submissions_dispatch ON submissions (dispatch_at) WHERE dispatch_at IS NOT NULL;
