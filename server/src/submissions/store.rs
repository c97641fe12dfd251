//! SQL for submissions and what hangs off them (jobs, events, results,
//! comparisons), as the user API and the dashboard read them.

use std::collections::{BTreeMap, HashMap};

use kbot_api::agent::JobState;
use kbot_core::job::{AtomicJob, Skipped};

use crate::db::{Db, JsonOrDefault, JsonText, Tx};
use crate::error::{Error, Result};
use crate::jobs::{Origin, SubmissionState};
use crate::repos::{commit_by_id, commits_by_ids, StoredCommit};
use kbot_api::submissions::{
    ComparisonView, EventView, JobCounts, JobView, MeasuredBy, RunResult, Side, SubmissionKind,
    SubmissionStatus, SubmissionView, Verdict,
};

/// A `submissions` row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SubmissionRow {
    pub id: i64,
    pub user_name: String,
    pub repo_name: String,
    pub job_name: String,
    pub job_file: String,
    /// The jobs the plan left out (migration 0008).
    pub skipped: JsonText<Vec<Skipped>>,
    pub base_commit_id: i64,
    pub head_commit_id: i64,
    pub priority: i64,
    pub runs_cap: i64,
    #[sqlx(try_from = "String")]
    pub state: SubmissionState,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    #[sqlx(try_from = "String")]
    pub kind: SubmissionKind,
}

pub(crate) struct NewSubmission<'a> {
    pub user_id: i64,
    /// Who queued it and why; its kind follows.
    pub origin: Origin,
    /// Whether a regression verdict starts a bisection.
    pub bisect: bool,
    pub watch_id: Option<i64>,
    /// The branch a robot's pair is on (migration 0027).
    pub branch: Option<&'a str>,
    pub repo_id: i64,
    pub job_name: String,
    pub job_file: &'a str,
    pub skipped: JsonText<&'a [Skipped]>,
    pub base_commit_id: i64,
    pub head_commit_id: i64,
    pub priority: i64,
    pub runs_cap: i64,
    pub created_at: i64,
}

pub(crate) async fn insert_submission(tx: &mut Tx, s: &NewSubmission<'_>) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "INSERT INTO submissions (user_id, repo_id, job_name, job_file, base_commit_id, \
             head_commit_id, priority, runs_cap, state, created_at, kind, bisect, watch_id, \
             skipped, branch, origin) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
         RETURNING id",
    )
    .bind(s.user_id)
    .bind(s.repo_id)
    .bind(&s.job_name)
    .bind(s.job_file)
    .bind(s.base_commit_id)
    .bind(s.head_commit_id)
    .bind(s.priority)
    .bind(s.runs_cap)
    .bind(SubmissionState::Active.as_str())
    .bind(s.created_at)
    .bind(s.origin.kind().as_str())
    .bind(i64::from(s.bisect))
    .bind(s.watch_id)
    .bind(&s.skipped)
    .bind(s.branch)
    .bind(s.origin.as_str())
    .fetch_one(&mut **tx)
    .await?)
}

const SUBMISSION_SELECT: &str = "SELECT s.id, u.name AS user_name, r.name AS repo_name, \
     s.job_name, s.job_file, s.base_commit_id, s.head_commit_id, s.priority, s.runs_cap, \
     s.state, s.created_at, s.finished_at, s.kind, s.skipped \
     FROM submissions s JOIN users u ON u.id = s.user_id JOIN repos r ON r.id = s.repo_id";

pub async fn get_submission(db: &Db, id: i64) -> Result<SubmissionRow> {
    sqlx::query_as::<_, SubmissionRow>(&format!("{SUBMISSION_SELECT} WHERE s.id = $1"))
        .bind(id)
        .fetch_optional(db.read())
        .await?
        .ok_or_else(|| Error::not_found("submission", id))
}

/// Newest first.
pub async fn list_submissions(
    db: &Db,
    limit: u32,
    before: Option<i64>,
) -> Result<Vec<SubmissionView>> {
    let rows = sqlx::query_as::<_, SubmissionRow>(&format!(
        "{SUBMISSION_SELECT} WHERE s.id < $1 ORDER BY s.id DESC LIMIT $2"
    ))
    .bind(before.unwrap_or(i64::MAX))
    .bind(i64::from(limit.clamp(1, 500)))
    .fetch_all(db.read())
    .await?;
    // Three queries for the page, not three per listed pair.
    let ids: Vec<i64> = rows.iter().map(|s| s.id).collect();
    let commit_ids: Vec<i64> = rows
        .iter()
        .flat_map(|s| [s.base_commit_id, s.head_commit_id])
        .collect();
    let commits = commits_by_ids(db.read(), &commit_ids).await?;
    let mut counts = job_counts_of(db, &ids).await?;
    let commit = |id: i64| {
        commits
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::not_found("commit", id))
    };
    rows.into_iter()
        .map(|s| {
            let (base, head) = (commit(s.base_commit_id)?, commit(s.head_commit_id)?);
            let jobs = counts.remove(&s.id).unwrap_or_default();
            Ok(view_of(s, base, head, jobs))
        })
        .collect()
}

pub async fn submission_view(db: &Db, id: i64) -> Result<SubmissionView> {
    let s = get_submission(db, id).await?;
    let base = commit_by_id(db.read(), s.base_commit_id).await?;
    let head = commit_by_id(db.read(), s.head_commit_id).await?;
    let jobs = job_counts_of(db, &[id])
        .await?
        .remove(&id)
        .unwrap_or_default();
    Ok(view_of(s, base, head, jobs))
}

fn view_of(
    s: SubmissionRow,
    base: StoredCommit,
    head: StoredCommit,
    jobs: JobCounts,
) -> SubmissionView {
    SubmissionView {
        id: s.id,
        repo: s.repo_name,
        submitter: s.user_name,
        kind: s.kind,
        state: display_state(s.state, &jobs),
        base: base.view,
        head: head.view,
        priority: i32::try_from(s.priority).unwrap_or(0),
        max_runs: u32::try_from(s.runs_cap).unwrap_or(0),
        created_at: s.created_at,
        jobs,
        skipped: s.skipped.0,
    }
}

/// The stored state says `active` until the submission is settled; users
/// want to know whether anything has started yet.
fn display_state(stored: SubmissionState, jobs: &JobCounts) -> SubmissionStatus {
    match stored {
        SubmissionState::Done if jobs.finished == 0 && jobs.failed > 0 => SubmissionStatus::Failed,
        SubmissionState::Done => SubmissionStatus::Done,
        SubmissionState::Cancelled => SubmissionStatus::Cancelled,
        _ if jobs.active > 0 || jobs.finished > 0 || jobs.failed > 0 => SubmissionStatus::Running,
        _ => SubmissionStatus::Queued,
    }
}

/// Each of `submissions`' runs counted by state, in one query.
async fn job_counts_of(db: &Db, submissions: &[i64]) -> Result<HashMap<i64, JobCounts>> {
    if submissions.is_empty() {
        return Ok(HashMap::new());
    }
    let sql = format!(
        "SELECT submission_id, state, COUNT(*) AS n FROM jobs \
         WHERE submission_id IN ({}) GROUP BY submission_id, state",
        crate::db::placeholders(1, submissions.len())
    );
    let mut query = sqlx::query_as::<_, (i64, String, i64)>(&sql);
    for id in submissions {
        query = query.bind(id);
    }
    let mut out: HashMap<i64, JobCounts> = HashMap::new();
    for (submission, state, n) in query.fetch_all(db.read()).await? {
        let state = JobState::try_from(state).map_err(anyhow::Error::msg)?;
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        let counts = out.entry(submission).or_default();
        counts.total += n;
        match state {
            JobState::Queued => counts.queued += n,
            JobState::Finished => counts.finished += n,
            JobState::Failed => counts.failed += n,
            JobState::Cancelled => counts.cancelled += n,
            _ => counts.active += n,
        }
    }
    Ok(out)
}

pub(super) async fn atomic_jobs(db: &Db, submission_id: i64) -> Result<Vec<AtomicJob>> {
    let specs: Vec<JsonText<AtomicJob>> = sqlx::query_scalar(
        "SELECT spec FROM atomic_jobs WHERE submission_id = $1 ORDER BY position",
    )
    .bind(submission_id)
    .fetch_all(db.read())
    .await?;
    Ok(specs.into_iter().map(|JsonText(job)| job).collect())
}

/// A job as [`job_views`] reads it.
#[derive(sqlx::FromRow)]
struct JobViewRow {
    id: i64,
    position: i64,
    #[sqlx(try_from = "String")]
    side: Side,
    sha: String,
    run_index: i64,
    #[sqlx(try_from = "String")]
    state: JobState,
    attempts: i64,
    agent: Option<String>,
}

impl From<JobViewRow> for JobView {
    fn from(r: JobViewRow) -> JobView {
        JobView {
            id: r.id,
            job_index: to_u32(r.position),
            side: r.side,
            commit: r.sha,
            run_index: to_u32(r.run_index),
            state: r.state,
            attempts: to_u32(r.attempts),
            agent: r.agent,
        }
    }
}

/// Every job of a submission, atomic job by atomic job, in queue order.
pub async fn job_views(db: &Db, submission_id: i64) -> Result<Vec<JobView>> {
    let rows = sqlx::query_as::<_, JobViewRow>(
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
    Ok(rows.into_iter().map(JobView::from).collect())
}

/// Events of a submission's jobs with an id above `after`, oldest first.
pub async fn events(db: &Db, submission_id: i64, after: i64, limit: u32) -> Result<Vec<EventView>> {
    let rows: Vec<(i64, i64, String, String, i64)> = sqlx::query_as(
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
    rows.into_iter()
        .map(|(id, job_id, state, detail, at)| {
            Ok(EventView {
                id,
                job_id,
                state: JobState::try_from(state).map_err(anyhow::Error::msg)?,
                detail,
                at,
            })
        })
        .collect()
}

/// A finished run as [`run_results`] reads it.
#[derive(sqlx::FromRow)]
struct RunResultRow {
    job_id: i64,
    position: i64,
    #[sqlx(try_from = "String")]
    side: Side,
    sha: String,
    run_index: i64,
    metrics: JsonText<BTreeMap<String, f64>>,
    // A tuning map that does not parse is shown as empty, not as an error
    // of the whole results view.
    tuning: JsonOrDefault<BTreeMap<String, String>>,
    agent: Option<String>,
    backend: Option<String>,
    tbox_group: Option<String>,
    arch: Option<String>,
    page_size: Option<i64>,
}

impl From<RunResultRow> for RunResult {
    fn from(r: RunResultRow) -> RunResult {
        RunResult {
            job_id: r.job_id,
            job_index: to_u32(r.position),
            side: r.side,
            commit: r.sha,
            run_index: to_u32(r.run_index),
            metrics: r.metrics.0,
            agent: r.agent,
            backend: r.backend.and_then(|b| crate::auth::parse_backend(&b).ok()),
            tbox_group: r.tbox_group,
            arch: r.arch,
            page_size: r.page_size.and_then(|p| u64::try_from(p).ok()),
            tuning: r.tuning.0,
        }
    }
}

/// The metrics of every finished run of a submission.
pub async fn run_results(db: &Db, submission_id: i64) -> Result<Vec<RunResult>> {
    let rows = sqlx::query_as::<_, RunResultRow>(
        "SELECT j.id AS job_id, a.position, j.side, c.sha, j.run_index, \
                r.metrics, r.tuning, ag.name AS agent, ag.backend, ag.tbox_group, ag.arch, \
                ag.page_size \
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
    Ok(rows.into_iter().map(RunResult::from).collect())
}

/// A stored comparison as [`comparisons`] reads it.
#[derive(sqlx::FromRow)]
struct ComparisonRow {
    position: i64,
    metric: String,
    #[sqlx(try_from = "String")]
    verdict: Verdict,
    base_n: i64,
    head_n: i64,
    base_mean: Option<f64>,
    head_mean: Option<f64>,
    change_pct: Option<f64>,
    // A detail that does not parse is shown as null.
    detail: JsonOrDefault<serde_json::Value>,
    updated_at: i64,
}

/// The stored comparisons of a submission, atomic job by atomic job.
pub async fn comparisons(db: &Db, submission_id: i64) -> Result<Vec<ComparisonView>> {
    let rows = sqlx::query_as::<_, ComparisonRow>(
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
    Ok(rows
        .into_iter()
        .map(|row| {
            let boot = booted.get(&row.position);
            ComparisonView {
                job_index: to_u32(row.position),
                metric: row.metric,
                verdict: row.verdict,
                base_runs: to_u32(row.base_n),
                head_runs: to_u32(row.head_n),
                base_mean: row.base_mean,
                head_mean: row.head_mean,
                change_percent: row.change_pct,
                detail: row.detail.0,
                computed_at: row.updated_at,
                tests_the_commits: boot.is_some_and(|b| b.tests_the_commits()),
                boot_note: boot.and_then(|b| b.note()),
                measured_by: boot.and_then(|b| b.mode()).map(MeasuredBy::new),
            }
        })
        .collect())
}

fn to_u32(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(0)
}
