-- Kernels built once and shared by every agent of their arch (SQLite
-- dialect; twin: migrations/postgres/0022_builds.sql).
--
-- A build is keyed by the agent's build key (commit, resolved kconfig,
-- compiler, arch). The first job to claim a key builds it; the claim is
-- that job's while it holds its lease, so a builder that dies frees it and
-- the next claimant builds (`claims` counts them). Its files live in the
-- artifact store (`object_key`) and are checked against `sha256` on
-- download. A key that does not build stays `failed` with its log tail:
-- every job that needs it fails at once instead of building again.
CREATE TABLE builds (
    id          INTEGER PRIMARY KEY,
    build_key   TEXT    NOT NULL UNIQUE,
    commit_sha  TEXT    NOT NULL,
    arch        TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('building', 'ready', 'failed')),
    job_id      BIGINT  REFERENCES jobs(id) ON DELETE SET NULL,
    claims      BIGINT  NOT NULL DEFAULT 1,
    release     TEXT,
    build_id    TEXT,
    build_secs  DOUBLE PRECISION,
    log_tail    TEXT,
    created_at  BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL
);
CREATE INDEX builds_job ON builds (job_id);

CREATE TABLE build_files (
    build_id    BIGINT  NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    name        TEXT    NOT NULL,
    object_key  TEXT    NOT NULL,
    sha256      TEXT    NOT NULL,
    bytes       BIGINT  NOT NULL,
    PRIMARY KEY (build_id, name)
);

-- The build a job's kernel came from (built by it, or downloaded): its log
-- page links the kernel's files.
ALTER TABLE jobs ADD COLUMN build_id BIGINT REFERENCES builds(id) ON DELETE SET NULL;
