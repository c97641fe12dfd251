-- A run's metrics move from one metric_samples row per metric into one JSON
-- object on the result row (LKP keeps a run's stats.json the same way).
-- Under 100 uploading agents the 200-row inserts all hit the right edge of
-- one primary-key index and one heap page: 69 ms per insert, >90% of the
-- database's time. Every reader (comparison, results API, e-mail) loads
-- whole runs, never one metric across runs. TEXT, not jsonb: the server
-- reads and writes it through sqlx's portable Any driver.
ALTER TABLE results ADD COLUMN metrics TEXT NOT NULL DEFAULT '{}';

-- float8 output is the shortest exact form since PostgreSQL 12.
UPDATE results r SET metrics = agg.metrics
FROM (SELECT result_id, json_object_agg(metric, value)::text AS metrics
      FROM metric_samples GROUP BY result_id) AS agg
WHERE agg.result_id = r.id;

DROP TABLE metric_samples;
