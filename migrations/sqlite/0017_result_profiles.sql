-- The kernel profile of a result (SQLite dialect; twin:
-- migrations/postgres/0017_result_profiles.sql): the folded call stacks
-- (`root;caller;...;leaf COUNT` lines) of one extra, unmeasured execution of
-- the workload under perf, which agents of QEMU guests take and upload with
-- the run's result. At most one a result, written in the result upload's
-- transaction (server/src/profiles/store.rs) beside the result it belongs to;
-- the dashboard merges a side's profiles to compare two commits.
CREATE TABLE result_profiles (
    result_id  BIGINT  PRIMARY KEY REFERENCES results(id) ON DELETE CASCADE,
    -- The sampling event (`cpu-clock` in a guest without a PMU).
    event      TEXT    NOT NULL,
    folded     TEXT    NOT NULL
);
