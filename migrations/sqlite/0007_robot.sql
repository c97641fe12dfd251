-- The robot loop (SQLite dialect; twin: migrations/postgres/0007_robot.sql).
-- Watches: a branch of a repo the robot follows. Every new head is tested
-- against the last head that built, booted and ran (`last_good_commit_id`),
-- the first against its parent; one watch submission at a time.
CREATE TABLE watches (
    id                      INTEGER PRIMARY KEY,
    repo_id                 BIGINT  NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    branch                  TEXT    NOT NULL,
    job_name                TEXT    NOT NULL,
    job_file                TEXT    NOT NULL,
    tbox_group              TEXT,
    interval_secs           BIGINT  NOT NULL,
    runs_cap                BIGINT  NOT NULL,
    user_id                 BIGINT  NOT NULL REFERENCES users(id),
    state                   TEXT    NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'removed')),
    -- The branch head at the last successful fetch.
    last_seen_sha           TEXT,
    -- The last head submitted, and the last one whose head side ran.
    last_tested_commit_id   BIGINT  REFERENCES commits(id),
    last_good_commit_id     BIGINT  REFERENCES commits(id),
    current_submission_id   BIGINT,
    next_check_at           BIGINT  NOT NULL,
    checked_at              BIGINT,
    last_error              TEXT,
    created_at              BIGINT  NOT NULL
);
CREATE INDEX watches_due ON watches (state, next_check_at);

-- What a watch did and saw: fetch errors, heads tested, heads that failed.
CREATE TABLE watch_events (
    id        INTEGER PRIMARY KEY,
    watch_id  BIGINT  NOT NULL REFERENCES watches(id) ON DELETE CASCADE,
    at        BIGINT  NOT NULL,
    kind      TEXT    NOT NULL,
    detail    TEXT    NOT NULL
);
CREATE INDEX watch_events_watch ON watch_events (watch_id, id);

-- Who made a submission and what follows from its verdict: `user` and
-- `watch` pairs start bisections (when `bisect` is 1); `bisect` submissions
-- carry a bisection's probe runs and are judged by the bisection, not the
-- comparison worker; `verify` is the fresh A/B of a first bad commit.
ALTER TABLE submissions ADD COLUMN kind TEXT NOT NULL DEFAULT 'user'
    CHECK (kind IN ('user', 'watch', 'bisect', 'verify'));
ALTER TABLE submissions ADD COLUMN bisect BIGINT NOT NULL DEFAULT 1;
ALTER TABLE submissions ADD COLUMN watch_id BIGINT REFERENCES watches(id) ON DELETE SET NULL;

-- One search for the first bad commit of a regression between a good and a
-- bad commit, on one metric, tbox group and atomic job. Its probe runs are
-- jobs of `probe_atomic_job_id` (one atomic job, many commits); the ends'
-- samples are the origin pair's plus any probe runs at the ends.
CREATE TABLE bisections (
    id                    INTEGER PRIMARY KEY,
    repo_id               BIGINT  NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    origin_submission_id  BIGINT  NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    origin_atomic_job_id  BIGINT  NOT NULL REFERENCES atomic_jobs(id) ON DELETE CASCADE,
    probe_submission_id   BIGINT  REFERENCES submissions(id) ON DELETE SET NULL,
    probe_atomic_job_id   BIGINT  REFERENCES atomic_jobs(id) ON DELETE SET NULL,
    verify_submission_id  BIGINT  REFERENCES submissions(id) ON DELETE SET NULL,
    good_commit_id        BIGINT  NOT NULL REFERENCES commits(id),
    bad_commit_id         BIGINT  NOT NULL REFERENCES commits(id),
    metric                TEXT    NOT NULL,
    tbox_group            TEXT    NOT NULL,
    job_key               TEXT    NOT NULL,
    -- One open bisection per (range, metric, tbox group, job).
    dedup_key             TEXT    NOT NULL,
    state                 TEXT    NOT NULL DEFAULT 'running' CHECK (state IN
                              ('running', 'verifying', 'reported', 'duplicate', 'not_confirmed',
                               'inconclusive', 'cancelled')),
    first_bad_commit_id   BIGINT  REFERENCES commits(id),
    patch_id              TEXT,
    duplicate_of          BIGINT  REFERENCES bisections(id),
    reason                TEXT,
    -- Space-separated shas the first bad commit may be among (inconclusive).
    remaining             TEXT    NOT NULL DEFAULT '',
    runs_cap              BIGINT  NOT NULL,
    -- Bumped by every change: replicas advance a bisection optimistically.
    rev                   BIGINT  NOT NULL DEFAULT 0,
    created_at            BIGINT  NOT NULL,
    finished_at           BIGINT
);
CREATE UNIQUE INDEX bisections_open_key ON bisections (dedup_key)
    WHERE state IN ('running', 'verifying');
CREATE INDEX bisections_state ON bisections (state);
CREATE INDEX bisections_patch_id ON bisections (patch_id);

-- The commits a bisection tested, in the order it chose them.
CREATE TABLE bisection_steps (
    id            INTEGER PRIMARY KEY,
    bisection_id  BIGINT  NOT NULL REFERENCES bisections(id) ON DELETE CASCADE,
    idx           BIGINT  NOT NULL,
    commit_id     BIGINT  NOT NULL REFERENCES commits(id),
    state         TEXT    NOT NULL DEFAULT 'testing' CHECK (state IN
                      ('testing', 'good', 'bad', 'skip', 'undecided', 'cancelled')),
    -- Percent change of the probe's mean against the good end's.
    change_pct    DOUBLE PRECISION,
    detail        TEXT    NOT NULL DEFAULT '',
    started_at    BIGINT  NOT NULL,
    finished_at   BIGINT,
    UNIQUE (bisection_id, commit_id)
);

-- Reports are written whether or not mail is on; `mail_off` is the delivery
-- state of one written while it was off. SQLite cannot alter a CHECK, so the
-- outbox and its attempts are rebuilt (attempts first: they reference it).
CREATE TABLE report_outbox_new (
    id                INTEGER PRIMARY KEY,
    message_id        TEXT    NOT NULL UNIQUE,
    submission_id     BIGINT  REFERENCES submissions(id) ON DELETE SET NULL,
    atomic_job_id     BIGINT  REFERENCES atomic_jobs(id) ON DELETE SET NULL,
    bisection_id      BIGINT  REFERENCES bisections(id) ON DELETE SET NULL,
    kind              TEXT    NOT NULL CHECK (kind IN ('regression', 'improvement')),
    subject           TEXT    NOT NULL,
    envelope_from     TEXT    NOT NULL,
    recipients        TEXT    NOT NULL,
    message           TEXT    NOT NULL,
    state             TEXT    NOT NULL DEFAULT 'pending'
                          CHECK (state IN ('pending', 'sending', 'sent', 'failed', 'mail_off')),
    attempts          BIGINT  NOT NULL DEFAULT 0,
    next_attempt_at   BIGINT  NOT NULL,
    claimed_by        TEXT,
    claim_expires_at  BIGINT,
    last_error        TEXT,
    created_at        BIGINT  NOT NULL,
    sent_at           BIGINT
);
INSERT INTO report_outbox_new (id, message_id, submission_id, atomic_job_id, kind, subject,
    envelope_from, recipients, message, state, attempts, next_attempt_at, claimed_by,
    claim_expires_at, last_error, created_at, sent_at)
SELECT id, message_id, submission_id, atomic_job_id, kind, subject, envelope_from, recipients,
    message, state, attempts, next_attempt_at, claimed_by, claim_expires_at, last_error,
    created_at, sent_at FROM report_outbox;
CREATE TABLE report_attempts_new (
    id          INTEGER PRIMARY KEY,
    outbox_id   BIGINT  NOT NULL REFERENCES report_outbox_new(id) ON DELETE CASCADE,
    attempt     BIGINT  NOT NULL,
    sender      TEXT    NOT NULL,
    started_at  BIGINT  NOT NULL,
    finished_at BIGINT  NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('sent', 'transient', 'permanent')),
    detail      TEXT    NOT NULL
);
INSERT INTO report_attempts_new SELECT id, outbox_id, attempt, sender, started_at, finished_at,
    outcome, detail FROM report_attempts;
DROP TABLE report_attempts;
DROP TABLE report_outbox;
ALTER TABLE report_outbox_new RENAME TO report_outbox;
ALTER TABLE report_attempts_new RENAME TO report_attempts;
CREATE INDEX report_outbox_due ON report_outbox (state, next_attempt_at);
CREATE INDEX report_outbox_bisection ON report_outbox (bisection_id);
CREATE INDEX report_attempts_outbox ON report_attempts (outbox_id);
