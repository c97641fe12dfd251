//! Per-commit summaries of a branch's metrics (migration 0014): the runs'
//! values of one metric on one commit, per branch, tbox group and job
//! label, which the trend page reads instead of every run's whole metrics
//! object. A run is on a branch when its pair names one (migration 0027):
//! both sides of a watch's pair, the base side of a list's series pair.
//!
//! A result upload adds its run in its own transaction ([`add_run`]);
//! [`rebuild`] recomputes every row from the stored results: the backfill
//! of a store migrated to 0014, and the load generator's seeded history.
//! Both write through one append-only upsert.

use std::collections::{BTreeMap, HashMap};

use sqlx::AnyConnection;

use crate::db::{self, Db, JsonText, Tx};
use crate::error::Result;
use crate::jobs::{job_label, parse_spec};

/// The name of this backfill in `pending_backfills`.
const BACKFILL: &str = "metric_summaries";

/// Rows per INSERT: 10 bound values each, well under both backends' limits.
const ROWS_PER_INSERT: usize = 500;

/// Where a branch run's values go; one row per metric under it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    repo_id: i64,
    branch: String,
    tbox_group: String,
    job: String,
    commit_id: i64,
}

/// A branch run's key columns, for the runs [`ON_A_BRANCH_SQL`] selects;
/// other runs are on no trend.
const BRANCH_RUNS_SQL: &str =
    "SELECT s.repo_id, s.branch, COALESCE(a.tbox_group, '') AS tbox_group, \
            a.id AS atomic_job_id, a.spec, j.id AS job_id, j.commit_id \
     FROM jobs j JOIN atomic_jobs a ON a.id = j.atomic_job_id \
     JOIN submissions s ON s.id = j.submission_id";

/// The runs of [`BRANCH_RUNS_SQL`] on their pair's branch: a watch pair's
/// head is the branch's next commit, a series pair's is a patch on it.
const ON_A_BRANCH_SQL: &str = "s.branch IS NOT NULL AND (s.kind = 'watch' OR j.side = 'base')";

/// A row of [`BRANCH_RUNS_SQL`].
#[derive(sqlx::FromRow)]
struct BranchRun {
    repo_id: i64,
    branch: String,
    tbox_group: String,
    atomic_job_id: i64,
    spec: String,
    commit_id: i64,
}

/// A finished branch run with its result's metrics.
#[derive(sqlx::FromRow)]
struct FinishedRun {
    #[sqlx(flatten)]
    run: BranchRun,
    metrics: JsonText<BTreeMap<String, f64>>,
}

/// Adds one run's metrics to its commit's summaries, if it is a branch run.
pub async fn add_run(tx: &mut Tx, job_id: i64, metrics: &BTreeMap<String, f64>) -> Result<()> {
    let row = sqlx::query_as::<_, BranchRun>(&format!(
        "{BRANCH_RUNS_SQL} WHERE j.id = $1 AND {ON_A_BRANCH_SQL}"
    ))
    .bind(job_id)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(()) };
    let key = key(&row, &mut HashMap::new())?;
    let rows: Vec<(&Key, &str, Vec<f64>)> = metrics
        .iter()
        .map(|(name, value)| (&key, name.as_str(), vec![*value]))
        .collect();
    upsert(tx, &rows).await
}

/// Runs [`rebuild`] if migration 0014 asked for it and it has not run yet.
pub async fn backfill_pending(db: &Db) -> Result<()> {
    let pending: Option<String> =
        sqlx::query_scalar("SELECT name FROM pending_backfills WHERE name = $1")
            .bind(BACKFILL)
            .fetch_optional(db.read())
            .await?;
    if pending.is_some() {
        let rows = rebuild(db).await?;
        tracing::info!(rows, "metric summaries backfilled from the stored results");
    }
    Ok(())
}

/// Recomputes every summary from the finished branch runs' results, in one
/// write transaction; returns the rows written. For a store nothing
/// uploads to meanwhile (at migration, after seeding): an upload between
/// its read and its commit could be counted twice.
pub async fn rebuild(db: &Db) -> Result<usize> {
    let mut tx = db.begin().await?;
    let summaries = collect(&mut tx).await?;
    sqlx::query("DELETE FROM metric_summaries")
        .execute(&mut *tx)
        .await?;
    let rows: Vec<(&Key, &str, Vec<f64>)> = summaries
        .iter()
        .map(|((key, metric), values)| (key, metric.as_str(), values.clone()))
        .collect();
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        upsert(&mut tx, chunk).await?;
    }
    sqlx::query("DELETE FROM pending_backfills WHERE name = $1")
        .bind(BACKFILL)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(rows.len())
}

/// Every finished branch run's values, per key and metric.
async fn collect(conn: &mut AnyConnection) -> Result<BTreeMap<(Key, String), Vec<f64>>> {
    let rows = sqlx::query_as::<_, FinishedRun>(&format!(
        "SELECT k.*, res.id AS result_id, res.metrics FROM ({BRANCH_RUNS_SQL} \
             WHERE {ON_A_BRANCH_SQL} AND j.state = 'finished') k \
         JOIN results res ON res.job_id = k.job_id"
    ))
    .fetch_all(&mut *conn)
    .await?;
    let mut labels = HashMap::new();
    let mut out: BTreeMap<(Key, String), Vec<f64>> = BTreeMap::new();
    for row in rows {
        let key = key(&row.run, &mut labels)?;
        for (name, value) in row.metrics.0 {
            out.entry((key.clone(), name)).or_default().push(value);
        }
    }
    Ok(out)
}

/// A row of [`BRANCH_RUNS_SQL`]'s key; `labels` caches each atomic job's
/// label, parsed from its spec once.
fn key(row: &BranchRun, labels: &mut HashMap<i64, String>) -> Result<Key> {
    let atomic_job_id = row.atomic_job_id;
    let job = match labels.get(&atomic_job_id) {
        Some(label) => label.clone(),
        None => {
            let spec = parse_spec(atomic_job_id, &row.spec)?;
            let label = job_label(Some(&spec));
            labels.insert(atomic_job_id, label.clone());
            label
        }
    };
    Ok(Key {
        repo_id: row.repo_id,
        branch: row.branch.clone(),
        tbox_group: row.tbox_group.clone(),
        job,
        commit_id: row.commit_id,
    })
}

/// Adds `values` to each (key, metric)'s row, creating it if new. Only
/// appends and widens, so concurrent uploads to one row both count
/// (PostgreSQL's ON CONFLICT DO UPDATE locks the row it updates). Each
/// (key, metric) at most once per call.
async fn upsert(tx: &mut Tx, rows: &[(&Key, &str, Vec<f64>)]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let placeholders = db::value_rows(rows.len(), 10);
    let sql = format!(
        "INSERT INTO metric_summaries AS m (repo_id, branch, tbox_group, job, metric, \
             commit_id, runs, low, high, run_values) VALUES {placeholders} \
         ON CONFLICT (repo_id, branch, tbox_group, commit_id, job, metric) DO UPDATE SET \
             runs = m.runs + excluded.runs, \
             low = CASE WHEN excluded.low < m.low THEN excluded.low ELSE m.low END, \
             high = CASE WHEN excluded.high > m.high THEN excluded.high ELSE m.high END, \
             run_values = m.run_values || ',' || excluded.run_values"
    );
    let mut query = sqlx::query(&sql);
    for (key, metric, values) in rows {
        let (low, high) = values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(*v), b.max(*v))
            });
        query = query
            .bind(key.repo_id)
            .bind(key.branch.clone())
            .bind(key.tbox_group.clone())
            .bind(key.job.clone())
            .bind(metric.to_string())
            .bind(key.commit_id)
            .bind(values.len() as i64)
            .bind(low)
            .bind(high)
            .bind(format_values(values));
    }
    query.execute(&mut **tx).await?;
    Ok(())
}

/// `run_values` as stored: Rust prints the shortest decimal that parses
/// back to the same double.
fn format_values(values: &[f64]) -> String {
    values
        .iter()
        .map(f64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A row's `run_values` back as numbers.
pub fn parse_values(stored: &str) -> Result<Vec<f64>> {
    stored
        .split(',')
        .map(|v| {
            v.parse::<f64>()
                .map_err(|e| anyhow::anyhow!("stored run value {v:?} is not a number: {e}").into())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_exactly() {
        let values = [0.1 + 0.2, -1e-300, 1e300, 12345.678, 0.0, f64::MIN_POSITIVE];
        let parsed = parse_values(&format_values(&values)).expect("parses");
        assert_eq!(parsed, values);
        assert!(parse_values("1,x").is_err());
    }
}
