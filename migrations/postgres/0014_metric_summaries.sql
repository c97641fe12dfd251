-- Per-commit summaries of each metric of a watched branch (PostgreSQL dialect;
-- twin: migrations/sqlite/0014_metric_summaries.sql), for the trend page.
-- It drew a window of 60 commits from every run's whole metrics object (~600
-- results, 770 kB of JSON parsed per request at one million samples); this
-- keeps, per branch, tbox group, job label, metric and commit, the runs'
-- values of that one metric, so the page reads one row per commit.
--
-- Written in the result upload's transaction (server/src/jobs/summaries.rs)
-- by an upsert that only appends, so two uploads of the same commit at once
-- both land (PostgreSQL); the median is computed from run_values when read,
-- because a stored one could not be updated that way.
CREATE TABLE metric_summaries (
    repo_id     BIGINT            NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    branch      TEXT              NOT NULL,
    -- The atomic job's tbox group, '' when it has none.
    tbox_group  TEXT              NOT NULL,
    -- The job's label, testcase/params (dashboard::views::job_label).
    job         TEXT              NOT NULL,
    metric      TEXT              NOT NULL,
    commit_id   BIGINT            NOT NULL REFERENCES commits(id),
    runs        BIGINT            NOT NULL,
    low         DOUBLE PRECISION  NOT NULL,
    high        DOUBLE PRECISION  NOT NULL,
    -- The runs' values, comma-separated, each printed so it parses back to
    -- the same double.
    run_values  TEXT              NOT NULL,
    -- Commit before job and metric: the page lists the jobs, then one
    -- job's metrics, of a window of commits, each a seek per commit (job
    -- first, SQLite walked the group's every commit for those lists).
    PRIMARY KEY (repo_id, branch, tbox_group, commit_id, job, metric)
);

-- Data migrations that need Rust: a job's label comes from its JSON spec.
-- Db::migrate runs each one named here once, then deletes its row; this
-- one fills metric_summaries from the results already stored.
CREATE TABLE pending_backfills (
    name  TEXT  PRIMARY KEY
);
INSERT INTO pending_backfills (name) VALUES ('metric_summaries');
