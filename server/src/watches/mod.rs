//! Watches: branches the robot follows without anybody picking pairs.
//!
//! The worker ([`spawn_worker`]) fetches a watched repo's mirror every
//! interval (never inside a request) and tests each new branch head against
//! the last head that built, booted and ran, the first head against its
//! parent, as 0-day does. One watch pair runs at a time; heads that arrive
//! meanwhile are covered by the next pair's range, and a regression there is
//! bisected ([`crate::bisect`]). A head none of whose runs finished (it does
//! not build or boot) is recorded and not used as a base.

pub mod pages;
pub mod routes;
mod store;

use std::time::Duration;

use crate::auth::UserAuth;
use crate::error::{Error, Result};
use crate::jobs::SubmissionState;
use crate::repos::{self, RepoRow};
use crate::state::AppState;
use crate::submissions::{self, NewPair, Submitter};
use crate::time::now_ms;
use crate::worker::{self, Pace, Woken, Worker};
use kbot_api::watches::{WatchCreate, WatchDetail, WatchEventKind, WatchView};
use store::WatchRow;

/// How often the worker looks for due watches.
const TICK: Duration = Duration::from_secs(1);

/// Default and bounds of a watch's fetch interval.
pub const DEFAULT_INTERVAL_SECS: u32 = 600;
pub const MAX_INTERVAL_SECS: u32 = 7 * 24 * 3600;

/// Most events shown with a watch.
const EVENTS_SHOWN: i64 = 200;

pub async fn create(state: &AppState, user: &UserAuth, req: WatchCreate) -> Result<WatchView> {
    let atomic_jobs = submissions::parse_job(&req.job_file, state.config.lkp_root.as_deref())?.jobs;
    let max_runs = submissions::max_runs(req.max_runs)?;
    let interval = req.interval_secs.unwrap_or(DEFAULT_INTERVAL_SECS);
    if !(1..=MAX_INTERVAL_SECS).contains(&interval) {
        return Err(Error::BadRequest(format!(
            "interval_secs {interval} must be between 1 and {MAX_INTERVAL_SECS}"
        )));
    }
    let repo = repos::get_repo(&state.db, &req.repo).await?;
    let branch = req.branch.trim();
    // The branch must exist now; a typo is refused here, not found later.
    repos::resolve_commit(state, &repo, branch).await?;
    let tbox_group = req
        .tbox_group
        .as_deref()
        .map(str::trim)
        .filter(|g| !g.is_empty());
    let id = store::insert(
        &state.db,
        &store::NewWatch {
            repo_id: repo.id,
            branch,
            job_name: &submissions::job_name(&atomic_jobs),
            job_file: &req.job_file,
            tbox_group,
            interval_secs: i64::from(interval),
            runs_cap: i64::from(max_runs),
            user_id: user.user_id,
        },
    )
    .await?;
    tracing::info!(watch = id, repo = %repo.name, branch, user = %user.user_name, "watch added");
    Ok(store::get(&state.db, id).await?.view())
}

pub async fn list(state: &AppState) -> Result<Vec<WatchView>> {
    Ok(store::list(&state.db)
        .await?
        .iter()
        .map(WatchRow::view)
        .collect())
}

pub async fn detail(state: &AppState, id: i64) -> Result<WatchDetail> {
    Ok(WatchDetail {
        watch: store::get(&state.db, id).await?.view(),
        events: store::events(&state.db, id, EVENTS_SHOWN).await?,
    })
}

pub async fn remove(state: &AppState, user: &UserAuth, id: i64) -> Result<WatchView> {
    store::get(&state.db, id).await?;
    store::remove(&state.db, id, &user.user_name).await?;
    tracing::info!(watch = id, user = %user.user_name, "watch removed");
    Ok(store::get(&state.db, id).await?.view())
}

/// Starts the watch worker; it runs until the server shuts down.
pub fn spawn_worker(state: AppState) -> tokio::task::JoinHandle<()> {
    let shutdown = state.shutdown.clone();
    tokio::spawn(worker::run(Watcher(state), shutdown, Pace::Every(TICK)))
}

/// The watch worker: every [`TICK`], checks the watches that are due.
struct Watcher(AppState);

impl Worker for Watcher {
    type Event = ();

    async fn event(&mut self) -> Option<()> {
        std::future::pending().await
    }

    async fn pass(&mut self, _: Woken<()>) {
        check_due(&self.0).await;
    }
}

/// Checks every due watch once.
pub async fn check_due(state: &AppState) {
    let now = now_ms();
    let due: Vec<WatchRow> = match store::SCHEDULE.due(&state.db, now).await {
        Ok(due) => due,
        Err(e) => {
            tracing::error!(error = %crate::error::error_chain(&e), "listing due watches failed");
            return;
        }
    };
    for w in due {
        let claimed = match store::SCHEDULE
            .claim(&state.db, w.id, w.next_check_at, w.interval_secs, now)
            .await
        {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::error!(watch = w.id, error = %crate::error::error_chain(&e), "claiming a watch failed");
                continue;
            }
        };
        if claimed {
            if let Err(e) = check(state, &w).await {
                tracing::error!(watch = w.id, error = %crate::error::error_chain(&e), "watch check failed");
            }
        }
    }
}

/// One look at a watch with no pair running: fetch, submit a new head.
async fn check(state: &AppState, w: &WatchRow) -> Result<()> {
    if w.current_submission_id.is_some() {
        // One pair at a time; its end is told ([`pair_ended`]).
        return Ok(());
    }
    let repo = repos::repo_by_id(&state.db, w.repo_id).await?;
    let head_sha = match fetch_head(state, &repo, &w.branch).await {
        Ok(sha) => sha,
        Err(e) => {
            let why = crate::error::error_chain(&e);
            tracing::warn!(watch = w.id, error = %why, "watch fetch failed");
            return store::fetched(&state.db, w.id, Err(&why)).await;
        }
    };
    store::fetched(&state.db, w.id, Ok(&head_sha)).await?;
    if w.last_tested_sha.as_deref() == Some(head_sha.as_str()) {
        return Ok(());
    }
    submit_head(state, w, &repo, &head_sha, w.last_good_commit_id).await
}

/// A watch's pair ended (`robot::ended`): its head is the next base if it
/// ran, and the watch looks at its branch again at once.
pub async fn pair_ended(state: &AppState, submission_id: i64) -> Result<()> {
    let Some(w) = store::by_current_submission(&state.db, submission_id).await? else {
        // The watch was removed, or another replica was told first.
        return Ok(());
    };
    let outcome = store::pair_outcome(&state.db, submission_id).await?;
    let head = repos::commit_by_id(state.db.read(), outcome.head_commit_id).await?;
    let good = (outcome.head_finished > 0).then_some(head.id);
    let mut tx = state.db.begin().await?;
    if !store::pair_ended(&mut tx, w.id, submission_id, good, now_ms()).await? {
        return Ok(());
    }
    let (kind, detail) = match (&good, outcome.state) {
        (Some(_), _) => (
            WatchEventKind::Tested,
            format!(
                "head {} tested (submission {submission_id}); it is the next base",
                head.sha
            ),
        ),
        (None, SubmissionState::Cancelled) => (
            WatchEventKind::Cancelled,
            format!(
                "the pair of head {} was cancelled (submission {submission_id})",
                head.sha
            ),
        ),
        (None, _) => (
            WatchEventKind::HeadFailed,
            format!(
                "head {} did not run ({}; submission {submission_id}): not compared; the next \
                 head is compared against the last good one",
                head.sha,
                outcome.head_failure.as_deref().unwrap_or("no finished run")
            ),
        ),
    };
    store::event(&mut tx, w.id, kind, &detail).await?;
    tx.commit().await?;
    tracing::info!(
        watch = w.id,
        submission_id,
        kind = kind.as_str(),
        "watch pair ended"
    );
    Ok(())
}

/// Fetches the mirror and resolves the branch to its head's full sha.
async fn fetch_head(state: &AppState, repo: &RepoRow, branch: &str) -> Result<String> {
    repos::sync_mirror(state, repo).await?;
    Ok(repos::mirror_for(state, &repo.name).resolve(branch).await?)
}

/// Queues the new head against the last good head (or its parent).
async fn submit_head(
    state: &AppState,
    w: &WatchRow,
    repo: &RepoRow,
    head_sha: &str,
    last_good: Option<i64>,
) -> Result<()> {
    let head = repos::resolve_commit(state, repo, head_sha).await?;
    let base = match last_good {
        Some(id) => repos::commit_by_id(state.db.read(), id).await?,
        None => submissions::parent_of(state, repo, &head).await?,
    };
    if base.id == head.id {
        return Ok(());
    }
    let lkp_root = state.config.lkp_root.as_deref();
    let plan = submissions::parse_robot_job(&w.job_file, lkp_root, w.tbox_group.as_deref())?;
    let mut tx = state.db.begin().await?;
    let id = submissions::queue_pair(
        state,
        &mut tx,
        NewPair {
            by: Submitter::Robot,
            repo_id: repo.id,
            job_file: &w.job_file,
            atomic_jobs: &plan.jobs,
            skipped: &plan.skipped,
            base: &base,
            head: &head,
            priority: 0,
            max_runs: u32::try_from(w.runs_cap).unwrap_or(1),
            origin: crate::jobs::Origin::Watch,
            bisect: true,
            watch_id: Some(w.id),
            branch: Some(&w.branch),
        },
    )
    .await?;
    store::pair_started(&mut tx, w.id, id, head.id).await?;
    let detail = format!(
        "new head {} ({}) tested against {} (submission {id})",
        head.sha, head.view.subject, base.sha
    );
    store::event(&mut tx, w.id, WatchEventKind::Submitted, &detail).await?;
    tx.commit().await?;
    state.wake_lessees();
    tracing::info!(watch = w.id, submission = id, head = %head.sha, base = %base.sha, "watch submitted a new head");
    Ok(())
}
