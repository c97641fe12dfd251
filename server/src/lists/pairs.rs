//! A list's robot pairs: its job file, pinned to its tbox group, queued
//! as the robot for a series' tip or for one of its patches.

use kbot_core::job::AtomicJob;

use super::store::ListRow;
use crate::error::Result;
use crate::jobs::Origin;
use crate::repos::StoredCommit;
use crate::state::AppState;
use crate::submissions::{self, NewPair, Submitter};

/// The list's job file, pinned to its tbox group when it names one.
pub fn list_jobs(
    state: &AppState,
    l: &ListRow,
) -> Result<(Vec<AtomicJob>, Vec<kbot_core::job::Skipped>)> {
    let lkp_root = state.config.lkp_root.as_deref();
    let plan = submissions::parse_robot_job(&l.job_file, lkp_root, l.tbox_group.as_deref())?;
    Ok((plan.jobs, plan.skipped))
}

/// What a robot pair of a list is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Base against a series' tip: judged like a user's pair, bisected
    /// inside the series when it regresses.
    Series,
    /// Base against one patch, to see whether it builds ([`super::locate`]):
    /// one run, never reported by itself.
    BuildProbe,
}

/// Queues the list's jobs as a robot pair of `base` and `head`.
pub async fn queue(
    state: &AppState,
    tx: &mut crate::db::Tx,
    l: &ListRow,
    (base, head): (&StoredCommit, &StoredCommit),
    purpose: Purpose,
) -> Result<i64> {
    let (jobs, skipped) = list_jobs(state, l)?;
    let (origin, bisect, max_runs, branch) = match purpose {
        Purpose::Series => (
            Origin::Series,
            true,
            u32::try_from(l.runs_cap).unwrap_or(1),
            Some(l.branch.as_str()),
        ),
        Purpose::BuildProbe => (Origin::BuildProbe, false, 1, None),
    };
    submissions::queue_pair(
        state,
        tx,
        NewPair {
            by: Submitter::Robot,
            repo_id: l.repo_id,
            job_file: &l.job_file,
            atomic_jobs: &jobs,
            skipped: &skipped,
            base,
            head,
            // Below users' and watches' pairs: anyone can post to a list.
            priority: i64::from(state.config.lists.priority),
            max_runs,
            origin,
            bisect,
            watch_id: None,
            branch,
        },
    )
    .await
}
