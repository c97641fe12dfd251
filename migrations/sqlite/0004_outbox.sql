-- The report outbox: a report is written here in the same transaction that
-- records the regression, and the sender task delivers it over SMTP. The
-- message is stored fully rendered (RFC 5322, \n line ends) so every retry,
-- the dashboard and the mbox download show the same bytes, and message_id is
-- UNIQUE so recording the same regression twice queues one mail.
CREATE TABLE report_outbox (
    id                INTEGER PRIMARY KEY,
    message_id        TEXT    NOT NULL UNIQUE,
    submission_id     BIGINT  REFERENCES submissions(id) ON DELETE SET NULL,
    atomic_job_id     BIGINT  REFERENCES atomic_jobs(id) ON DELETE SET NULL,
    kind              TEXT    NOT NULL CHECK (kind IN ('regression', 'improvement')),
    subject           TEXT    NOT NULL,
    envelope_from     TEXT    NOT NULL,
    -- One address per line: To, then Cc.
    recipients        TEXT    NOT NULL,
    message           TEXT    NOT NULL,
    -- pending: waiting for (another) attempt; sending: claimed by a sender
    -- until claim_expires_at; sent; failed: refused permanently (5xx) or
    -- delivery is switched off for good by the operator.
    state             TEXT    NOT NULL DEFAULT 'pending'
                          CHECK (state IN ('pending', 'sending', 'sent', 'failed')),
    attempts          BIGINT  NOT NULL DEFAULT 0,
    next_attempt_at   BIGINT  NOT NULL,
    claimed_by        TEXT,
    claim_expires_at  BIGINT,
    last_error        TEXT,
    created_at        BIGINT  NOT NULL,
    sent_at           BIGINT
);
CREATE INDEX report_outbox_due ON report_outbox (state, next_attempt_at);

-- Every delivery attempt and its outcome.
CREATE TABLE report_attempts (
    id          INTEGER PRIMARY KEY,
    outbox_id   BIGINT  NOT NULL REFERENCES report_outbox(id) ON DELETE CASCADE,
    attempt     BIGINT  NOT NULL,
    sender      TEXT    NOT NULL,
    started_at  BIGINT  NOT NULL,
    finished_at BIGINT  NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('sent', 'transient', 'permanent')),
    detail      TEXT    NOT NULL
);
CREATE INDEX report_attempts_outbox ON report_attempts (outbox_id);
