-- Links each regression to its report again (PostgreSQL dialect; twin:
-- migrations/sqlite/0013_relink_regression_reports.sql). On SQLite, 0012
-- rebuilds report_outbox, and dropping the old table with foreign keys on
-- set every regressions.report_id to NULL (ON DELETE SET NULL). Here it
-- changes nothing; both dialects run it so the stores stay alike.
-- A bisection's regression: the report the bisection wrote.
UPDATE regressions
SET report_id = (SELECT MIN(o.id) FROM report_outbox o
                  WHERE o.bisection_id = regressions.bisection_id)
WHERE report_id IS NULL AND bisection_id IS NOT NULL;
-- A regression reported without a bisection: the regression report of its
-- pair's job.
UPDATE regressions
SET report_id = (SELECT MIN(o.id) FROM report_outbox o
                  WHERE o.atomic_job_id = regressions.atomic_job_id
                    AND o.kind = 'regression' AND o.bisection_id IS NULL)
WHERE report_id IS NULL AND bisection_id IS NULL;
