-- KCIDB submission of finished pairs (sqlite dialect; twin:
-- migrations/postgres/0025_kcidb_sent.sql).
--
-- With a KCIDB endpoint configured (KBOT_KCIDB_URL), every submission that
-- is done is sent once as a KCIDB v5 document: when it was accepted, how
-- many times it was tried, and the last refusal.
ALTER TABLE submissions ADD COLUMN kcidb_sent_at BIGINT;
ALTER TABLE submissions ADD COLUMN kcidb_attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE submissions ADD COLUMN kcidb_error TEXT;
