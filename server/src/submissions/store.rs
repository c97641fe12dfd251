//! SQL for submissions and what hangs off them (jobs, events, results,
//! comparisons), as the user API and the dashboard read them.

use kbot_core::job::{AtomicJob, Skipped};
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::db::{Db, Tx};
use crate::error::{Error, Result};
use crate::jobs::results::parse_metrics;
use crate::repos::commit_by_id;
use kbot_api::submissions::{
    ComparisonView, EventView, JobCounts, JobView, RunResult, SubmissionView,
};

/// A `submissions` row.
#[derive(Debug, Clone)]
pub struct SubmissionRow {
    pub id: i64,
    pub user_name: String,
    pub repo_name: String,
    pub job_name: String,
    pub job_file: String,
    /// JSON list of [`Skipped`] (migration 0008).
    pub skipped: String,
    pub base_commit_id: i64,
    pub head_commit_id: i64,
    pub priority: i64,
    pub runs_cap: i64,
    pub state: String,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub kind: String,
}

pub(crate) struct NewSubmission<'a> {
    pub user_id: i64,
    /// `user`, `watch`, `bisect` or `verify` (see migration 0007).
    pub kind: &'static str,
    /// Whether a regression verdict starts a bisection.
    pub bisect: bool,
    pub watch_id: Option<i64>,
    pub repo_id: i64,
    pub job_name: String,
    pub job_file: &'a str,
    pub skipped: String,
    pub base_commit_id: i64,
    pub head_commit_id: i64,
    pub priority: i64,
    pub runs_cap: i64,
    pub created_at: i64,
}

pub(crate) async fn insert_submission(tx: &mut Tx, s: &NewSubmission<'_>) -> Result<i64> {
    let row = sqlx::query(
        "INSERT INTO submissions (user_id, repo_id, job_name, job_file, base_commit_id, \
             head_commit_id, priority, runs_cap, state, created_at, kind, bisect, watch_id, \
             skipped) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'active', $9, $10, $11, $12, $13) RETURNING id",
    )
    .bind(s.user_id)
    .bind(s.repo_id)
    .bind(&s.job_name)
    .bind(s.job_file)
    .bind(s.base_commit_id)
    .bind(s.head_commit_id)
    .bind(s.priority)
    .bind(s.runs_cap)
    .bind(s.created_at)
    .bind(s.kind)
    .bind(i64::from(s.bisect))
    .bind(s.watch_id)
    .bind(&s.skipped)
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.try_get("id")?)
}

const SUBMISSION_SELECT: &str = "SELECT s.id, u.name AS user_name, r.name AS repo_name, \
     s.job_name, s.job_file, s.base_commit_id, s.head_commit_id, s.priority, s.runs_cap, \
     s.state, s.created_at, s.finished_at, s.kind, s.skipped \
     FROM submissions s JOIN users u ON u.id = s.user_id JOIN repos r ON r.id = s.repo_id";

impl SubmissionRow {
    fn from_row(row: &AnyRow) -> Result<SubmissionRow> {
        Ok(SubmissionRow {
            id: row.try_get("id")?,
            user_name: row.try_get("user_name")?,
            repo_name: row.try_get("repo_name")?,
            job_name: row.try_get("job_name")?,
            job_file: row.try_get("job_file")?,
            skipped: row.try_get("skipped")?,
            base_commit_id: row.try_get("base_commit_id")?,
            head_commit_id: row.try_get("head_commit_id")?,
            priority: row.try_get("priority")?,
            runs_cap: row.try_get("runs_cap")?,
            state: row.try_get("state")?,
            created_at: row.try_get("created_at")?,
            finished_at: row.try_get("finished_at")?,
            kind: row.try_get("kind")?,
        })
    }
}

pub async fn get_submission(db: &Db, id: i64) -> Result<SubmissionRow> {
    let row = sqlx::query(&format!("{SUBMISSION_SELECT} WHERE s.id = $1"))
        .bind(id)
        .fetch_optional(db.read())
        .await?
        .ok_or_else(|| Error::not_found("submission", id))?;
    SubmissionRow::from_row(&row)
}

/// Newest first.
pub async fn list_submissions(
    db: &Db,
    limit: u32,
    before: Option<i64>,
) -> Result<Vec<SubmissionView>> {
    let rows = sqlx::query(&format!(
        "{SUBMISSION_SELECT} WHERE s.id < $1 ORDER BY s.id DESC LIMIT $2"
    ))
    .bind(before.unwrap_or(i64::MAX))
    .bind(i64::from(limit.clamp(1, 500)))
    .fetch_all(db.read())
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        out.push(view_of(db, SubmissionRow::from_row(row)?).await?);
    }
    Ok(out)
}

pub async fn submission_view(db: &Db, id: i64) -> Result<SubmissionView> {
    view_of(db, get_submission(db, id).await?).await
}

async fn view_of(db: &Db, s: SubmissionRow) -> Result<SubmissionView> {
    let base = commit_by_id(db.read(), s.base_commit_id).await?;
    let head = commit_by_id(db.read(), s.head_commit_id).await?;
    let jobs = job_counts(db, s.id).await?;
    let skipped: Vec<Skipped> = serde_json::from_str(&s.skipped).map_err(|e| {
        Error::Other(anyhow::anyhow!(
            "stored skipped jobs are not valid JSON: {e}"
        ))
    })?;
    Ok(SubmissionView {
        id: s.id,
        repo: s.repo_name,
        submitter: s.user_name,
        kind: s.kind,
        state: display_state(&s.state, &jobs).to_owned(),
        base: base.view,
        head: head.view,
        priority: i32::try_from(s.priority).unwrap_or(0),
        max_runs: u32::try_from(s.runs_cap).unwrap_or(0),
        created_at: s.created_at,
        jobs,
        skipped,
    })
}

/// The stored state says `active` until the submission is settled; users
/// want to know whether anything has started yet.
fn display_state(stored: &str, jobs: &JobCounts) -> &'static str {
    match stored {
        "done" if jobs.finished == 0 && jobs.failed > 0 => "failed",
        "done" => "done",
        "cancelled" => "cancelled",
        _ if jobs.active > 0 || jobs.finished > 0 || jobs.failed > 0 => "running",
        _ => "queued",
    }
}

async fn job_counts(db: &Db, submission_id: i64) -> Result<JobCounts> {
    let rows = sqlx::query(
        "SELECT state, COUNT(*) AS n FROM jobs WHERE submission_id = $1 GROUP BY state",
    )
    .bind(submission_id)
    .fetch_all(db.read())
    .await?;
    let mut counts = JobCounts::default();
    for row in &rows {
        let state: String = row.try_get("state")?;
        let n = u32::try_from(row.try_get::<i64, _>("n")?).unwrap_or(u32::MAX);
        counts.total += n;
        match state.as_str() {
            "queued" => counts.queued += n,
            "finished" => counts.finished += n,
            "failed" => counts.failed += n,
            "cancelled" => counts.cancelled += n,
            _ => counts.active += n,
        }
    }
    Ok(counts)
}

pub(super) async fn atomic_jobs(db: &Db, submission_id: i64) -> Result<Vec<AtomicJob>> {
    let rows =
        sqlx::query("SELECT spec FROM atomic_jobs WHERE submission_id = $1 ORDER BY position")
            .bind(submission_id)
            .fetch_all(db.read())
            .await?;
    rows.iter()
        .map(|row| {
            let spec: String = row.try_get("spec")?;
            serde_json::from_str(&spec).map_err(|e| {
                Error::Other(anyhow::anyhow!("stored atomic job is not valid JSON: {e}"))
            })
        })
        .collect()
}

/// Every job of a submission, atomic job by atomic job, in queue order.
pub async fn job_views(db: &Db, submission_id: i64) -> Result<Vec<JobView>> {
    let rows = sqlx::query(
        "SELECT j.id, a.position, j.side, c.sha, j.run_index, j.state, j.attempts, \
                ag.name AS agent \
         FROM jobs j \
         JOIN atomic_jobs a ON a.id = j.atomic_job_id \
         JOIN commits c ON c.id = j.commit_id \
         LEFT JOIN results r ON r.job_id = j.id \
         LEFT JOIN agents ag ON ag.id = COALESCE(r.agent_id, j.lease_owner) \
         WHERE j.submission_id = $1 \
         ORDER BY a.position, j.seq",
    )
    .bind(submission_id)
    .fetch_all(db.read())
    .await?;
    rows.iter()
        .map(|row| {
            Ok(JobView {
                id: row.try_get("id")?,
                job_index: to_u32(row.try_get("position")?),
                side: row.try_get("side")?,
                commit: row.try_get("sha")?,
                run_index: to_u32(row.try_get("run_index")?),
                state: row.try_get("state")?,
                attempts: to_u32(row.try_get("attempts")?),
                agent: row.try_get("agent")?,
            })
        })
        .collect()
}

/// Events of a submission's jobs with an id above `after`, oldest first.
pub async fn events(db: &Db, submission_id: i64, after: i64, limit: u32) -> Result<Vec<EventView>> {
    let rows = sqlx::query(
        "SELECT e.id, e.job_id, e.state, e.detail, e.at \
         FROM job_events e JOIN jobs j ON j.id = e.job_id \
         WHERE j.submission_id = $1 AND e.id > $2 \
         ORDER BY e.id LIMIT $3",
    )
    .bind(submission_id)
    .bind(after)
    .bind(i64::from(limit.clamp(1, 5000)))
    .fetch_all(db.read())
    .await?;
    rows.iter()
        .map(|row| {
            Ok(EventView {
                id: row.try_get("id")?,
                job_id: row.try_get("job_id")?,
                state: row.try_get("state")?,
                detail: row.try_get("detail")?,
                at: row.try_get("at")?,
            })
        })
        .collect()
}

/// The metrics of every finished run of a submission.
pub async fn run_results(db: &Db, submission_id: i64) -> Result<Vec<RunResult>> {
    let rows = sqlx::query(
        "SELECT r.id AS result_id, j.id AS job_id, a.position, j.side, c.sha, j.run_index, \
                r.metrics, r.tuning, ag.name AS agent, ag.tbox_group, ag.arch, ag.page_size \
         FROM results r \
         JOIN jobs j ON j.id = r.job_id \
         JOIN atomic_jobs a ON a.id = j.atomic_job_id \
         JOIN commits c ON c.id = j.commit_id \
         LEFT JOIN agents ag ON ag.id = r.agent_id \
         WHERE j.submission_id = $1 \
         ORDER BY a.position, j.seq, r.id",
    )
    .bind(submission_id)
    .fetch_all(db.read())
    .await?;
    rows.iter()
        .map(|row| {
            let result_id: i64 = row.try_get("result_id")?;
            let metrics: String = row.try_get("metrics")?;
            Ok(RunResult {
                job_id: row.try_get("job_id")?,
                job_index: to_u32(row.try_get("position")?),
                side: row.try_get("side")?,
                commit: row.try_get("sha")?,
                run_index: to_u32(row.try_get("run_index")?),
                metrics: parse_metrics(result_id, &metrics)?,
                agent: row.try_get("agent")?,
                tbox_group: row.try_get("tbox_group")?,
                arch: row.try_get("arch")?,
                page_size: row
                    .try_get::<Option<i64>, _>("page_size")?
                    .and_then(|p| u64::try_from(p).ok()),
                // A tuning map that does not parse is shown as empty, not
                // as an error of the whole results view.
                tuning: serde_json::from_str(&row.try_get::<String, _>("tuning")?)
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// The stored comparisons of a submission, atomic job by atomic job.
pub async fn comparisons(db: &Db, submission_id: i64) -> Result<Vec<ComparisonView>> {
    let rows = sqlx::query(
        "SELECT a.position, c.metric, c.verdict, c.base_n, c.head_n, c.base_mean, c.head_mean, \
                c.change_pct, c.detail, c.updated_at \
         FROM comparisons c JOIN atomic_jobs a ON a.id = c.atomic_job_id \
         WHERE c.submission_id = $1 \
         ORDER BY a.position, c.id",
    )
    .bind(submission_id)
    .fetch_all(db.read())
    .await?;
    let booted = crate::comparisons::booted_commits_by_position(db, submission_id).await?;
    rows.iter()
        .map(|row| {
            let detail: String = row.try_get("detail")?;
            let position: i64 = row.try_get("position")?;
            let boot = booted.get(&position);
            Ok(ComparisonView {
                job_index: to_u32(position),
                metric: row.try_get("metric")?,
                verdict: row.try_get("verdict")?,
                base_runs: to_u32(row.try_get("base_n")?),
                head_runs: to_u32(row.try_get("head_n")?),
                base_mean: row.try_get("base_mean")?,
                head_mean: row.try_get("head_mean")?,
                change_percent: row.try_get("change_pct")?,
                detail: serde_json::from_str(&detail).unwrap_or(serde_json::Value::Null),
                computed_at: row.try_get("updated_at")?,
                tests_the_commits: boot.is_some_and(|b| b.tests_the_commits()),
                boot_note: boot.and_then(|b| b.note()),
            })
        })
        .collect()
}

fn to_u32(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(0)
}
