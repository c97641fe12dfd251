//! Submissions: a job file for a base/head commit pair (or one commit against
//! its first parent), expanded into atomic jobs × {base, head} × runs and
//! queued through [`crate::jobs`]; listed, followed, cancelled, and read back
//! with their results and comparisons.

pub mod expand;
pub mod kcidb;
pub mod kcidb_send;
pub mod pages;
pub mod routes;
mod store;
pub mod waiting;

use std::collections::HashMap;
use std::path::Path;

use kbot_core::job::{plan_job_file, AtomicJob, JobPlan, Skipped};
use kbot_core::lkp::{IncludeDir, IncludeSource, NoIncludes};

pub use store::{
    comparisons, events, get_submission, job_views, list_submissions, run_results, SubmissionRow,
};
pub(crate) use store::{insert_submission, NewSubmission};

use crate::auth::UserAuth;
use crate::comparisons::kpi_result::{kpi_results, ResultLine};
use crate::db::Db;
use crate::error::{Error, Result};
use crate::jobs::{self, Pair};
use crate::repos::{self, StoredCommit};
use crate::state::AppState;
use crate::time::now_ms;
use kbot_api::submissions::{SubmissionDetail, SubmissionResults, SubmissionView, SubmitRequest};

/// The result line of each of `ids` (unknown ones left out), for pages that
/// list what a pair belongs to (series, watches, bisections).
pub async fn result_lines(db: &Db, ids: &[i64]) -> Result<HashMap<i64, ResultLine>> {
    let kpis = kpi_results(db, ids).await?;
    let mut lines = HashMap::new();
    for &id in ids {
        let view = match store::submission_view(db, id).await {
            Ok(view) => view,
            Err(Error::NotFound { .. }) => continue,
            Err(e) => return Err(e),
        };
        lines.insert(id, ResultLine::of_submission(&view, kpis.get(&id)));
    }
    Ok(lines)
}

/// Largest job file accepted: real LKP job files are a few hundred bytes; a
/// megabyte leaves room for generated matrices without inviting abuse.
pub const MAX_JOB_FILE_BYTES: usize = 1 << 20;

/// Validates and stores a submission and queues its jobs, all in one
/// transaction: either every job is queued or nothing is written.
pub async fn submit(
    state: &AppState,
    user: &UserAuth,
    req: SubmitRequest,
) -> Result<SubmissionView> {
    let plan = parse_job(&req.job_file, state.config.lkp_root.as_deref())?;
    let atomic_jobs = plan.jobs;
    let max_runs = max_runs(req.max_runs)?;
    let repo = repos::get_repo(&state.db, &req.repo).await?;
    let head = repos::resolve_commit(state, &repo, req.head.trim()).await?;
    let base = match req.base.as_deref().map(str::trim) {
        Some(base) => repos::resolve_commit(state, &repo, base).await?,
        None => parent_of(state, &repo, &head).await?,
    };
    if base.id == head.id {
        return Err(Error::BadRequest(format!(
            "base and head are the same commit {}",
            head.sha
        )));
    }
    let mut tx = state.db.begin().await?;
    let id = queue_pair(
        state,
        &mut tx,
        NewPair {
            by: Submitter::User(user.user_id),
            repo_id: repo.id,
            job_file: &req.job_file,
            atomic_jobs: &atomic_jobs,
            skipped: &plan.skipped,
            base: &base,
            head: &head,
            priority: i64::from(req.priority),
            max_runs,
            origin: jobs::Origin::User,
            bisect: req.bisect.unwrap_or(true),
            watch_id: None,
            branch: None,
        },
    )
    .await?;
    tx.commit().await?;
    state.wake_lessees();
    tracing::info!(
        submission = id,
        user = %user.user_name,
        repo = %repo.name,
        base = %base.sha,
        head = %head.sha,
        atomic_jobs = atomic_jobs.len(),
        skipped = plan.skipped.len(),
        "submission queued"
    );
    store::submission_view(&state.db, id).await
}

/// The user robot submissions are made as (watches, lists, rechecks).
pub const ROBOT_USER: &str = "kbot-robot";

/// Who a pair is queued for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Submitter {
    User(i64),
    /// [`ROBOT_USER`], made on first use.
    Robot,
}

/// A pair to queue: who asks, the job, the commits, and what its verdict
/// should start.
pub(crate) struct NewPair<'a> {
    pub by: Submitter,
    pub repo_id: i64,
    pub job_file: &'a str,
    pub atomic_jobs: &'a [AtomicJob],
    /// What the job file has that kbot does not run, shown with the submission.
    pub skipped: &'a [Skipped],
    pub base: &'a StoredCommit,
    pub head: &'a StoredCommit,
    pub priority: i64,
    pub max_runs: u32,
    pub origin: jobs::Origin,
    pub bisect: bool,
    pub watch_id: Option<i64>,
    /// The branch the pair was taken from (a watch's, a list's): its runs
    /// on it feed the branch's trend, both sides of a `watch` pair and the
    /// base side of others.
    pub branch: Option<&'a str>,
}

/// Stores a submission and queues its jobs in the caller's transaction; call
/// [`AppState::wake_lessees`] after committing. Returns the submission id.
pub(crate) async fn queue_pair(
    state: &AppState,
    tx: &mut crate::db::Tx,
    p: NewPair<'_>,
) -> Result<i64> {
    let user_id = match p.by {
        Submitter::User(id) => id,
        Submitter::Robot => crate::auth::upsert_user(tx, ROBOT_USER, None).await?,
    };
    let requested = p.atomic_jobs.iter().map(|j| j.runs).max().unwrap_or(1);
    let runs = expand::initial_runs(requested, p.max_runs);
    let id = store::insert_submission(
        tx,
        &store::NewSubmission {
            user_id,
            origin: p.origin,
            bisect: p.bisect,
            watch_id: p.watch_id,
            branch: p.branch,
            repo_id: p.repo_id,
            job_name: job_name(p.atomic_jobs),
            job_file: p.job_file,
            skipped: crate::db::JsonText(p.skipped),
            base_commit_id: p.base.id,
            head_commit_id: p.head.id,
            priority: p.priority,
            runs_cap: i64::from(p.max_runs),
            created_at: now_ms(),
        },
    )
    .await?;
    let pair = Pair {
        submission_id: id,
        base_commit_id: p.base.id,
        head_commit_id: p.head.id,
    };
    jobs::enqueue_pair(tx, pair, p.atomic_jobs, runs, state.config.max_attempts).await?;
    Ok(id)
}

/// A robot's job file (a watch's, a list's), planned as [`parse_job`]
/// does, each atomic job pinned to the source's tbox group when it names one.
pub fn parse_robot_job(
    text: &str,
    lkp_root: Option<&Path>,
    tbox_group: Option<&str>,
) -> Result<JobPlan> {
    let mut plan = parse_job(text, lkp_root)?;
    if let Some(group) = tbox_group {
        for job in &mut plan.jobs {
            job.tbox_group = Some(group.to_owned());
        }
    }
    Ok(plan)
}

/// Plans the job file, includes resolved against `lkp_root`; every problem
/// names the culprit (line, key, option, missing include), and a file is
/// refused only when nothing in it can run.
pub fn parse_job(text: &str, lkp_root: Option<&Path>) -> Result<JobPlan> {
    if text.len() > MAX_JOB_FILE_BYTES {
        return Err(Error::BadRequest(format!(
            "job file is {} bytes; the limit is {MAX_JOB_FILE_BYTES}",
            text.len()
        )));
    }
    let includes: Box<dyn IncludeSource> = match lkp_root {
        Some(root) => Box::new(IncludeDir::new(root)),
        None => Box::new(NoIncludes),
    };
    let plan = plan_job_file(text, includes.as_ref())?;
    if plan.jobs.is_empty() {
        return Err(Error::BadRequest(
            "the job file expands into no atomic job".into(),
        ));
    }
    Ok(plan)
}

pub(crate) fn max_runs(requested: Option<u32>) -> Result<u32> {
    match requested {
        None => Ok(expand::DEFAULT_MAX_RUNS),
        Some(n) if (1..=expand::MAX_RUNS_LIMIT).contains(&n) => Ok(n),
        Some(n) => Err(Error::BadRequest(format!(
            "max_runs {n} must be between 1 and {}",
            expand::MAX_RUNS_LIMIT
        ))),
    }
}

/// The submission's display name: its testcase(s), as LKP names job files.
pub(crate) fn job_name(jobs: &[AtomicJob]) -> String {
    let mut names: Vec<&str> = jobs.iter().map(|j| j.testcase.as_str()).collect();
    names.dedup();
    names.join("+")
}

pub(crate) async fn parent_of(
    state: &AppState,
    repo: &repos::RepoRow,
    head: &StoredCommit,
) -> Result<StoredCommit> {
    let Some(parent) = head.view.parents.first() else {
        return Err(Error::BadRequest(format!(
            "commit {} has no parent: give a base commit",
            head.sha
        )));
    };
    repos::resolve_commit(state, repo, parent).await
}

/// Cancels a submission's unfinished jobs; agents running one stop at their
/// next heartbeat.
pub async fn cancel(state: &AppState, user: &UserAuth, id: i64) -> Result<SubmissionView> {
    let mut tx = state.db.begin().await?;
    let cancelled = jobs::lifecycle::cancel_submission(
        &mut tx,
        id,
        &format!("cancelled by {}", user.user_name),
    )
    .await?;
    tx.commit().await?;
    state.submission_ended();
    tracing::info!(submission = id, user = %user.user_name, jobs = cancelled, "submission cancelled");
    store::submission_view(&state.db, id).await
}

pub async fn detail(state: &AppState, id: i64) -> Result<SubmissionDetail> {
    let submission = store::submission_view(&state.db, id).await?;
    let row = store::get_submission(&state.db, id).await?;
    let atomic_jobs = store::atomic_jobs(&state.db, id).await?;
    Ok(SubmissionDetail {
        submission,
        job_file: row.job_file,
        atomic_jobs,
        jobs: store::job_views(&state.db, id).await?,
        waiting: waiting::waiting_jobs(&state.db, id).await?,
    })
}

pub async fn results(state: &AppState, id: i64) -> Result<SubmissionResults> {
    Ok(SubmissionResults {
        submission: store::submission_view(&state.db, id).await?,
        runs: store::run_results(&state.db, id).await?,
        comparisons: store::comparisons(&state.db, id).await?,
    })
}

pub use store::submission_view as view;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_runs_defaults_and_bounds() {
        assert_eq!(max_runs(None).ok(), Some(expand::DEFAULT_MAX_RUNS));
        assert_eq!(max_runs(Some(4)).ok(), Some(4));
        assert!(max_runs(Some(0)).is_err());
        assert!(max_runs(Some(expand::MAX_RUNS_LIMIT + 1)).is_err());
    }

    #[test]
    fn oversized_and_empty_job_files_are_refused() {
        let big = "#".repeat(MAX_JOB_FILE_BYTES + 1);
        assert!(matches!(parse_job(&big, None), Err(Error::BadRequest(_))));
        assert!(parse_job("", None).is_err());
    }
}
