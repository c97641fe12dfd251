-- A claim ranks the next queued jobs of the pairs the agent already ran
-- ("own pairs", scheduler::CANDIDATES_SQL) in queue order. With only
-- jobs_pair (atomic_job_id, state, seq) it sorted every queued run of the
-- pair (hundreds of rows) on every claim; this index yields them in order.
CREATE INDEX jobs_pair_queue ON jobs (atomic_job_id, state, priority DESC, seq, id);
