-- At most one copy of a report per Message-ID, even across a crash
-- (PostgreSQL dialect; twin: migrations/sqlite/0012_mail_handoff.sql).
-- A sender records `handed` (with handed_at) durably just before the SMTP
-- DATA command. A row still `handed` when its claim expires belongs to a
-- sender that died while the relay may or may not have accepted the message:
-- it becomes `uncertain`, is not sent again by itself, and an operator can
-- resend it (`kbot-server report resend`). Its attempt's outcome is
-- `uncertain` too.
ALTER TABLE report_outbox DROP CONSTRAINT report_outbox_state_check;
ALTER TABLE report_outbox ADD CONSTRAINT report_outbox_state_check
    CHECK (state IN ('pending', 'sending', 'handed', 'sent', 'failed', 'uncertain', 'mail_off'));
ALTER TABLE report_outbox ADD COLUMN handed_at BIGINT;
ALTER TABLE report_attempts DROP CONSTRAINT report_attempts_outcome_check;
ALTER TABLE report_attempts ADD CONSTRAINT report_attempts_outcome_check
    CHECK (outcome IN ('sent', 'transient', 'permanent', 'uncertain'));
