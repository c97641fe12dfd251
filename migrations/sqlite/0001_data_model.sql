-- kbot data model, SQLite dialect. The PostgreSQL twin is
-- migrations/postgres/0001_data_model.sql: keep the two in step (same tables,
-- columns, names and constraints) because one code path serves both.
--
-- Conventions: times are Unix milliseconds (BIGINT), so both backends and the
-- wire agree without time zones; integers are 64-bit; no booleans (0/1
-- integers); text states are checked by CHECK constraints; JSON is stored as
-- TEXT. Never edit an applied migration: add 0002_, 0003_, ...

-- People who submit jobs and own user API tokens.
CREATE TABLE users (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE,
    email       TEXT,
    created_at  BIGINT  NOT NULL
);

-- Git repositories the server mirrors.
CREATE TABLE repos (
    id              INTEGER PRIMARY KEY,
    name            TEXT    NOT NULL UNIQUE,
    url             TEXT    NOT NULL,
    default_branch  TEXT    NOT NULL DEFAULT 'master',
    created_at      BIGINT  NOT NULL
);

-- Commits the server has resolved; `parents` holds the full parent ids,
-- first parent first, separated by single spaces ('' for a root commit).
CREATE TABLE commits (
    id            INTEGER PRIMARY KEY,
    repo_id       BIGINT  NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    sha           TEXT    NOT NULL,
    parents       TEXT    NOT NULL DEFAULT '',
    subject       TEXT    NOT NULL,
    author_name   TEXT    NOT NULL,
    author_email  TEXT    NOT NULL,
    authored_at   BIGINT  NOT NULL,
    committed_at  BIGINT  NOT NULL,
    UNIQUE (repo_id, sha)
);

-- Test machines. The hardware fingerprint is what jobs are matched and
-- `N%` values are resolved against, and what reports print.
CREATE TABLE agents (
    id            INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    tbox_group    TEXT    NOT NULL,
    backend       TEXT    NOT NULL CHECK (backend IN ('qemu', 'kexec', 'host')),
    arch          TEXT    NOT NULL,
    cpu_model     TEXT    NOT NULL,
    sockets       BIGINT  NOT NULL,
    cores         BIGINT  NOT NULL,
    threads       BIGINT  NOT NULL,
    numa_nodes    BIGINT  NOT NULL,
    memory_bytes  BIGINT  NOT NULL,
    page_size     BIGINT  NOT NULL,
    microcode     TEXT,
    kernel        TEXT    NOT NULL,
    state         TEXT    NOT NULL DEFAULT 'idle' CHECK (state IN ('idle', 'busy', 'offline')),
    enrolled_at   BIGINT  NOT NULL,
    last_seen_at  BIGINT  NOT NULL
);
CREATE INDEX agents_tbox_group ON agents (tbox_group);

-- Secrets, stored as sha256 hex only. `enrollment` tokens are one-time
-- (used_at set on use); `agent` tokens belong to an agent, `user` tokens to a
-- user; agent endpoints accept only agent tokens and the reverse.
CREATE TABLE tokens (
    id          INTEGER PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (kind IN ('enrollment', 'agent', 'user')),
    token_hash  TEXT    NOT NULL UNIQUE,
    label       TEXT    NOT NULL,
    agent_id    BIGINT  REFERENCES agents(id) ON DELETE CASCADE,
    user_id     BIGINT  REFERENCES users(id) ON DELETE CASCADE,
    created_at  BIGINT  NOT NULL,
    used_at     BIGINT,
    revoked_at  BIGINT,
    CHECK ((kind = 'agent') = (agent_id IS NOT NULL)),
    CHECK ((kind = 'user') = (user_id IS NOT NULL))
);

-- Named kernel configurations: `make <base>` plus a fragment, or a whole
-- .config kept as an artifact (path relative to the artifact directory).
CREATE TABLE kconfigs (
    id             INTEGER PRIMARY KEY,
    name           TEXT    NOT NULL UNIQUE,
    base           TEXT,
    fragment       TEXT    NOT NULL DEFAULT '',
    full_artifact  TEXT,
    created_at     BIGINT  NOT NULL,
    CHECK (base IS NOT NULL OR full_artifact IS NOT NULL)
);

-- One submitted job file for a base/head commit pair (a single commit is
-- submitted as head with its first parent as base).
CREATE TABLE submissions (
    id              INTEGER PRIMARY KEY,
    user_id         BIGINT  NOT NULL REFERENCES users(id),
    repo_id         BIGINT  NOT NULL REFERENCES repos(id),
    job_name        TEXT    NOT NULL,
    job_file        TEXT    NOT NULL,
    base_commit_id  BIGINT  NOT NULL REFERENCES commits(id),
    head_commit_id  BIGINT  NOT NULL REFERENCES commits(id),
    priority        BIGINT  NOT NULL DEFAULT 0,
    -- Most runs per side an `unknown` verdict may grow to.
    runs_cap        BIGINT  NOT NULL,
    state           TEXT    NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'done', 'cancelled')),
    -- Jobs of this submission currently leased and not yet terminal: the fair-share key.
    in_flight       BIGINT  NOT NULL DEFAULT 0,
    created_at      BIGINT  NOT NULL,
    finished_at     BIGINT
);
CREATE INDEX submissions_state ON submissions (state, created_at);

-- One point of the submission's job matrix (kbot_core::job::AtomicJob as JSON).
-- `tbox_group` is the job file's, or else the group of the first agent to
-- lease a run: every run of both sides then stays on that machine class.
-- `preferred_agent_id` is the agent that leased its first run: later runs of
-- both sides prefer it, so machine drift hits base and head alike.
CREATE TABLE atomic_jobs (
    id                  INTEGER PRIMARY KEY,
    submission_id       BIGINT  NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    position            BIGINT  NOT NULL,
    spec                TEXT    NOT NULL,
    testcase            TEXT    NOT NULL,
    tbox_group          TEXT,
    kconfig             TEXT    NOT NULL,
    compiler            TEXT    NOT NULL,
    preferred_agent_id  BIGINT  REFERENCES agents(id) ON DELETE SET NULL,
    UNIQUE (submission_id, position)
);
CREATE INDEX atomic_jobs_preferred_agent ON atomic_jobs (preferred_agent_id);

-- One atomic job x one commit x one run index: the unit an agent leases.
-- `seq` orders a pair's runs base, head, base, head (2*run_index + side).
CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY,
    submission_id     BIGINT  NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    atomic_job_id     BIGINT  NOT NULL REFERENCES atomic_jobs(id) ON DELETE CASCADE,
    commit_id         BIGINT  NOT NULL REFERENCES commits(id),
    side              TEXT    NOT NULL CHECK (side IN ('base', 'head')),
    run_index         BIGINT  NOT NULL,
    seq               BIGINT  NOT NULL,
    need_arch         TEXT,
    need_threads      BIGINT,
    need_memory_bytes BIGINT,
    priority          BIGINT  NOT NULL DEFAULT 0,
    state             TEXT    NOT NULL DEFAULT 'queued' CHECK (state IN
                          ('queued', 'leased', 'building', 'booting', 'running', 'uploading',
                           'finished', 'failed', 'cancelled')),
    attempts          BIGINT  NOT NULL DEFAULT 0,
    max_attempts      BIGINT  NOT NULL,
    lease_owner       BIGINT  REFERENCES agents(id) ON DELETE SET NULL,
    lease_expires_at  BIGINT,
    failure           TEXT    CHECK (failure IN
                          ('build_failed', 'boot_failed', 'timeout', 'incomplete', 'infrastructure')),
    failure_detail    TEXT,
    created_at        BIGINT  NOT NULL,
    updated_at        BIGINT  NOT NULL,
    finished_at       BIGINT,
    UNIQUE (atomic_job_id, commit_id, run_index)
);
-- The claim's window scans this in order (see server/src/scheduler).
CREATE INDEX jobs_queue ON jobs (state, priority DESC, seq, id);
CREATE INDEX jobs_pair ON jobs (atomic_job_id, state, seq);
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at);
CREATE INDEX jobs_submission ON jobs (submission_id, state);

-- Every state change of a job, with time and detail.
CREATE TABLE job_events (
    id        INTEGER PRIMARY KEY,
    job_id    BIGINT  NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    agent_id  BIGINT  REFERENCES agents(id) ON DELETE SET NULL,
    at        BIGINT  NOT NULL,
    state     TEXT    NOT NULL,
    failure   TEXT,
    detail    TEXT    NOT NULL
);
CREATE INDEX job_events_job ON job_events (job_id, id);

-- The outcome of one job run; at most one per job (idempotent upload). Big
-- text lives in artifact files (paths relative to the artifact directory).
CREATE TABLE results (
    id                INTEGER PRIMARY KEY,
    job_id            BIGINT  NOT NULL UNIQUE REFERENCES jobs(id) ON DELETE CASCADE,
    agent_id          BIGINT  REFERENCES agents(id) ON DELETE SET NULL,
    kernel_release    TEXT    NOT NULL,
    tuning            TEXT    NOT NULL,
    raw_output_path   TEXT    NOT NULL,
    console_path      TEXT,
    kconfig_path      TEXT,
    started_at        BIGINT  NOT NULL,
    finished_at       BIGINT  NOT NULL,
    uploaded_at       BIGINT  NOT NULL
);

-- One value per metric per result, under LKP names.
CREATE TABLE metric_samples (
    result_id  BIGINT            NOT NULL REFERENCES results(id) ON DELETE CASCADE,
    metric     TEXT              NOT NULL,
    value      DOUBLE PRECISION  NOT NULL,
    PRIMARY KEY (result_id, metric)
);

-- The verdict per atomic job and metric, from the statistics issue.
CREATE TABLE comparisons (
    id             INTEGER PRIMARY KEY,
    submission_id  BIGINT            NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    atomic_job_id  BIGINT            NOT NULL REFERENCES atomic_jobs(id) ON DELETE CASCADE,
    metric         TEXT              NOT NULL,
    verdict        TEXT              NOT NULL,
    change_pct     DOUBLE PRECISION,
    base_n         BIGINT            NOT NULL,
    head_n         BIGINT            NOT NULL,
    base_mean      DOUBLE PRECISION,
    head_mean      DOUBLE PRECISION,
    base_stddev    DOUBLE PRECISION,
    head_stddev    DOUBLE PRECISION,
    p_value        DOUBLE PRECISION,
    detail         TEXT              NOT NULL DEFAULT '{}',
    created_at     BIGINT            NOT NULL,
    updated_at     BIGINT            NOT NULL,
    UNIQUE (atomic_job_id, metric)
);
CREATE INDEX comparisons_submission ON comparisons (submission_id);
