-- When the comparison of an atomic job's pair became final (a verdict other
-- than `unknown`, the run cap reached, or a side without any finished run).
-- A submission is done when all its atomic jobs are settled; NULL means the
-- comparison worker still has to look at it.
ALTER TABLE atomic_jobs ADD COLUMN settled_at BIGINT;
