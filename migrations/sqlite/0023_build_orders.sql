-- Builds queued ahead of the tests that need them (SQLite
-- dialect; twin: migrations/postgres/0023_build_orders.sql).
--
-- An order names a kernel by what the server knows of it (commit, kconfig
-- name, compiler, kernel ARCH). Agents that cannot build queue the orders
-- their jobs need, dedicated builders those of every queued job of their
-- arch; agents with the build role lease them. The builder makes the
-- order's build key and claims that build as the order (builds.order_id):
-- the claim holds while the order's lease does. An order is done once its
-- build is ready or failed; only then does an agent that cannot build get
-- the jobs that need it. An order its builders lost three times is
-- `given_up`: its jobs go out and fail, rather than wait for it forever.
CREATE TABLE build_orders (
    id                INTEGER PRIMARY KEY,
    repo_id           BIGINT  NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    commit_sha        TEXT    NOT NULL,
    kconfig           TEXT    NOT NULL,
    compiler          TEXT    NOT NULL,
    arch              TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('queued', 'leased', 'done', 'given_up')),
    agent_id          BIGINT  REFERENCES agents(id) ON DELETE SET NULL,
    lease_expires_at  BIGINT,
    leases            BIGINT  NOT NULL DEFAULT 0,
    build_key         TEXT,
    created_at        BIGINT  NOT NULL,
    updated_at        BIGINT  NOT NULL,
    UNIQUE (commit_sha, kconfig, compiler, arch)
);
CREATE INDEX build_orders_queue ON build_orders (arch, state, id);

ALTER TABLE builds ADD COLUMN order_id BIGINT REFERENCES build_orders(id) ON DELETE SET NULL;
