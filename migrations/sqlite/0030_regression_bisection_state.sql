-- A regression's bisection state, told by the bisection as it moves
-- (sqlite dialect; twin: migrations/postgres/0030_regression_bisection_state.sql).
--
-- The regressions' list showed the state of the bisection that found each
-- one by joining the bisections table, which the bisection feature above
-- them owns. The bisection now tells its regressions when it starts,
-- verifies and ends; the column is filled once from the bisections here.
ALTER TABLE regressions ADD COLUMN bisection_state TEXT;

UPDATE regressions SET bisection_state =
       (SELECT b.state FROM bisections b WHERE b.id = regressions.bisection_id)
 WHERE bisection_id IS NOT NULL;
