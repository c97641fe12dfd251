-- What a duplicate regression duplicates (SQLite dialect; twin:
-- migrations/postgres/0021_regression_duplicate_of.sql).
--
-- `#kbot dup: REGRESSION` names the regression a report's regressions
-- duplicate. kbot refuses a target that does not exist, that is one of
-- them, or whose own chain of `duplicate_of` leads back to them (a cycle),
-- so the chain needs the link, not only the note in the history. NULL: no
-- link (not a duplicate, or one the robot found by patch-id, which its
-- bisection's `duplicate_of` names).
ALTER TABLE regressions ADD COLUMN duplicate_of BIGINT REFERENCES regressions(id) ON DELETE SET NULL;
