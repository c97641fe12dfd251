-- Enrolment tokens bound to a machine, and agents that may run list work
-- (PostgreSQL dialect; twin: migrations/sqlite/0020_bound_enrolment.sql).
--
-- An enrolment token may name the agent it enrols (`agent_name`) and its
-- tbox group (`tbox_group`): enrolling under another name or group is
-- refused, and only a token bound to an existing agent's name may enrol that
-- name again (an unbound one would take the machine over). `disposable` is
-- the operator's word that the machine may run code posted to a mailing
-- list: a kexec agent boots the tested kernel on bare metal, so one that is
-- not disposable is never leased a pair kbot applied from mail.
ALTER TABLE tokens ADD COLUMN agent_name TEXT;
ALTER TABLE tokens ADD COLUMN tbox_group TEXT;
ALTER TABLE tokens ADD COLUMN disposable BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN disposable BIGINT NOT NULL DEFAULT 0;
