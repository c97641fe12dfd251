//! Comparisons: once every queued run of an atomic job's pair is in, compare
//! the base and head samples with [`kbot_core::stats`], store one row per
//! metric, and either ask for more runs (an `unknown` verdict, up to the
//! submission's cap) or settle the atomic job. A submission whose jobs are
//! all settled becomes `done`.
//!
//! [`spawn_worker`] drives this from the result-upload broadcast
//! ([`crate::state::AppState::job_done`]) and from a periodic re-scan, which
//! also catches pairs completed by failures and work other replicas left.

mod backends;
pub mod kpi_result;
pub use backends::{booted_commits, booted_commits_by_position, BootedCommits};
mod store;
// The dashboard's comparison page plots the runs the verdicts were drawn on.
pub use store::{finished_runs, SideRuns};

use std::time::Duration;

use futures::future::BoxFuture;
use kbot_core::job::AtomicJob;
use kbot_core::stats::{self, Comparison, Outcome, StatsConfig};
use kbot_core::table::{self, RowFilter, TableInput};
use tokio::sync::broadcast::{self, error::RecvError};

use crate::db::Tx;
use crate::error::Result;
use crate::jobs;
use crate::repos::{commit_by_id, StoredCommit};
use crate::state::{AppState, JobDone};
use crate::worker::{self, Pace, Woken, Worker};

/// How often the worker re-scans active submissions for settled pairs.
const RESCAN_INTERVAL: Duration = Duration::from_secs(10);

/// What [`evaluate`] did with an atomic job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evaluation {
    /// Runs are still queued or running.
    Pending,
    /// Compared; this many more runs per side were queued.
    MoreRuns(u32),
    /// Compared (or impossible to compare: a side has no finished run) and
    /// final.
    Settled,
    /// The submission was cancelled or is already done.
    Inactive,
}

/// An atomic job's comparison, computed from the stored samples.
#[derive(Debug, Clone)]
pub struct PairComparison {
    pub atomic_job_id: i64,
    pub job: AtomicJob,
    pub base: StoredCommit,
    pub head: StoredCommit,
    pub comparison: Comparison,
}

impl PairComparison {
    /// The 0-day compare block of this pair (all metrics, KPIs first).
    pub fn table(&self) -> String {
        let input = TableInput::from_comparison(
            self.job.axes(),
            self.base.commit_ref(),
            self.head.commit_ref(),
            &self.comparison,
            RowFilter::All,
        );
        table::render(&input)
    }
}

/// The statistics settings for a submission whose cap is `runs_cap` runs
/// per side: the documented defaults, with the cap from the submission.
pub fn stats_config(runs_cap: u32) -> StatsConfig {
    let defaults = StatsConfig::default();
    // `StatsConfig::validate` wants 2 <= min_runs <= max_runs.
    let max_runs = (runs_cap as usize).max(2);
    StatsConfig {
        min_runs: defaults.min_runs.min(max_runs),
        max_runs,
        ..defaults
    }
}

/// The one call into the statistics: compares the finished runs of an atomic
/// job's pair. `None` when a side has no finished run.
pub async fn compare_pair(state: &AppState, atomic_job_id: i64) -> Result<Option<PairComparison>> {
    let info = store::atomic_job_info(&state.db, atomic_job_id).await?;
    let runs = store::finished_runs(&state.db, atomic_job_id).await?;
    if runs.base.is_empty() || runs.head.is_empty() {
        return Ok(None);
    }
    let cfg = stats_config(info.runs_cap);
    let kpis = info.job.kpi.clone();
    let comparison = tokio::task::spawn_blocking(move || {
        stats::compare_job_runs(&runs.base, &runs.head, &kpis, &cfg)
    })
    .await
    .map_err(|e| anyhow::anyhow!("comparison task failed: {e}"))??;
    Ok(Some(PairComparison {
        atomic_job_id,
        job: info.job,
        base: commit_by_id(state.db.read(), info.base_commit_id).await?,
        head: commit_by_id(state.db.read(), info.head_commit_id).await?,
        comparison,
    }))
}

/// Compares an atomic job's pair if all its runs are in, stores the result,
/// and queues more runs or settles it.
pub async fn evaluate(
    state: &AppState,
    atomic_job_id: i64,
    on_settled: OnSettled,
) -> Result<Evaluation> {
    let before = store::run_counts(&state.db, atomic_job_id).await?;
    if !before.submission_active {
        return Ok(Evaluation::Inactive);
    }
    if before.settled {
        return Ok(Evaluation::Settled);
    }
    if before.pending > 0 {
        return Ok(Evaluation::Pending);
    }
    let compared = compare_pair(state, atomic_job_id).await?;
    let info = store::atomic_job_info(&state.db, atomic_job_id).await?;
    let booted = match &compared {
        Some(_) => Some(booted_commits(&state.db, atomic_job_id).await?),
        None => None,
    };
    let head_patch_id = match &compared {
        Some(pc)
            if pc
                .comparison
                .acting()
                .any(|m| m.kbot.outcome == Outcome::Different) =>
        {
            head_patch_id(state, pc).await
        }
        _ => None,
    };

    let mut tx = state.db.begin().await?;
    // Another replica may be doing the same: whoever locks the row decides.
    if !store::lock_atomic_job(&mut tx, &state.db, atomic_job_id).await? {
        return Ok(Evaluation::Pending);
    }
    let now = store::run_counts_tx(&mut tx, atomic_job_id).await?;
    if now != before {
        // Runs arrived, or another worker settled it, while we computed; the
        // next event or re-scan looks again.
        return Ok(Evaluation::Pending);
    }
    let mut extra = 0;
    if let Some(pc) = &compared {
        store::upsert_comparisons(&mut tx, info.submission_id, atomic_job_id, &pc.comparison)
            .await?;
        extra = extra_runs(
            &pc.comparison,
            &stats_config(info.runs_cap),
            &now,
            info.job.runs,
            info.runs_cap,
        );
    }
    if extra > 0 {
        jobs::enqueue_more_runs(&mut tx, atomic_job_id, extra, state.config.max_attempts).await?;
    } else {
        crate::jobs::lifecycle::settle(&mut tx, info.submission_id, atomic_job_id).await?;
        if let (Some(pc), Some(booted)) = (&compared, &booted) {
            // Same transaction: the report or bisection exists if and only
            // if the verdict is recorded.
            let settled = Settled {
                submission_id: info.submission_id,
                pc,
                booted,
                head_patch_id: head_patch_id.as_deref(),
            };
            on_settled(&mut tx, state, &settled).await?;
        }
    }
    tx.commit().await?;
    if extra > 0 {
        state.wake_lessees();
        tracing::info!(
            atomic_job_id,
            extra,
            "more runs queued for an undecided pair"
        );
        Ok(Evaluation::MoreRuns(extra))
    } else {
        tracing::info!(atomic_job_id, compared = compared.is_some(), "pair settled");
        Ok(Evaluation::Settled)
    }
}

/// The pair head's `git patch-id` ([`crate::repos::patch_id`]).
async fn head_patch_id(state: &AppState, pc: &PairComparison) -> Option<String> {
    let repo = match crate::repos::repo_by_id(&state.db, pc.head.repo_id).await {
        Ok(repo) => repo,
        Err(e) => {
            tracing::warn!(sha = %pc.head.sha, error = %e, "no repository for the patch-id");
            return None;
        }
    };
    crate::repos::patch_id(state, &repo.name, &pc.head.sha).await
}

/// Runs per side to add: what the statistics want, and, unless the pair is
/// exact (decided by 2 identical runs a side), what is missing of the job
/// file's `requested` runs (the first batch is smaller, see
/// `submissions::expand::FIRST_BATCH`); bounded so that no side ever has
/// more than `runs_cap` jobs (failed ones count, so a commit that never
/// builds cannot loop).
fn extra_runs(
    comparison: &Comparison,
    cfg: &StatsConfig,
    counts: &store::RunCounts,
    requested: u32,
    runs_cap: u32,
) -> u32 {
    let wanted = comparison.runs_wanted(cfg);
    let wanted = u32::try_from(wanted.base.max(wanted.head)).unwrap_or(u32::MAX);
    let queued = counts.base_total.max(counts.head_total);
    let missing = if comparison.exact() {
        0
    } else {
        requested.saturating_sub(queued)
    };
    wanted.max(missing).min(runs_cap.saturating_sub(queued))
}

/// What a settled pair leads to, decided by a feature after this one (a
/// bisection, or a report), in the transaction that records its verdict:
/// the bisection or report exists if and only if the verdict is recorded.
/// The server passes `bisect::on_pair_settled` (see `server.rs`).
pub type OnSettled =
    for<'a> fn(&'a mut Tx, &'a AppState, &'a Settled<'a>) -> BoxFuture<'a, Result<()>>;

/// What the feature that queued a submission does once it ended (done or
/// cancelled), told once by this worker in a transaction of its own. The
/// server passes `robot::ended`, which goes by the submission's
/// [`jobs::Origin`]: no feature asks whether its pairs ended.
pub type OnEnded = for<'a> fn(&'a AppState, i64, jobs::Origin) -> BoxFuture<'a, Result<()>>;

/// A pair whose verdict is being recorded, as [`OnSettled`] gets it.
pub struct Settled<'a> {
    pub submission_id: i64,
    pub pc: &'a PairComparison,
    pub booted: &'a BootedCommits,
    /// The head's `git patch-id` when a KPI the job acts on changed: the
    /// same change on another commit is the same culprit. Read before the
    /// transaction (git never runs inside one).
    pub head_patch_id: Option<&'a str>,
}

/// Starts the comparison worker; it runs until the server shuts down.
pub fn spawn_worker(
    state: AppState,
    on_settled: OnSettled,
    on_ended: OnEnded,
) -> tokio::task::JoinHandle<()> {
    // Subscribe before returning, so no upload after start-up is missed.
    let done = state.job_done.subscribe();
    let shutdown = state.shutdown.clone();
    let worker = Comparer {
        state,
        done,
        on_settled,
        on_ended,
    };
    tokio::spawn(worker::run(worker, shutdown, Pace::Every(RESCAN_INTERVAL)))
}

/// The comparison worker: an upload evaluates its pair (and the others
/// already waiting), a tick or a lagging receiver re-scans; then the
/// submissions that ended are told to their origins.
struct Comparer {
    state: AppState,
    done: broadcast::Receiver<JobDone>,
    on_settled: OnSettled,
    on_ended: OnEnded,
}

/// What woke the comparison worker.
enum Upload {
    /// The atomic job of a stored result.
    Stored(i64),
    /// Missed some uploads: the re-scan covers them.
    Lagged,
    /// A submission was cancelled.
    Ended,
}

impl Worker for Comparer {
    type Event = Upload;

    async fn event(&mut self) -> Option<Upload> {
        tokio::select! {
            upload = self.done.recv() => match upload {
                Ok(job) => Some(Upload::Stored(job.atomic_job_id)),
                Err(RecvError::Lagged(_)) => Some(Upload::Lagged),
                Err(RecvError::Closed) => None,
            },
            () = self.state.ended.notified() => Some(Upload::Ended),
        }
    }

    async fn pass(&mut self, woken: Woken<Upload>) {
        // Only a settled pair or a cancellation ends a submission; the
        // re-scans also catch what other replicas ended.
        let maybe_ended = match woken {
            Woken::Event(Upload::Stored(id)) => {
                evaluate_batch(&self.state, &mut self.done, id, self.on_settled).await
            }
            Woken::Event(Upload::Lagged) | Woken::Tick => {
                rescan(&self.state, self.on_settled).await;
                true
            }
            Woken::Event(Upload::Ended) => true,
        };
        if maybe_ended {
            tell_ended(&self.state, self.on_ended).await;
        }
    }
}

/// How long a replica holds an ended submission while its origin is told;
/// one that dies meanwhile leaves it to another after this.
const TELL_HOLD: Duration = Duration::from_secs(300);
/// When an origin that failed to take an ended submission is told again.
const TELL_RETRY: Duration = Duration::from_secs(30);
/// Ended submissions taken per query.
const TELL_BATCH: i64 = 64;

/// Tells every ended submission's origin that it ended, each once.
pub async fn tell_ended(state: &AppState, on_ended: OnEnded) {
    loop {
        let now = crate::time::now_ms();
        let due = match jobs::ended::due(&state.db, now, TELL_BATCH).await {
            Ok(due) => due,
            Err(e) => {
                tracing::error!(error = %crate::error::error_chain(&e), "listing ended submissions failed");
                return;
            }
        };
        let full = due.len() as i64 == TELL_BATCH;
        for e in due {
            if let Err(err) = tell(state, on_ended, &e, now).await {
                tracing::error!(submission = e.id, origin = %e.origin,
                    error = %crate::error::error_chain(&err), "telling an ended submission failed");
            }
        }
        if !full {
            return;
        }
    }
}

async fn tell(state: &AppState, on_ended: OnEnded, e: &jobs::ended::Ended, now: i64) -> Result<()> {
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let held_until = now + ms(TELL_HOLD);
    if !jobs::ended::hold(&state.db, e.id, e.dispatch_at, held_until).await? {
        return Ok(());
    }
    match on_ended(state, e.id, e.origin).await {
        Ok(()) => jobs::ended::told(&state.db, e.id).await,
        Err(err) => {
            jobs::ended::hold(&state.db, e.id, held_until, now + ms(TELL_RETRY)).await?;
            Err(err)
        }
    }
}

/// Evaluates `first` and every other atomic job whose upload is already
/// waiting in the channel, each once: under load many runs of the same pair
/// finish together, and one look after the last of them is enough. Whether
/// a pair settled (or a lagging receiver re-scanned).
async fn evaluate_batch(
    state: &AppState,
    done: &mut broadcast::Receiver<JobDone>,
    first: i64,
    on_settled: OnSettled,
) -> bool {
    let mut ids = std::collections::BTreeSet::from([first]);
    let mut lagged = false;
    loop {
        match done.try_recv() {
            Ok(job) => {
                ids.insert(job.atomic_job_id);
            }
            Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => lagged = true,
            Err(_) => break,
        }
    }
    let mut settled = false;
    for id in ids {
        let evaluation = evaluate(state, id, on_settled).await;
        settled |= matches!(evaluation, Ok(Evaluation::Settled));
        log_failure(evaluation, id);
    }
    if lagged {
        rescan(state, on_settled).await;
    }
    settled || lagged
}

/// Evaluates every atomic job of an active submission that has nothing
/// queued or running.
pub async fn rescan(state: &AppState, on_settled: OnSettled) {
    let candidates = match store::settled_candidates(&state.db).await {
        Ok(ids) => ids,
        Err(e) => {
            tracing::error!(error = %crate::error::error_chain(&e), "comparison re-scan failed");
            return;
        }
    };
    for id in candidates {
        log_failure(evaluate(state, id, on_settled).await, id);
    }
}

fn log_failure(result: Result<Evaluation>, atomic_job_id: i64) {
    if let Err(e) = result {
        tracing::error!(atomic_job_id, error = %crate::error::error_chain(&e), "comparison failed");
    }
}

/// The comparisons of every atomic job of a submission, recomputed from the
/// stored samples (cheap, and always consistent with them), for the
/// dashboard's tables.
pub async fn submission_tables(
    state: &AppState,
    submission_id: i64,
) -> Result<Vec<PairComparison>> {
    let mut out = Vec::new();
    for id in store::atomic_job_ids(&state.db, submission_id).await? {
        if let Some(pc) = compare_pair(state, id).await? {
            out.push(pc);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_config_follows_the_cap() {
        let cfg = stats_config(10);
        assert_eq!(cfg.max_runs, 10);
        assert!(cfg.validate().is_ok());
        let small = stats_config(3);
        assert_eq!((small.min_runs, small.max_runs), (3, 3));
        assert!(small.validate().is_ok());
        assert!(stats_config(0).validate().is_ok());
        assert!(stats_config(1).validate().is_ok());
    }
}
