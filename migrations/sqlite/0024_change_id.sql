-- b4's `change-id:` trailer, which every version of a series carries
-- (SQLite dialect; twin: migrations/postgres/0024_change_id.sql).
--
-- Versions of a series are linked by it when they have one (a new title
-- no longer breaks the link), and a new version's answer compares the
-- KPI across them. NULL: the sender wrote none.
ALTER TABLE list_messages ADD COLUMN change_id TEXT;
ALTER TABLE series ADD COLUMN change_id TEXT;
CREATE INDEX series_change_id ON series (list_id, change_id);
