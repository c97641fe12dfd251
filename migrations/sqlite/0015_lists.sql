-- Mailing lists as a source of work (SQLite dialect; twin:
-- migrations/postgres/0015_lists.sql). A list is an archive kbot reads
-- (public-inbox v2 or v1, mbox, Maildir) and the tree its patches apply to;
-- every message read is kept (raw, for `git am`), patch series are assembled
-- from them, applied into refs/kbot/series/LIST/ID on the server's mirror and
-- tested as a pair, base against tip. Replies to kbot's own mails carry
-- `#kbot` commands.
CREATE TABLE lists (
    id               INTEGER PRIMARY KEY,
    name             TEXT    NOT NULL UNIQUE,
    -- What the user gave: a path or a URL.
    archive          TEXT    NOT NULL,
    archive_kind     TEXT    NOT NULL
                         CHECK (archive_kind IN ('public-inbox-v2', 'public-inbox-v1', 'mbox', 'maildir')),
    -- The list's posting address (Cc of every answer) and the web archive
    -- that `patch link:` lines point into (public-inbox: BASE/MESSAGE-ID/).
    address          TEXT,
    web_url          TEXT,
    repo_id          BIGINT  NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    branch           TEXT    NOT NULL,
    job_name         TEXT    NOT NULL,
    job_file         TEXT    NOT NULL,
    tbox_group       TEXT,
    runs_cap         BIGINT  NOT NULL,
    interval_secs    BIGINT  NOT NULL,
    -- How long a series with missing parts waits before it ends `incomplete`.
    wait_secs        BIGINT  NOT NULL,
    user_id          BIGINT  NOT NULL REFERENCES users(id),
    state            TEXT    NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'removed')),
    -- Where the reader stopped (archive_kind's own form).
    cursor           TEXT,
    messages_read    BIGINT  NOT NULL DEFAULT 0,
    next_check_at    BIGINT  NOT NULL,
    checked_at       BIGINT,
    last_error       TEXT,
    created_at       BIGINT  NOT NULL
);
CREATE INDEX lists_due ON lists (state, next_check_at);

CREATE TABLE list_messages (
    id             INTEGER PRIMARY KEY,
    list_id        BIGINT  NOT NULL REFERENCES lists(id) ON DELETE CASCADE,
    message_id     TEXT    NOT NULL,
    in_reply_to    TEXT,
    -- References, oldest first, one id a line.
    refs           TEXT    NOT NULL,
    subject        TEXT    NOT NULL,
    from_name      TEXT    NOT NULL,
    from_address   TEXT    NOT NULL,
    -- To and Cc, `Name <address>` one a line.
    recipients     TEXT    NOT NULL,
    date_ms        BIGINT  NOT NULL,
    is_patch       BIGINT  NOT NULL,
    has_diff       BIGINT  NOT NULL,
    base_commit    TEXT,
    raw            BLOB    NOT NULL,
    -- Where in the archive it was read (an epoch and commit, an offset, a file).
    origin         TEXT    NOT NULL,
    read_at        BIGINT  NOT NULL,
    UNIQUE (list_id, message_id)
);
CREATE INDEX list_messages_patches ON list_messages (list_id, is_patch);
CREATE INDEX list_messages_message ON list_messages (message_id);

CREATE TABLE series (
    id               INTEGER PRIMARY KEY,
    list_id          BIGINT  NOT NULL REFERENCES lists(id) ON DELETE CASCADE,
    -- The Message-ID of the cover letter, else of patch 1.
    series_key       TEXT    NOT NULL,
    version          BIGINT  NOT NULL,
    total            BIGINT  NOT NULL,
    rfc              BIGINT  NOT NULL,
    title            TEXT    NOT NULL,
    author_name      TEXT    NOT NULL,
    author_address   TEXT    NOT NULL,
    state            TEXT    NOT NULL
                         CHECK (state IN ('waiting', 'incomplete', 'superseded', 'cannot_apply',
                                          'testing', 'tested', 'build_failed', 'failed')),
    base_sha         TEXT,
    -- How the base was chosen: `base-commit`, or `tree head` at posting time.
    base_how         TEXT,
    ref_name         TEXT,
    tip_sha          TEXT,
    submission_id    BIGINT  REFERENCES submissions(id) ON DELETE SET NULL,
    superseded_by    BIGINT  REFERENCES series(id) ON DELETE SET NULL,
    -- Why it ended as it did (git am's error, the build's, the verdict).
    detail           TEXT,
    posted_at        BIGINT  NOT NULL,
    last_part_at     BIGINT  NOT NULL,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    UNIQUE (list_id, series_key, version)
);
CREATE INDEX series_list ON series (list_id, state);
CREATE INDEX series_submission ON series (submission_id);

-- The parts of a series: the cover letter is index 0; each patch's commit
-- once applied.
CREATE TABLE series_parts (
    series_id    BIGINT  NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    idx          BIGINT  NOT NULL,
    message_id   TEXT    NOT NULL,
    commit_sha   TEXT,
    patch_id     TEXT,
    PRIMARY KEY (series_id, idx)
);
CREATE INDEX series_parts_commit ON series_parts (commit_sha);
CREATE INDEX series_parts_patch_id ON series_parts (patch_id);

-- `#kbot` commands read from replies to kbot's mails, and the fixes kbot
-- found itself (command `closes`: a commit on a watched tree whose Closes: or
-- Link: names a report; no list then): what was done, the pair run.
CREATE TABLE list_commands (
    id              INTEGER PRIMARY KEY,
    list_id         BIGINT  REFERENCES lists(id) ON DELETE CASCADE,
    message_id      TEXT    NOT NULL,
    sender          TEXT    NOT NULL,
    command         TEXT    NOT NULL,
    argument        TEXT    NOT NULL,
    -- The kbot mail replied to, and the regression it is about.
    report_id       BIGINT  REFERENCES report_outbox(id) ON DELETE SET NULL,
    regression_id   BIGINT  REFERENCES regressions(id) ON DELETE SET NULL,
    state           TEXT    NOT NULL CHECK (state IN ('done', 'refused', 'testing', 'tested')),
    outcome         TEXT    NOT NULL,
    submission_id   BIGINT  REFERENCES submissions(id) ON DELETE SET NULL,
    created_at      BIGINT  NOT NULL,
    UNIQUE (message_id, command)
);
CREATE INDEX list_commands_submission ON list_commands (submission_id);

CREATE TABLE list_events (
    id        INTEGER PRIMARY KEY,
    list_id   BIGINT  NOT NULL REFERENCES lists(id) ON DELETE CASCADE,
    at        BIGINT  NOT NULL,
    kind      TEXT    NOT NULL,
    detail    TEXT    NOT NULL
);
CREATE INDEX list_events_list ON list_events (list_id, id);

-- Answers in a list thread that are no KPI report (a series that does not
-- apply, a build error, the reply to a command) are mails of kind `answer`.
-- SQLite cannot alter a CHECK: report_outbox and report_attempts are rebuilt
-- as in 0012, and the regressions' report links, which dropping the old
-- table sets to NULL (ON DELETE SET NULL), are put back.
CREATE TABLE regression_report_links AS SELECT id, report_id FROM regressions WHERE report_id IS NOT NULL;
CREATE TABLE report_outbox_new (
    id                INTEGER PRIMARY KEY,
    message_id        TEXT    NOT NULL UNIQUE,
    submission_id     BIGINT  REFERENCES submissions(id) ON DELETE SET NULL,
    atomic_job_id     BIGINT  REFERENCES atomic_jobs(id) ON DELETE SET NULL,
    bisection_id      BIGINT  REFERENCES bisections(id) ON DELETE SET NULL,
    kind              TEXT    NOT NULL CHECK (kind IN ('regression', 'improvement', 'answer')),
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
    claim_expires_at, last_error, created_at, sent_at, handed_at)
SELECT id, message_id, submission_id, atomic_job_id, bisection_id, kind, subject, envelope_from,
    recipients, message, state, attempts, next_attempt_at, claimed_by, claim_expires_at,
    last_error, created_at, sent_at, handed_at FROM report_outbox;
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
UPDATE regressions SET report_id = (SELECT l.report_id FROM regression_report_links l
                                     WHERE l.id = regressions.id)
WHERE id IN (SELECT id FROM regression_report_links);
DROP TABLE regression_report_links;
