//! The samples a bisection judges by: the bisected metric's values at the
//! range's ends and the probe runs at each tested commit.

use std::collections::HashMap;

use super::store::{self, BisectionRow, CommitRuns};
use crate::error::Result;
use crate::state::AppState;

/// The samples of the bisected metric at the range's ends and the probe runs
/// at each commit.
pub(super) struct Samples {
    pub(super) good: Vec<f64>,
    pub(super) bad: Vec<f64>,
    pub(super) probes: HashMap<i64, CommitRuns>,
}

impl Samples {
    /// A bisection without its probe job yet has only its ends' samples.
    pub(super) async fn load(state: &AppState, b: &BisectionRow) -> Result<Samples> {
        let origin = store::runs_by_commit(&state.db, &[b.origin_atomic_job_id]).await?;
        let probes = match b.probe_atomic_job_id {
            Some(probe_job) => store::runs_by_commit(&state.db, &[probe_job]).await?,
            None => HashMap::new(),
        };
        let values = |commit_id: i64| -> Vec<f64> {
            [origin.get(&commit_id), probes.get(&commit_id)]
                .into_iter()
                .flatten()
                .flat_map(|runs| metric_values(runs, &b.metric))
                .collect()
        };
        Ok(Samples {
            good: values(b.good_commit_id),
            bad: values(b.bad_commit_id),
            probes,
        })
    }

    /// The runs an end of the range has: its values, and its runs in the
    /// probe job still pending or failed (so an end whose runs fail is not
    /// asked again without bound).
    pub(super) fn end_runs(&self, b: &BisectionRow, commit_id: i64) -> u32 {
        let values = if commit_id == b.good_commit_id {
            self.good.len()
        } else {
            self.bad.len()
        };
        let unfinished = self
            .probes
            .get(&commit_id)
            .map_or(0, |r| r.pending + r.failed);
        u32::try_from(values).unwrap_or(u32::MAX) + unfinished
    }

    /// An end of `b`'s range has fewer runs than `cap`.
    pub(super) fn ends_below(&self, b: &BisectionRow, cap: u32) -> bool {
        [b.good_commit_id, b.bad_commit_id]
            .iter()
            .any(|&end| self.end_runs(b, end) < cap)
    }

    /// Runs of an end of `b`'s range are still pending in the probe job.
    pub(super) fn ends_pending(&self, b: &BisectionRow) -> bool {
        [b.good_commit_id, b.bad_commit_id]
            .iter()
            .any(|end| self.probes.get(end).is_some_and(|r| r.pending > 0))
    }
}

pub(super) fn metric_values(runs: &CommitRuns, metric: &str) -> Vec<f64> {
    runs.finished
        .iter()
        .filter_map(|m| m.get(metric).copied())
        .collect()
}
