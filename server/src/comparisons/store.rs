//! SQL of the comparison worker: run counts and samples of an atomic job's
//! pair, the `comparisons` rows, and settling atomic jobs and submissions.

use std::collections::BTreeMap;

use kbot_api::agent::JobState;
use kbot_api::submissions::SubmissionKind;
use kbot_core::job::AtomicJob;
use kbot_core::stats::{Comparison, MetricComparison};
use sqlx::AnyConnection;

use crate::db::{Db, JsonText, NullableF64, Tx};
use crate::error::{Error, Result};
use crate::jobs::{Side, SubmissionState, ACTIVE_STATES_SQL};
use crate::time::now_ms;

/// The shape of an atomic job's runs; two equal counts mean nothing happened
/// in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunCounts {
    pub submission_active: bool,
    pub settled: bool,
    /// Jobs queued or held by an agent.
    pub pending: u32,
    pub base_total: u32,
    pub head_total: u32,
    pub base_finished: u32,
    pub head_finished: u32,
}

pub struct AtomicJobInfo {
    pub job: AtomicJob,
    pub submission_id: i64,
    pub base_commit_id: i64,
    pub head_commit_id: i64,
    pub runs_cap: u32,
}

/// Per side, one metric map per finished run.
pub struct SideRuns {
    pub base: Vec<BTreeMap<String, f64>>,
    pub head: Vec<BTreeMap<String, f64>>,
}

/// The submission an atomic job belongs to, as [`run_counts_on`] reads it.
#[derive(sqlx::FromRow)]
struct PairHead {
    #[sqlx(try_from = "String")]
    state: SubmissionState,
    #[sqlx(try_from = "String")]
    kind: SubmissionKind,
    settled_at: Option<i64>,
}

/// How many jobs of one side are in one state.
#[derive(sqlx::FromRow)]
struct SideCount {
    #[sqlx(try_from = "String")]
    side: Side,
    #[sqlx(try_from = "String")]
    state: JobState,
    n: i64,
}

pub async fn run_counts(db: &Db, atomic_job_id: i64) -> Result<RunCounts> {
    let mut conn = db.read().acquire().await?;
    run_counts_on(&mut conn, atomic_job_id).await
}

pub async fn run_counts_tx(tx: &mut Tx, atomic_job_id: i64) -> Result<RunCounts> {
    run_counts_on(tx, atomic_job_id).await
}

async fn run_counts_on(conn: &mut AnyConnection, atomic_job_id: i64) -> Result<RunCounts> {
    let head = sqlx::query_as::<_, PairHead>(
        "SELECT s.state, s.kind, a.settled_at FROM atomic_jobs a \
         JOIN submissions s ON s.id = a.submission_id WHERE a.id = $1",
    )
    .bind(atomic_job_id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or_else(|| Error::not_found("atomic job", atomic_job_id))?;
    let mut counts = RunCounts {
        // A bisection judges its own probe runs (crate::bisect).
        submission_active: head.state == SubmissionState::Active
            && head.kind != SubmissionKind::Bisect,
        settled: head.settled_at.is_some(),
        ..RunCounts::default()
    };
    let rows = sqlx::query_as::<_, SideCount>(
        "SELECT side, state, COUNT(*) AS n FROM jobs WHERE atomic_job_id = $1 GROUP BY side, state",
    )
    .bind(atomic_job_id)
    .fetch_all(&mut *conn)
    .await?;
    for row in rows {
        let n = u32::try_from(row.n).unwrap_or(u32::MAX);
        let base = row.side == Side::Base;
        if base {
            counts.base_total += n;
        } else {
            counts.head_total += n;
        }
        match row.state {
            JobState::Finished if base => counts.base_finished += n,
            JobState::Finished => counts.head_finished += n,
            JobState::Failed | JobState::Cancelled => {}
            _ => counts.pending += n,
        }
    }
    Ok(counts)
}

/// [`AtomicJobInfo`] as stored.
#[derive(sqlx::FromRow)]
struct AtomicJobRecord {
    spec: String,
    submission_id: i64,
    base_commit_id: i64,
    head_commit_id: i64,
    runs_cap: i64,
}

pub async fn atomic_job_info(db: &Db, atomic_job_id: i64) -> Result<AtomicJobInfo> {
    let row = sqlx::query_as::<_, AtomicJobRecord>(
        "SELECT a.spec, a.submission_id, s.base_commit_id, s.head_commit_id, s.runs_cap \
         FROM atomic_jobs a JOIN submissions s ON s.id = a.submission_id WHERE a.id = $1",
    )
    .bind(atomic_job_id)
    .fetch_optional(db.read())
    .await?
    .ok_or_else(|| Error::not_found("atomic job", atomic_job_id))?;
    Ok(AtomicJobInfo {
        job: crate::jobs::parse_spec(atomic_job_id, &row.spec)?,
        submission_id: row.submission_id,
        base_commit_id: row.base_commit_id,
        head_commit_id: row.head_commit_id,
        runs_cap: u32::try_from(row.runs_cap).unwrap_or(0),
    })
}

pub async fn finished_runs(db: &Db, atomic_job_id: i64) -> Result<SideRuns> {
    let rows: Vec<(String, JsonText<BTreeMap<String, f64>>)> = sqlx::query_as(
        "SELECT j.side, r.metrics \
         FROM jobs j JOIN results r ON r.job_id = j.id \
         WHERE j.atomic_job_id = $1 AND j.state = 'finished' \
         ORDER BY r.id",
    )
    .bind(atomic_job_id)
    .fetch_all(db.read())
    .await?;
    let mut runs = SideRuns {
        base: Vec::new(),
        head: Vec::new(),
    };
    for (side, JsonText(metrics)) in rows {
        if side == Side::Base.as_str() {
            runs.base.push(metrics);
        } else {
            runs.head.push(metrics);
        }
    }
    Ok(runs)
}

/// Locks the atomic job's row for this transaction (PostgreSQL; SQLite's
/// single writer already serialises). False when another replica holds it.
pub async fn lock_atomic_job(tx: &mut Tx, db: &Db, atomic_job_id: i64) -> Result<bool> {
    let lock = db.skip_locked("atomic_jobs");
    let row = sqlx::query(&format!("SELECT id FROM atomic_jobs WHERE id = $1{lock}"))
        .bind(atomic_job_id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.is_some())
}

pub async fn upsert_comparisons(
    tx: &mut Tx,
    submission_id: i64,
    atomic_job_id: i64,
    comparison: &Comparison,
) -> Result<()> {
    let now = now_ms();
    for m in &comparison.metrics {
        upsert_metric(tx, submission_id, atomic_job_id, m, now).await?;
    }
    Ok(())
}

async fn upsert_metric(
    tx: &mut Tx,
    submission_id: i64,
    atomic_job_id: i64,
    m: &MetricComparison,
    now: i64,
) -> Result<()> {
    // serde_json writes NaN as null, which is what the API shows for
    // undefined ratios.
    sqlx::query(
        "INSERT INTO comparisons (submission_id, atomic_job_id, metric, verdict, change_pct, \
             base_n, head_n, base_mean, head_mean, base_stddev, head_stddev, p_value, detail, \
             created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
         ON CONFLICT (atomic_job_id, metric) DO UPDATE SET verdict = excluded.verdict, \
             change_pct = excluded.change_pct, base_n = excluded.base_n, \
             head_n = excluded.head_n, base_mean = excluded.base_mean, \
             head_mean = excluded.head_mean, base_stddev = excluded.base_stddev, \
             head_stddev = excluded.head_stddev, p_value = excluded.p_value, \
             detail = excluded.detail, updated_at = excluded.updated_at",
    )
    .bind(submission_id)
    .bind(atomic_job_id)
    .bind(&m.metric)
    .bind(m.kbot.outcome.as_str())
    .bind(NullableF64::finite(m.change))
    .bind(i64::try_from(m.base.n).unwrap_or(i64::MAX))
    .bind(i64::try_from(m.head.n).unwrap_or(i64::MAX))
    .bind(NullableF64::finite(m.base.mean))
    .bind(NullableF64::finite(m.head.mean))
    .bind(NullableF64::finite(m.base.stddev))
    .bind(NullableF64::finite(m.head.stddev))
    .bind(NullableF64::finite(m.kbot.p_value))
    .bind(JsonText(m))
    .bind(now)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Unsettled atomic jobs of active submissions with nothing queued or running.
pub async fn settled_candidates(db: &Db) -> Result<Vec<i64>> {
    Ok(sqlx::query_scalar(&format!(
        "SELECT a.id FROM atomic_jobs a JOIN submissions s ON s.id = a.submission_id \
         WHERE s.state = 'active' AND s.kind <> 'bisect' AND a.settled_at IS NULL AND NOT EXISTS \
             (SELECT 1 FROM jobs j WHERE j.atomic_job_id = a.id \
              AND (j.state = 'queued' OR j.state IN {ACTIVE_STATES_SQL})) \
         ORDER BY a.id LIMIT 1000"
    ))
    .fetch_all(db.read())
    .await?)
}

pub async fn atomic_job_ids(db: &Db, submission_id: i64) -> Result<Vec<i64>> {
    Ok(
        sqlx::query_scalar("SELECT id FROM atomic_jobs WHERE submission_id = $1 ORDER BY position")
            .bind(submission_id)
            .fetch_all(db.read())
            .await?,
    )
}
