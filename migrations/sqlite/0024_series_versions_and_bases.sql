-- Versions of a series, the trees a series may be based on, and patchwork
-- checks
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

-- A list's patchwork instance (API URL, project, token): every patch of
-- every series kbot tests gets a check there. NULL: no patchwork.
ALTER TABLE lists ADD COLUMN patchwork_url TEXT;
ALTER TABLE lists ADD COLUMN patchwork_project TEXT;
ALTER TABLE lists ADD COLUMN patchwork_token TEXT;

-- What each patch's check should say (state), what patchwork was last told
-- (sent_state), and the sender's attempts at telling it.
CREATE TABLE patchwork_checks (
    id           INTEGER PRIMARY KEY,
    series_id    BIGINT  NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    message_id   TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'success', 'warning', 'fail')),
    description  TEXT    NOT NULL,
    sent_state   TEXT,
    patch_id     BIGINT,
    attempts     BIGINT  NOT NULL DEFAULT 0,
    last_error   TEXT,
    updated_at   BIGINT  NOT NULL,
    UNIQUE (series_id, message_id)
);
