-- Versions of a series, and the trees a series may be based on
-- (SQLite dialect; twin: migrations/postgres/0024_series_versions_and_bases.sql).
--
-- b4's `change-id:` trailer, which every version of a series carries: the
-- versions are linked by it when they have one (a new title no longer
-- breaks the link), and a new version's answer compares the KPI across
-- them. NULL: the sender wrote none.
ALTER TABLE list_messages ADD COLUMN change_id TEXT;
ALTER TABLE series ADD COLUMN change_id TEXT;
CREATE INDEX series_change_id ON series (list_id, change_id);

-- A list's subject tags and the trees they name, one `TAG=REPO:BRANCH` a
-- line (`net-next=net-next:main`): a `[PATCH net-next]` without a
-- base-commit is based on that branch's head when it was posted.
ALTER TABLE lists ADD COLUMN tree_tags TEXT NOT NULL DEFAULT '';
