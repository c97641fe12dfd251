//! SQL of bisections: the rows, their steps, the probe runs and the ends'
//! samples.

use std::collections::{BTreeMap, HashMap};

use crate::jobs::Origin;
use kbot_api::agent::JobState;
use sqlx::AnyConnection;

use crate::db::{Db, JsonText, NullableF64, Tx};
use crate::error::{Error, Result};
use crate::jobs::SubmissionState;
use crate::regressions;
use crate::time::now_ms;

pub use kbot_api::bisections::{BisectionState, StepState};

/// A `bisections` row with its repo's name.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct BisectionRow {
    pub id: i64,
    pub repo_id: i64,
    pub repo_name: String,
    pub origin_submission_id: i64,
    pub origin_atomic_job_id: i64,
    pub probe_submission_id: Option<i64>,
    pub probe_atomic_job_id: Option<i64>,
    pub verify_submission_id: Option<i64>,
    pub good_commit_id: i64,
    pub bad_commit_id: i64,
    pub metric: String,
    pub tbox_group: String,
    pub job_key: String,
    #[sqlx(try_from = "String")]
    pub state: BisectionState,
    pub first_bad_commit_id: Option<i64>,
    pub patch_id: Option<String>,
    pub duplicate_of: Option<i64>,
    pub reason: Option<String>,
    pub remaining: String,
    pub runs_cap: i64,
    pub rev: i64,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

#[cfg(test)]
impl BisectionRow {
    /// A running bisection of `metric` between commits 1 (good) and 2
    /// (bad), probing into submission 2, for unit tests.
    pub fn for_test(metric: &str, runs_cap: i64) -> BisectionRow {
        BisectionRow {
            id: 1,
            repo_id: 1,
            repo_name: "linux".into(),
            origin_submission_id: 1,
            origin_atomic_job_id: 1,
            probe_submission_id: Some(2),
            probe_atomic_job_id: Some(2),
            verify_submission_id: None,
            good_commit_id: 1,
            bad_commit_id: 2,
            metric: metric.into(),
            tbox_group: "vm".into(),
            job_key: "k".into(),
            state: BisectionState::Running,
            first_bad_commit_id: None,
            patch_id: None,
            duplicate_of: None,
            reason: None,
            remaining: String::new(),
            runs_cap,
            rev: 0,
            created_at: 0,
            finished_at: None,
        }
    }
}

const BISECTION_SELECT: &str = "SELECT b.id, b.repo_id, r.name AS repo_name, \
     b.origin_submission_id, b.origin_atomic_job_id, b.probe_submission_id, \
     b.probe_atomic_job_id, b.verify_submission_id, b.good_commit_id, b.bad_commit_id, \
     b.metric, b.tbox_group, b.job_key, b.state, b.first_bad_commit_id, b.patch_id, \
     b.duplicate_of, b.reason, b.remaining, b.runs_cap, b.rev, b.created_at, b.finished_at \
     FROM bisections b JOIN repos r ON r.id = b.repo_id";

pub async fn get(db: &Db, id: i64) -> Result<BisectionRow> {
    sqlx::query_as::<_, BisectionRow>(&format!("{BISECTION_SELECT} WHERE b.id = $1"))
        .bind(id)
        .fetch_optional(db.read())
        .await?
        .ok_or_else(|| Error::not_found("bisection", id))
}

/// Newest first.
pub async fn list(db: &Db, limit: i64) -> Result<Vec<BisectionRow>> {
    Ok(sqlx::query_as::<_, BisectionRow>(&format!(
        "{BISECTION_SELECT} ORDER BY b.id DESC LIMIT $1"
    ))
    .bind(limit)
    .fetch_all(db.read())
    .await?)
}

/// The bisections started from submission `origin`, oldest first.
pub async fn started_from(db: &Db, origin: i64) -> Result<Vec<BisectionRow>> {
    Ok(sqlx::query_as::<_, BisectionRow>(&format!(
        "{BISECTION_SELECT} WHERE b.origin_submission_id = $1 ORDER BY b.id"
    ))
    .bind(origin)
    .fetch_all(db.read())
    .await?)
}

/// The bisections still stepping through probes (a verifying one waits for
/// its verify pair's end, `super::verify_ended`).
pub async fn running_ids(db: &Db) -> Result<Vec<i64>> {
    Ok(
        sqlx::query_scalar::<_, i64>("SELECT id FROM bisections WHERE state = $1 ORDER BY id")
            .bind(BisectionState::Running.as_str())
            .fetch_all(db.read())
            .await?,
    )
}

/// What a new bisection starts from.
pub struct NewBisection<'a> {
    pub repo_id: i64,
    pub origin_submission_id: i64,
    pub origin_atomic_job_id: i64,
    pub good_commit_id: i64,
    pub bad_commit_id: i64,
    pub metric: &'a str,
    pub tbox_group: &'a str,
    pub job_key: &'a str,
    pub dedup_key: &'a str,
    pub runs_cap: i64,
}

/// Inserts a bisection unless one with the same key is open; its id, or
/// `None` for a duplicate.
pub async fn insert(tx: &mut Tx, b: &NewBisection<'_>) -> Result<Option<i64>> {
    let id = sqlx::query_scalar::<_, i64>(
        "INSERT INTO bisections (repo_id, origin_submission_id, origin_atomic_job_id, \
             good_commit_id, bad_commit_id, metric, tbox_group, job_key, dedup_key, runs_cap, \
             created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT DO NOTHING RETURNING id",
    )
    .bind(b.repo_id)
    .bind(b.origin_submission_id)
    .bind(b.origin_atomic_job_id)
    .bind(b.good_commit_id)
    .bind(b.bad_commit_id)
    .bind(b.metric)
    .bind(b.tbox_group)
    .bind(b.job_key)
    .bind(b.dedup_key)
    .bind(b.runs_cap)
    .bind(now_ms())
    .fetch_optional(&mut **tx)
    .await?;
    Ok(id)
}

pub async fn set_probe(tx: &mut Tx, id: i64, submission_id: i64, atomic_job_id: i64) -> Result<()> {
    sqlx::query(
        "UPDATE bisections SET probe_submission_id = $1, probe_atomic_job_id = $2 WHERE id = $3",
    )
    .bind(submission_id)
    .bind(atomic_job_id)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Takes the right to change the bisection: true when nobody changed it
/// since it was read at `rev` in `state` (replicas advance optimistically).
pub async fn take(tx: &mut Tx, b: &BisectionRow) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE bisections SET rev = rev + 1 WHERE id = $1 AND rev = $2 AND state = $3",
    )
    .bind(b.id)
    .bind(b.rev)
    .bind(b.state.as_str())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn start_verifying(
    tx: &mut Tx,
    id: i64,
    first_bad_commit_id: i64,
    verify_submission_id: i64,
) -> Result<()> {
    sqlx::query(
        "UPDATE bisections SET state = $1, first_bad_commit_id = $2, \
             verify_submission_id = $3 WHERE id = $4",
    )
    .bind(BisectionState::Verifying.as_str())
    .bind(first_bad_commit_id)
    .bind(verify_submission_id)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    regressions::bisection_moved(tx, id, BisectionState::Verifying).await
}

/// How a bisection ended.
#[derive(Debug, Clone)]
pub struct Conclusion {
    pub state: BisectionState,
    pub reason: Option<String>,
    pub remaining: Vec<String>,
    pub patch_id: Option<String>,
    pub duplicate_of: Option<i64>,
}

impl Conclusion {
    /// An end in `state` with nothing more said yet.
    pub fn ended(state: BisectionState) -> Conclusion {
        Conclusion {
            state,
            reason: None,
            remaining: Vec::new(),
            patch_id: None,
            duplicate_of: None,
        }
    }
}

/// Ends a bisection; its probe submission is done (queued probes cancelled).
pub async fn conclude(tx: &mut Tx, b: &BisectionRow, c: &Conclusion) -> Result<()> {
    let now = now_ms();
    sqlx::query(
        "UPDATE bisections SET state = $1, reason = $2, remaining = $3, \
             patch_id = COALESCE($4, patch_id), duplicate_of = $5, finished_at = $6 \
         WHERE id = $7",
    )
    .bind(c.state.as_str())
    .bind(c.reason.as_deref())
    .bind(c.remaining.join(" "))
    .bind(c.patch_id.as_deref())
    .bind(c.duplicate_of)
    .bind(now)
    .bind(b.id)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE bisection_steps SET state = $1, finished_at = $2 \
         WHERE bisection_id = $3 AND state = $4",
    )
    .bind(StepState::Cancelled.as_str())
    .bind(now)
    .bind(b.id)
    .bind(StepState::Testing.as_str())
    .execute(&mut **tx)
    .await?;
    regressions::bisection_moved(tx, b.id, c.state).await
}

/// A bisection's step with its commit.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StepRow {
    pub id: i64,
    pub idx: i64,
    pub commit_id: i64,
    pub sha: String,
    pub subject: String,
    #[sqlx(try_from = "String")]
    pub state: StepState,
    pub change_pct: Option<f64>,
    pub detail: String,
    pub started_at: i64,
    pub finished_at: Option<i64>,
}

pub async fn steps(db: &Db, bisection_id: i64) -> Result<Vec<StepRow>> {
    Ok(sqlx::query_as::<_, StepRow>(
        "SELECT s.id, s.idx, s.commit_id, c.sha, c.subject, s.state, s.change_pct, s.detail, \
             s.started_at, s.finished_at \
         FROM bisection_steps s JOIN commits c ON c.id = s.commit_id \
         WHERE s.bisection_id = $1 ORDER BY s.idx",
    )
    .bind(bisection_id)
    .fetch_all(db.read())
    .await?)
}

pub async fn insert_step(tx: &mut Tx, bisection_id: i64, idx: i64, commit_id: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO bisection_steps (bisection_id, idx, commit_id, started_at) \
         VALUES ($1, $2, $3, $4)",
    )
    .bind(bisection_id)
    .bind(idx)
    .bind(commit_id)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn finish_step(
    tx: &mut Tx,
    step_id: i64,
    state: StepState,
    change_pct: Option<f64>,
    detail: &str,
) -> Result<()> {
    sqlx::query(
        "UPDATE bisection_steps SET state = $1, change_pct = $2, detail = $3, finished_at = $4 \
         WHERE id = $5",
    )
    .bind(state.as_str())
    .bind(NullableF64::from(change_pct))
    .bind(detail)
    .bind(now_ms())
    .bind(step_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The runs of one commit of an atomic job.
#[derive(Debug, Clone, Default)]
pub struct CommitRuns {
    pub pending: u32,
    pub failed: u32,
    /// The first failure's kind (`build_failed`, `boot_failed`, ...).
    pub failure: Option<String>,
    /// One metric map per finished run.
    pub finished: Vec<BTreeMap<String, f64>>,
}

impl CommitRuns {
    pub fn total(&self) -> u32 {
        self.pending + self.failed + u32::try_from(self.finished.len()).unwrap_or(u32::MAX)
    }
}

/// A run of an atomic job at a commit, with its result's metrics when it has one.
#[derive(sqlx::FromRow)]
struct RunRow {
    commit_id: i64,
    #[sqlx(try_from = "String")]
    state: JobState,
    failure: Option<String>,
    metrics: Option<JsonText<BTreeMap<String, f64>>>,
}

/// The runs of `atomic_job_ids` per commit (cancelled runs left out).
pub async fn runs_by_commit(db: &Db, atomic_job_ids: &[i64]) -> Result<HashMap<i64, CommitRuns>> {
    let mut out: HashMap<i64, CommitRuns> = HashMap::new();
    for &atomic_job_id in atomic_job_ids {
        let rows = sqlx::query_as::<_, RunRow>(
            "SELECT j.commit_id, j.state, j.failure, r.metrics \
             FROM jobs j LEFT JOIN results r ON r.job_id = j.id \
             WHERE j.atomic_job_id = $1 AND j.state <> 'cancelled' ORDER BY j.id",
        )
        .bind(atomic_job_id)
        .fetch_all(db.read())
        .await?;
        for row in rows {
            let runs = out.entry(row.commit_id).or_default();
            match row.state {
                JobState::Finished => {
                    if let Some(JsonText(metrics)) = row.metrics {
                        runs.finished.push(metrics);
                    }
                }
                JobState::Failed => {
                    runs.failed += 1;
                    if runs.failure.is_none() {
                        runs.failure = row.failure;
                    }
                }
                _ => runs.pending += 1,
            }
        }
    }
    Ok(out)
}

/// The verifying bisection whose verify pair is `submission_id`, if any.
pub async fn verifying_with(db: &Db, submission_id: i64) -> Result<Option<i64>> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM bisections WHERE verify_submission_id = $1 AND state = $2",
    )
    .bind(submission_id)
    .bind(BisectionState::Verifying.as_str())
    .fetch_optional(db.read())
    .await?)
}

/// What the origin pair's atomic job says about where and how it ran.
pub struct OriginJob {
    pub tbox_group: Option<String>,
    pub preferred_agent_id: Option<i64>,
    pub user_id: i64,
    pub priority: i64,
    pub job_file: String,
    /// What the pair was queued for: only some pairs report or bisect.
    pub origin: Origin,
    pub bisect: bool,
    pub runs_cap: i64,
}

/// [`OriginJob`] as stored (`bisect` is 0 or 1).
#[derive(sqlx::FromRow)]
struct OriginJobRow {
    tbox_group: Option<String>,
    preferred_agent_id: Option<i64>,
    user_id: i64,
    priority: i64,
    job_file: String,
    #[sqlx(try_from = "String")]
    origin: Origin,
    bisect: i64,
    runs_cap: i64,
}

impl From<OriginJobRow> for OriginJob {
    fn from(r: OriginJobRow) -> OriginJob {
        OriginJob {
            tbox_group: r.tbox_group,
            preferred_agent_id: r.preferred_agent_id,
            user_id: r.user_id,
            priority: r.priority,
            job_file: r.job_file,
            origin: r.origin,
            bisect: r.bisect != 0,
            runs_cap: r.runs_cap,
        }
    }
}

pub async fn origin_job(conn: &mut AnyConnection, atomic_job_id: i64) -> Result<OriginJob> {
    sqlx::query_as::<_, OriginJobRow>(
        "SELECT a.tbox_group, a.preferred_agent_id, s.user_id, s.priority, s.job_file, s.origin, \
             s.bisect, s.runs_cap FROM atomic_jobs a JOIN submissions s ON s.id = a.submission_id \
         WHERE a.id = $1",
    )
    .bind(atomic_job_id)
    .fetch_optional(&mut *conn)
    .await?
    .map(OriginJob::from)
    .ok_or_else(|| Error::not_found("atomic job", atomic_job_id))
}

/// The atomic job a probe runs.
pub async fn job_spec(db: &Db, atomic_job_id: i64) -> Result<kbot_core::job::AtomicJob> {
    let spec: String = sqlx::query_scalar("SELECT spec FROM atomic_jobs WHERE id = $1")
        .bind(atomic_job_id)
        .fetch_optional(db.read())
        .await?
        .ok_or_else(|| Error::not_found("atomic job", atomic_job_id))?;
    crate::jobs::parse_spec(atomic_job_id, &spec)
}

/// Agents of a tbox group that are not offline: how many probes can run at once.
pub async fn group_agents(db: &Db, tbox_group: &str) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT COUNT(*) AS n FROM agents WHERE tbox_group = $1 AND state <> 'offline'",
    )
    .bind(tbox_group)
    .fetch_one(db.read())
    .await?)
}

/// A submission's stored state.
pub async fn submission_state(db: &Db, submission_id: i64) -> Result<SubmissionState> {
    let state: String = sqlx::query_scalar("SELECT state FROM submissions WHERE id = $1")
        .bind(submission_id)
        .fetch_optional(db.read())
        .await?
        .ok_or_else(|| Error::not_found("submission", submission_id))?;
    SubmissionState::try_from(state).map_err(|e| anyhow::anyhow!(e).into())
}

pub async fn atomic_job_of(db: &Db, submission_id: i64) -> Result<i64> {
    sqlx::query_scalar(
        "SELECT id FROM atomic_jobs WHERE submission_id = $1 ORDER BY position LIMIT 1",
    )
    .bind(submission_id)
    .fetch_optional(db.read())
    .await?
    .ok_or_else(|| Error::not_found("atomic job of submission", submission_id))
}

/// An earlier bisection that reported the same patch on the same job,
/// metric and tbox group as `b` (on another group it is a section of the
/// same report, not a duplicate).
pub async fn reported_with_patch(db: &Db, patch_id: &str, b: &BisectionRow) -> Result<Option<i64>> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM bisections WHERE patch_id = $1 AND job_key = $2 AND metric = $3 \
         AND tbox_group = $4 AND state = $5 AND id <> $6 ORDER BY id LIMIT 1",
    )
    .bind(patch_id)
    .bind(&b.job_key)
    .bind(&b.metric)
    .bind(&b.tbox_group)
    .bind(BisectionState::Reported.as_str())
    .bind(b.id)
    .fetch_optional(db.read())
    .await?)
}

/// Builds (commits a kernel was needed for) and runs (finished or failed)
/// of the probe and verification submissions.
pub async fn effort(db: &Db, b: &BisectionRow) -> Result<(i64, i64)> {
    let ids = [b.probe_submission_id, b.verify_submission_id];
    let (builds, runs): (i64, Option<i64>) = sqlx::query_as(
        "SELECT COUNT(DISTINCT commit_id) AS builds, \
             SUM(CASE WHEN state IN ('finished', 'failed') THEN 1 ELSE 0 END) AS runs \
         FROM jobs WHERE submission_id IN ($1, $2) AND state <> 'cancelled'",
    )
    .bind(ids[0].unwrap_or(-1))
    .bind(ids[1].unwrap_or(-1))
    .fetch_one(db.read())
    .await?;
    Ok((builds, runs.unwrap_or(0)))
}

/// The report of a bisection's finding, if any: the one it wrote, or the
/// report of the same culprit it joined as a section. Its id, Message-ID
/// and outbox state.
pub async fn report_of(db: &Db, bisection_id: i64) -> Result<Option<(i64, String, String)>> {
    Ok(sqlx::query_as(
        "SELECT id, message_id, state FROM report_outbox WHERE bisection_id = $1 \
         OR id IN (SELECT report_id FROM regressions WHERE bisection_id = $2) \
         ORDER BY id LIMIT 1",
    )
    .bind(bisection_id)
    .bind(bisection_id)
    .fetch_optional(db.read())
    .await?)
}
