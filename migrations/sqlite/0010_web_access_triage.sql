-- Dashboard sign-in and regression triage (SQLite dialect; twin:
-- migrations/postgres/0010_web_access_triage.sql).

-- A password for the web (argon2 PHC string); NULL: the user signs in with
-- API tokens only. Tokens keep working whether or not a password is set.
ALTER TABLE users ADD COLUMN password_hash TEXT;

-- Signed-in browsers. The cookie holds a random session id; only its sha256
-- is stored, so a database leak reveals no usable session. `csrf_token` is
-- the per-session secret every form of the session carries.
CREATE TABLE web_sessions (
    id            INTEGER PRIMARY KEY,
    token_hash    TEXT    NOT NULL UNIQUE,
    user_id       BIGINT  NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    csrf_token    TEXT    NOT NULL,
    created_at    BIGINT  NOT NULL,
    expires_at    BIGINT  NOT NULL
);
CREATE INDEX web_sessions_user ON web_sessions (user_id);
CREATE INDEX web_sessions_expires ON web_sessions (expires_at);

-- One regression the robot found: a KPI `different` in the bad direction on
-- a user or watch pair. It leads to a bisection (a range) or straight to a
-- report (adjacent commits); a bisection's report is linked when it is
-- written. `state` is the triage state people set from the dashboard.
CREATE TABLE regressions (
    id             INTEGER PRIMARY KEY,
    repo_id        BIGINT  NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    submission_id  BIGINT  NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    atomic_job_id  BIGINT  NOT NULL REFERENCES atomic_jobs(id) ON DELETE CASCADE,
    metric         TEXT    NOT NULL,
    tbox_group     TEXT    NOT NULL,
    change_pct     DOUBLE PRECISION,
    bisection_id   BIGINT  REFERENCES bisections(id) ON DELETE SET NULL,
    report_id      BIGINT  REFERENCES report_outbox(id) ON DELETE SET NULL,
    state          TEXT    NOT NULL DEFAULT 'new' CHECK (state IN
                       ('new', 'confirmed', 'reported', 'fixed', 'invalid', 'wont_fix', 'duplicate')),
    created_at     BIGINT  NOT NULL,
    updated_at     BIGINT  NOT NULL,
    UNIQUE (atomic_job_id, metric)
);
CREATE INDEX regressions_state ON regressions (state, id);
CREATE INDEX regressions_bisection ON regressions (bisection_id);
CREATE INDEX regressions_report ON regressions (report_id);

-- Who changed a regression's triage state, when, and why (user_id NULL: the
-- robot, e.g. a bisection that found a duplicate).
CREATE TABLE regression_events (
    id             INTEGER PRIMARY KEY,
    regression_id  BIGINT  NOT NULL REFERENCES regressions(id) ON DELETE CASCADE,
    user_id        BIGINT  REFERENCES users(id) ON DELETE SET NULL,
    at             BIGINT  NOT NULL,
    from_state     TEXT    NOT NULL,
    to_state       TEXT    NOT NULL,
    note           TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX regression_events_regression ON regression_events (regression_id, id);

-- Regressions found before this migration: every bisection (its metric is
-- known), and every regression report written without one (the metric is
-- the first KPI kbot called different on that job: the one the report names).
INSERT INTO regressions (repo_id, submission_id, atomic_job_id, metric, tbox_group,
                         change_pct, bisection_id, report_id, created_at, updated_at)
SELECT b.repo_id, b.origin_submission_id, b.origin_atomic_job_id, b.metric, b.tbox_group,
       (SELECT c.change_pct FROM comparisons c
         WHERE c.atomic_job_id = b.origin_atomic_job_id AND c.metric = b.metric),
       b.id,
       (SELECT MIN(r.id) FROM report_outbox r WHERE r.bisection_id = b.id),
       b.created_at, b.created_at
FROM bisections b
-- (A WHERE before ON CONFLICT: SQLite's parser needs it after a SELECT.)
WHERE b.id IS NOT NULL
ON CONFLICT (atomic_job_id, metric) DO NOTHING;

INSERT INTO regressions (repo_id, submission_id, atomic_job_id, metric, tbox_group,
                         change_pct, report_id, created_at, updated_at)
SELECT s.repo_id, r.submission_id, r.atomic_job_id, c.metric,
       COALESCE(a.tbox_group, ''), c.change_pct, r.id, r.created_at, r.created_at
FROM report_outbox r
JOIN submissions s ON s.id = r.submission_id
JOIN atomic_jobs a ON a.id = r.atomic_job_id
JOIN comparisons c ON c.id = (SELECT MIN(c2.id) FROM comparisons c2
                               WHERE c2.atomic_job_id = r.atomic_job_id
                                 AND c2.verdict = 'different')
WHERE r.kind = 'regression' AND r.bisection_id IS NULL
ON CONFLICT (atomic_job_id, metric) DO NOTHING;
