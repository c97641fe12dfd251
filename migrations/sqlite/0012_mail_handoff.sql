-- At most one copy of a report per Message-ID, even across a crash (SQLite
-- dialect; twin: migrations/postgres/0012_mail_handoff.sql).
-- A sender records `handed` (with handed_at) durably just before the SMTP
-- DATA command. A row still `handed` when its claim expires belongs to a
-- sender that died while the relay may or may not have accepted the message:
-- it becomes `uncertain`, is not sent again by itself, and an operator can
-- resend it (`kbot-server report resend`). Its attempt's outcome is
-- `uncertain` too. SQLite cannot alter a CHECK, so both tables are rebuilt
-- (as in 0007).
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
                          CHECK (state IN ('pending', 'sending', 'handed', 'sent', 'failed',
                                           'uncertain', 'mail_off')),
    attempts          BIGINT  NOT NULL DEFAULT 0,
    next_attempt_at   BIGINT  NOT NULL,
    claimed_by        TEXT,
    claim_expires_at  BIGINT,
    last_error        TEXT,
    created_at        BIGINT  NOT NULL,
    sent_at           BIGINT,
    handed_at         BIGINT
);
INSERT INTO report_outbox_new (id, message_id, submission_id, atomic_job_id, bisection_id, kind,
    subject, envelope_from, recipients, message, state, attempts, next_attempt_at, claimed_by,
    claim_expires_at, last_error, created_at, sent_at)
SELECT id, message_id, submission_id, atomic_job_id, bisection_id, kind, subject, envelope_from,
    recipients, message, state, attempts, next_attempt_at, claimed_by, claim_expires_at,
    last_error, created_at, sent_at FROM report_outbox;
CREATE TABLE report_attempts_new (
    id          INTEGER PRIMARY KEY,
    outbox_id   BIGINT  NOT NULL REFERENCES report_outbox_new(id) ON DELETE CASCADE,
    attempt     BIGINT  NOT NULL,
    sender      TEXT    NOT NULL,
    started_at  BIGINT  NOT NULL,
    finished_at BIGINT  NOT NULL,
    outcome     TEXT    NOT NULL
                    CHECK (outcome IN ('sent', 'transient', 'permanent', 'uncertain')),
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
