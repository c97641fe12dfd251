//! Upgrading a store keeps what it holds: a database at an older schema,
//! with rows in it, migrated to the current one.

use std::collections::BTreeMap;
use std::path::Path;

use kbot_load::seed;
use kbot_server::db::Db;
use kbot_testkit::{backends, Backend, TestStore};
use sqlx::migrate::Migrator;
use sqlx::Row;

/// Doubles that need all 17 significant digits, or sit at the range ends.
fn awkward_values() -> BTreeMap<String, f64> {
    [
        ("lmbench3.PIPE.bandwidth.MB/sec", 0.1),
        ("lmbench3.PIPE.latency.us", 0.300_000_000_000_000_04),
        ("will-it-scale.per_process_ops", 123_456_789_012_345_678.0),
        ("will-it-scale.\"quoted\"", 1e20),
        ("whole", 5.0),
        ("tiny", -3.25e-7),
        ("max", f64::MAX),
        ("min_positive", f64::MIN_POSITIVE),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value))
    .collect()
}

/// Applies the migrations numbered below `before` from the source tree.
pub(crate) async fn migrate_up_to(db: &Db, backend: Backend, before: &str) {
    let dialect = match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../migrations")
        .join(dialect);
    let old = tempfile::tempdir().expect("temp dir");
    for entry in std::fs::read_dir(&source).expect("migrations dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        if name.as_str() < before {
            std::fs::copy(&path, old.path().join(&name)).expect("copy migration");
        }
    }
    let migrator = Migrator::new(old.path()).await.expect("old migrator");
    migrator.run(db.write()).await.expect("old migrations");
}

pub(crate) async fn execute(db: &Db, sql: &str) {
    sqlx::query(sql)
        .execute(db.write())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

#[tokio::test]
async fn results_keep_every_metric_bit_when_samples_move_into_the_result_row() {
    for backend in backends() {
        let store = TestStore::new(backend).await;
        let db = Db::connect(&store.database_url).await.expect("connect");
        migrate_up_to(&db, backend, "0006").await;

        // The seed queues jobs with today's code, which writes
        // jobs.need_page_size (0009): the column is there for the seed
        // only, and gone again before the later migrations run.
        execute(&db, "ALTER TABLE jobs ADD COLUMN need_page_size BIGINT").await;
        let seeded = seed::submission(&db, "linux", "dev", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        execute(&db, "ALTER TABLE jobs DROP COLUMN need_page_size").await;
        let jobs: Vec<(i64,)> =
            sqlx::query_as("SELECT id FROM jobs WHERE submission_id = $1 ORDER BY id")
                .bind(seeded.submission_id)
                .fetch_all(db.read())
                .await
                .expect("jobs");
        let mut result_ids = Vec::new();
        for (job_id,) in jobs.iter().take(2) {
            let row = sqlx::query(
                "INSERT INTO results (job_id, kernel_release, tuning, raw_output_path, \
                     started_at, finished_at, uploaded_at) \
                 VALUES ($1, '6.1.0', '{}', 'out.txt', 1, 2, 3) RETURNING id",
            )
            .bind(job_id)
            .fetch_one(db.write())
            .await
            .expect("old result row");
            result_ids.push(row.try_get::<i64, _>("id").expect("id"));
        }
        // The first result has samples; the second has none.
        for (name, value) in awkward_values() {
            sqlx::query(
                "INSERT INTO metric_samples (result_id, metric, value) VALUES ($1, $2, $3)",
            )
            .bind(result_ids[0])
            .bind(name)
            .bind(value)
            .execute(db.write())
            .await
            .expect("old sample row");
        }

        db.migrate().await.expect("migrate to the current schema");

        let stored: Vec<(i64, String)> =
            sqlx::query_as("SELECT id, metrics FROM results ORDER BY id")
                .fetch_all(db.read())
                .await
                .expect("results");
        assert_eq!(stored.len(), 2, "{backend:?}");
        let first: BTreeMap<String, f64> =
            serde_json::from_str(&stored[0].1).expect("metrics are a JSON object");
        assert_eq!(first, awkward_values(), "{backend:?}: {}", stored[0].1);
        assert_eq!(stored[1].1, "{}", "{backend:?}");
        let old_table = sqlx::query("SELECT 1 FROM metric_samples")
            .fetch_all(db.read())
            .await;
        assert!(
            old_table.is_err(),
            "{backend:?}: metric_samples should be gone"
        );
        db.close().await;
    }
}

/// metric, tbox group, bisection, report's Message-ID, triage state.
type Regression = (String, String, Option<i64>, Option<String>, String);

/// Migration 0010 finds the regressions a store already holds: each
/// bisection (with the report it wrote) and each regression report written
/// without one (its metric: the job's first KPI called different). Their
/// report links survive 0012's rebuild of report_outbox on SQLite, whose
/// DROP TABLE sets them NULL, because 0013 links them again.
#[tokio::test]
async fn regressions_found_before_0010_are_listed_for_triage() {
    for backend in backends() {
        let store = TestStore::new(backend).await;
        let db = Db::connect(&store.database_url).await.expect("connect");
        migrate_up_to(&db, backend, "0010").await;
        let seeded = seed::submission(&db, "linux", "dev", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        let s = seeded.submission_id;
        let (atomic_job,): (i64,) =
            sqlx::query_as("SELECT MIN(id) FROM atomic_jobs WHERE submission_id = $1")
                .bind(s)
                .fetch_one(db.read())
                .await
                .expect("atomic job");
        execute(
            &db,
            &format!(
                "INSERT INTO comparisons (submission_id, atomic_job_id, metric, verdict, \
                   change_pct, base_n, head_n, created_at, updated_at) \
                 VALUES ({s}, {atomic_job}, 'pipe.MB/s', 'different', -20.5, 4, 4, 1, 1)"
            ),
        )
        .await;
        execute(
            &db,
            &format!(
                "INSERT INTO bisections (repo_id, origin_submission_id, origin_atomic_job_id, \
                   good_commit_id, bad_commit_id, metric, tbox_group, job_key, dedup_key, \
                   state, runs_cap, created_at) \
                 SELECT repo_id, id, {atomic_job}, base_commit_id, head_commit_id, \
                   'pipe.latency', 'lkp-box', 'k', 'd', 'reported', 10, 5 \
                 FROM submissions WHERE id = {s}"
            ),
        )
        .await;
        for (message_id, bisection) in [("direct@kbot", "NULL"), ("bisected@kbot", "1")] {
            execute(
                &db,
                &format!(
                    "INSERT INTO report_outbox (message_id, submission_id, atomic_job_id, kind, \
                       subject, envelope_from, recipients, message, next_attempt_at, \
                       created_at, state, bisection_id) \
                     VALUES ('{message_id}', {s}, {atomic_job}, 'regression', 's', 'f', 'r', \
                       'm', 7, 7, 'mail_off', {bisection})"
                ),
            )
            .await;
        }

        db.migrate().await.expect("migrate to the current schema");

        let found: Vec<Regression> = sqlx::query_as(
            "SELECT g.metric, g.tbox_group, g.bisection_id, o.message_id, g.state \
             FROM regressions g LEFT JOIN report_outbox o ON o.id = g.report_id ORDER BY g.id",
        )
        .fetch_all(db.read())
        .await
        .expect("regressions");
        let expected = vec![
            (
                "pipe.latency".into(),
                "lkp-box".into(),
                Some(1),
                Some("bisected@kbot".into()),
                "new".into(),
            ),
            (
                "pipe.MB/s".into(),
                String::new(),
                None,
                Some("direct@kbot".into()),
                "new".into(),
            ),
        ];
        assert_eq!(found, expected, "{backend:?}");
        db.close().await;
    }
}

/// A summary row: commit, job label, metric, runs, low, high, run_values.
type Summary = (i64, String, String, i64, f64, f64, String);

/// Migration 0014 summarises the results a store already holds: each watch
/// run's metrics land on their commit's rows per tbox group and job label
/// (a user pair's runs are on no trend), once, however often the server
/// starts.
#[tokio::test]
async fn metric_summaries_are_backfilled_from_stored_watch_results() {
    for backend in backends() {
        let store = TestStore::new(backend).await;
        let db = Db::connect(&store.database_url).await.expect("connect");
        migrate_up_to(&db, backend, "0014").await;
        let watched = seed::submission(&db, "linux", "dev", seed::LOAD_JOB_FILE, 2, 0)
            .await
            .expect("seed");
        // A user pair of the same commits, one run a side: not counted.
        seed::submission(&db, "linux", "dev", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        let s = watched.submission_id;
        execute(
            &db,
            &format!(
                "INSERT INTO watches (repo_id, branch, job_name, job_file, interval_secs, \
                   runs_cap, user_id, next_check_at, created_at) \
                 SELECT repo_id, 'master', job_name, job_file, 60, 10, user_id, 0, 0 \
                 FROM submissions WHERE id = {s}"
            ),
        )
        .await;
        execute(
            &db,
            &format!(
                "UPDATE submissions SET kind = 'watch', watch_id = (SELECT MAX(id) FROM watches) \
                 WHERE id = {s}"
            ),
        )
        .await;
        execute(&db, "UPDATE atomic_jobs SET tbox_group = 'lkp-box'").await;
        // Every run finished with `m` = its job id, `seq` = its place in the pair.
        execute(&db, "UPDATE jobs SET state = 'finished'").await;
        execute(
            &db,
            "INSERT INTO results (job_id, kernel_release, tuning, raw_output_path, started_at, \
               finished_at, uploaded_at, metrics) \
             SELECT id, '6.1', '{}', 'x', 1, 2, 3, \
               '{\"m\":' || id || ',\"seq\":' || seq || '}' FROM jobs",
        )
        .await;

        kbot_server::server::migrate(&db)
            .await
            .expect("migrate to the current schema");
        kbot_server::server::migrate(&db)
            .await
            .expect("and again, as a restart does");

        let rows: Vec<Summary> = sqlx::query_as(
            "SELECT commit_id, job, metric, runs, low, high, run_values FROM metric_summaries \
             WHERE tbox_group = 'lkp-box' AND branch = 'master' \
             ORDER BY commit_id, job, metric",
        )
        .fetch_all(db.read())
        .await
        .expect("summaries");
        // Two commits x two jobs (bw_pipe.size 64k, 4k) x two metrics.
        assert_eq!(rows.len(), 8, "{backend:?}: {rows:?}");
        let jobs: Vec<(i64, i64, i64)> = sqlx::query_as(
            "SELECT id, commit_id, atomic_job_id FROM jobs WHERE submission_id = $1 ORDER BY id",
        )
        .bind(s)
        .fetch_all(db.read())
        .await
        .expect("jobs");
        for (commit, job, metric, runs, low, high, values) in &rows {
            assert_eq!(
                *runs, 2,
                "{backend:?}: the watch's two runs a side: {rows:?}"
            );
            assert!(job.starts_with("bw_pipe/"), "{job}");
            if metric == "m" {
                let ids: Vec<i64> = jobs
                    .iter()
                    .filter(|(_, c, _)| c == commit)
                    .map(|(id, _, _)| *id)
                    .collect();
                let mut parsed: Vec<f64> = values
                    .split(',')
                    .map(|v| v.parse().expect("a number"))
                    .collect();
                parsed.sort_by(f64::total_cmp);
                assert!(
                    parsed.iter().all(|v| ids.contains(&(*v as i64))),
                    "{backend:?}: {values} from {ids:?}"
                );
                assert_eq!((*low, *high), (parsed[0], parsed[1]), "{backend:?}");
            }
        }
        let pending: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM pending_backfills")
            .fetch_one(db.read())
            .await
            .expect("count");
        assert_eq!(pending.0, 0, "{backend:?}");
        db.close().await;
    }
}

/// Two processes started together on one new store (kbot-up's server and
/// an admin command, two replicas) both migrate it. sqlx locks PostgreSQL
/// but not SQLite, where both used to apply the first migration and the
/// second failed with "table users already exists".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_migrating_one_new_store_both_succeed() {
    for backend in backends() {
        let dir = match backend {
            Backend::Sqlite => "../migrations/sqlite",
            Backend::Postgres => "../migrations/postgres",
        };
        let files = std::fs::read_dir(dir).expect("migrations").count();
        for round in 0..4 {
            let store = TestStore::new(backend).await;
            let url = &store.database_url;
            let (a, b) = tokio::join!(Db::connect(url), Db::connect(url));
            let (a, b) = (a.expect("connect a"), b.expect("connect b"));
            let (ra, rb) = tokio::join!(
                kbot_server::server::migrate(&a),
                kbot_server::server::migrate(&b)
            );
            assert!(
                ra.is_ok() && rb.is_ok(),
                "{backend:?} round {round}: {ra:?} {rb:?}"
            );
            let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations")
                .fetch_one(a.read())
                .await
                .expect("count");
            assert_eq!(applied as usize, files, "{backend:?} round {round}");
        }
    }
}

/// Migration 0028 gives mail its own record of where each applied patch
/// was posted: a series applied before it keeps answering in its patch's
/// thread, without mail reading the lists' tables.
#[tokio::test]
async fn patches_applied_before_0028_keep_their_threads() {
    for backend in backends() {
        let store = TestStore::new(backend).await;
        let db = Db::connect(&store.database_url).await.expect("connect");
        migrate_up_to(&db, backend, "0028").await;
        seed::submission(&db, "linux", "dev", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        for sql in [
            "INSERT INTO lists (name, archive, archive_kind, address, web_url, repo_id, branch, \
               job_name, job_file, runs_cap, interval_secs, wait_secs, user_id, next_check_at, \
               created_at) \
             SELECT 'netdev', '/srv/netdev', 'mbox', 'netdev@vger.kernel.org', \
               'https://lore.kernel.org/netdev/', r.id, 'main', 'j', 'f', 4, 60, 60, u.id, 0, 1 \
             FROM repos r, users u WHERE r.name = 'linux' AND u.name = 'dev'",
            "INSERT INTO list_messages (list_id, message_id, refs, subject, from_name, \
               from_address, recipients, date_ms, is_patch, has_diff, raw, origin, read_at) \
             SELECT id, 'p1@example.org', 'cover@example.org', '[PATCH 1/1] pipe: one more', \
               'Pat Pipe', 'pat@example.org', 'Maint <maint@example.org>', 1, 1, 1, '', \
               'o', 1 FROM lists",
            "INSERT INTO series (list_id, series_key, version, total, rfc, title, author_name, \
               author_address, state, base_sha, base_how, ref_name, tip_sha, posted_at, \
               last_part_at, created_at, updated_at) \
             SELECT id, 'cover@example.org', 1, 1, 0, 'pipe: one more', 'Pat Pipe', \
               'pat@example.org', 'tested', 'abc', 'base-commit', 'refs/kbot/series/netdev/1', \
               'def', 1, 1, 1, 1 FROM lists",
            "INSERT INTO series_parts (series_id, idx, message_id, commit_sha) \
             SELECT id, 1, 'p1@example.org', 'def' FROM series",
        ] {
            execute(&db, sql).await;
        }

        db.migrate().await.expect("migrate to the current schema");

        let row: (String, String, String, String, String, Option<String>) = sqlx::query_as(
            "SELECT message_id, refs, list_name, branch, recipients, list_address \
             FROM posted_patches WHERE commit_sha = 'def'",
        )
        .fetch_one(db.read())
        .await
        .expect("the applied patch's thread");
        assert_eq!(
            row,
            (
                "p1@example.org".into(),
                "cover@example.org".into(),
                "netdev".into(),
                "main".into(),
                "Maint <maint@example.org>".into(),
                Some("netdev@vger.kernel.org".into()),
            ),
            "{backend:?}"
        );
        db.close().await;
    }
}

/// Submissions stored before 0029 get the origin their kind and links
/// name; an ended one whose watch had not yet looked at it is due to be
/// told, others are not.
#[tokio::test]
async fn submissions_before_0029_get_their_origin_and_waiting_ends() {
    for backend in backends() {
        let store = TestStore::new(backend).await;
        let db = Db::connect(&store.database_url).await.expect("connect");
        migrate_up_to(&db, backend, "0029").await;
        let pair = |b: u32, h: u32| (format!("{b:040x}"), format!("{h:040x}"));
        let mut ids = Vec::new();
        for (base, head) in [pair(1, 2), pair(2, 3), pair(3, 4)] {
            let seeded = seed::submission_at(
                &db,
                "linux",
                "dev",
                seed::LOAD_JOB_FILE,
                1,
                0,
                (&base, &head),
            )
            .await
            .expect("seed");
            ids.push(seeded.submission_id);
        }
        let [watched, told, probe] = ids[..] else {
            panic!("three submissions")
        };
        execute(&db, &format!("UPDATE submissions SET state = 'done', finished_at = 7, kind = 'watch' WHERE id IN ({watched}, {told})")).await;
        execute(&db, &format!("UPDATE submissions SET state = 'done', finished_at = 8, kind = 'verify' WHERE id = {probe}")).await;
        execute(
            &db,
            &format!(
                "INSERT INTO watches (repo_id, branch, job_name, job_file, interval_secs, runs_cap, \
                   user_id, next_check_at, created_at, current_submission_id) \
                 SELECT r.id, 'master', 'j', 'f', 60, 4, u.id, 0, 1, {watched} \
                 FROM repos r, users u WHERE r.name = 'linux' AND u.name = 'dev'"
            ),
        )
        .await;

        db.migrate().await.expect("migrate to the current schema");

        let rows: Vec<(i64, String, Option<i64>)> =
            sqlx::query_as("SELECT id, origin, dispatch_at FROM submissions ORDER BY id")
                .fetch_all(db.read())
                .await
                .expect("submissions");
        assert_eq!(
            rows,
            vec![
                (watched, "watch".into(), Some(7)),
                (told, "watch".into(), None),
                (probe, "build_probe".into(), None),
            ],
            "{backend:?}"
        );
        db.close().await;
    }
}

/// Migrations 0030 and 0031: a regression's bisection state is copied from
/// its bisection, and the active lists with an address follow their branch
/// by mail (a removed list and one without an address do not).
#[tokio::test]
async fn regressions_and_lists_before_0030_keep_their_bisection_state_and_followers() {
    for backend in backends() {
        let store = TestStore::new(backend).await;
        let db = Db::connect(&store.database_url).await.expect("connect");
        migrate_up_to(&db, backend, "0030").await;
        let s = seed::submission(&db, "linux", "dev", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed")
            .submission_id;
        execute(
            &db,
            &format!(
                "INSERT INTO bisections (repo_id, origin_submission_id, origin_atomic_job_id, \
                   good_commit_id, bad_commit_id, metric, tbox_group, job_key, dedup_key, \
                   state, runs_cap, created_at) \
                 SELECT s.repo_id, s.id, (SELECT MIN(id) FROM atomic_jobs WHERE submission_id = s.id), s.base_commit_id, s.head_commit_id, \
                   'pipe.latency', 'lkp-box', 'k', 'd', 'verifying', 10, 5 \
                 FROM submissions s \
                 WHERE s.id = {s}"
            ),
        )
        .await;
        for (metric, bisection) in [
            ("bisected", "(SELECT MIN(id) FROM bisections)"),
            ("direct", "NULL"),
        ] {
            execute(
                &db,
                &format!(
                    "INSERT INTO regressions (repo_id, submission_id, atomic_job_id, metric, \
                       tbox_group, bisection_id, created_at, updated_at) \
                     SELECT s.repo_id, s.id, (SELECT MIN(id) FROM atomic_jobs WHERE submission_id = s.id), '{metric}', 'lkp-box', {bisection}, 1, 1 \
                     FROM submissions s \
                     WHERE s.id = {s}"
                ),
            )
            .await;
        }
        for (name, address, state) in [
            ("netdev", "'netdev@vger.kernel.org'", "active"),
            ("gone", "'gone@example.org'", "removed"),
            ("quiet", "NULL", "active"),
        ] {
            execute(
                &db,
                &format!(
                    "INSERT INTO lists (name, archive, archive_kind, address, web_url, repo_id, \
                       branch, job_name, job_file, runs_cap, interval_secs, wait_secs, user_id, \
                       next_check_at, created_at, state) \
                     SELECT '{name}', '/srv/{name}', 'mbox', {address}, NULL, r.id, 'main', \
                       'j', 'f', 4, 60, 60, u.id, 0, 1, '{state}' \
                     FROM repos r, users u WHERE r.name = 'linux' AND u.name = 'dev'"
                ),
            )
            .await;
        }

        db.migrate().await.expect("migrate to the current schema");

        let states: Vec<(String, Option<String>)> =
            sqlx::query_as("SELECT metric, bisection_state FROM regressions ORDER BY id")
                .fetch_all(db.read())
                .await
                .expect("regressions");
        assert_eq!(
            states,
            vec![
                ("bisected".into(), Some("verifying".into())),
                ("direct".into(), None)
            ],
            "{backend:?}"
        );
        let followers: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT f.follower, f.branch, f.address FROM mail_followers f ORDER BY f.id",
        )
        .fetch_all(db.read())
        .await
        .expect("followers");
        let netdev: (i64,) = sqlx::query_as("SELECT id FROM lists WHERE name = 'netdev'")
            .fetch_one(db.read())
            .await
            .expect("netdev");
        assert_eq!(
            followers,
            vec![(
                format!("list/{}", netdev.0),
                "main".into(),
                "netdev@vger.kernel.org".into()
            )],
            "{backend:?}"
        );
        db.close().await;
    }
}
