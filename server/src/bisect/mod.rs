//! Bisection: from a regressed pair to its verified first bad commit.
//!
//! A pair that settles with a KPI `different` in the regression direction,
//! more than one commit apart, starts a bisection ([`start`], in the
//! comparison's transaction). The worker ([`spawn_worker`]) then steps it:
//! - each step tests a commit `git rev-list --bisect-all` picks (more than
//!   one at a time when the tbox group has several agents), with probe runs
//!   queued as ordinary jobs of a `bisect` submission pinned to the pair's
//!   tbox group;
//! - a tested commit is classified against both ends' samples
//!   ([`kbot_core::stats::bisect::classify`]): `unknown` queues more runs up
//!   to the cap, of the commit and of an end of the range sampled below the
//!   cap (a pair an exact clock decided at two runs per side leaves ends no
//!   rank test can decide against), then the commit is `undecided`; a
//!   commit none of whose runs
//!   finished (build or boot failure) is skipped like `git bisect skip`;
//! - when no candidate is left, the first bad commit is run again against
//!   its parent in a fresh `verify` pair; only a confirmed regression is
//!   reported, once per patch-id.
//!
//! Everything is in the database: a restarted server resumes where it was,
//! and replicas advance a bisection optimistically (`store::take`).
//!
//! By concept: [`start`] (from a settled pair to a bisection or a report),
//! `worker` (the loop that advances open bisections), `engine` (one step:
//! judge the tested commits, narrow the range, queue the next probes),
//! `verify` (the first bad commit against its parent, patch-id
//! de-duplication, the report), `samples` (the runs behind both), and
//! [`cancel`] here; `store` holds the rows, [`views`] and [`pages`] show
//! them.

mod engine;
pub mod pages;
pub mod routes;
mod samples;
mod start;
mod store;
mod verify;
pub mod views;
mod worker;

use crate::error::{Error, Result};
use crate::state::AppState;
pub use start::{adjacent, on_pair_settled, regressed_kpi, settled, start};
use store::Conclusion;
pub use store::{
    atomic_job_of, job_spec, started_from, steps, BisectionRow, BisectionState, StepRow,
};
pub use worker::{advance_all, spawn_worker};

/// Takes one bisection as far as the finished runs allow.
pub async fn advance(state: &AppState, id: i64) -> Result<()> {
    let b = store::get(&state.db, id).await?;
    match b.state {
        BisectionState::Running => engine::step(state, &b).await,
        BisectionState::Verifying => verify::check_verification(state, &b).await,
        _ => Ok(()),
    }
}

/// A bisection's verify pair ended (`robot::ended`): reports the first bad
/// commit if the pair confirms it.
pub async fn verify_ended(state: &AppState, submission_id: i64) -> Result<()> {
    match store::verifying_with(&state.db, submission_id).await? {
        Some(id) => advance(state, id).await,
        // Cancelled meanwhile, or another replica was told first.
        None => Ok(()),
    }
}

/// Cancels an open bisection and its queued runs.
pub async fn cancel(state: &AppState, id: i64, by: &str) -> Result<BisectionRow> {
    let b = store::get(&state.db, id).await?;
    if !b.state.is_open() {
        return Err(Error::Conflict(format!(
            "bisection {id} has already ended ({})",
            b.state
        )));
    }
    let mut tx = state.db.begin().await?;
    if !store::take(&mut tx, &b).await? {
        return Err(Error::Conflict(format!(
            "bisection {id} changed meanwhile; try again"
        )));
    }
    let reason = format!("cancelled by {by}");
    for sub in [b.probe_submission_id, b.verify_submission_id]
        .into_iter()
        .flatten()
    {
        crate::jobs::lifecycle::cancel_submission(&mut tx, sub, &reason).await?;
    }
    let conclusion = Conclusion {
        reason: Some(reason),
        ..Conclusion::ended(BisectionState::Cancelled)
    };
    store::conclude(&mut tx, &b, &conclusion).await?;
    tx.commit().await?;
    state.submission_ended();
    tracing::info!(bisection = id, by, "bisection cancelled");
    store::get(&state.db, id).await
}
