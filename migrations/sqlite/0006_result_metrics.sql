-- A run's metrics move from one metric_samples row per metric into one JSON
-- object on the result row (LKP keeps a run's stats.json the same way).
-- An upload of 200 metrics was 200 B-tree inserts into one hot index inside
-- the single writer's hold; every reader (comparison, results API, e-mail)
-- loads whole runs, never one metric across runs.
ALTER TABLE results ADD COLUMN metrics TEXT NOT NULL DEFAULT '{}';

-- '%!.17g' keeps every bit of a double (json_group_object and '%.17g' print
-- at most 15-16 digits in SQLite); values are finite (uploads refuse NaN/inf).
UPDATE results SET metrics = COALESCE(
    (SELECT '{' || group_concat(json_quote(m.metric) || ':' || printf('%!.17g', m.value), ',') || '}'
     FROM metric_samples m WHERE m.result_id = results.id),
    '{}');

DROP TABLE metric_samples;
