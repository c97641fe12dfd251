-- Who may command kbot by mail, and how much kbot mails (PostgreSQL dialect; twin:
-- migrations/sqlite/0018_command_trust.sql).
--
-- accept_unsigned: 1 lets a mail without any DKIM signature count as an
-- unverified sender of the list (a local mbox, an archive that strips
-- signatures); such a sender still needs a role. 0 (the default): every
-- state-changing command needs a DKIM pass aligned with its From.
-- maintainers: addresses (one a line) that may command every report of the
-- list's patches, besides the MAINTAINERS file of the tree.
ALTER TABLE lists ADD COLUMN accept_unsigned BIGINT NOT NULL DEFAULT 0;
ALTER TABLE lists ADD COLUMN maintainers TEXT NOT NULL DEFAULT '';

-- The thread a mail goes to (the first Message-ID of its References, or
-- its parent's): the sender's per-thread hourly cap counts by it. NULL for
-- a report that starts no thread of a list.
ALTER TABLE report_outbox ADD COLUMN thread TEXT;
CREATE INDEX report_attempts_started ON report_attempts (started_at);
CREATE INDEX list_commands_regression ON list_commands (regression_id, command);

-- Whether the command's sender was believed (a DKIM pass or an accepted
-- unsigned mail, and a role): the answers to an untrusted sender's retest go
-- to the report's thread, never To the mail's From (which may be forged).
ALTER TABLE list_commands ADD COLUMN trusted BIGINT NOT NULL DEFAULT 1;
