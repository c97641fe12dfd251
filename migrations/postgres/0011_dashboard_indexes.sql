-- Indexes of the dashboard's reading pages (PostgreSQL dialect; twin:
-- migrations/sqlite/0011_dashboard_indexes.sql). 0010 is another change's.
--
-- The machines page lists the newest failure events (ORDER BY id DESC with
-- failure IS NOT NULL). Failures are a small share of all events (every
-- run posts leased, building, booting, running), so without this the
-- newest 26 failures are found by walking back through every event since.
CREATE INDEX job_events_failures ON job_events (id) WHERE failure IS NOT NULL;

-- The trend page goes from a watched branch's watches to their
-- submissions; submissions had no index on watch_id.
CREATE INDEX submissions_watch ON submissions (watch_id);
