//! Wire types of bisections, shared by the REST handlers and the CLI.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::repos::CommitView;

crate::wire_enum! {
    /// Where a bisection is.
    pub enum BisectionState {
        /// Probing commits of the range.
        Running = "running",
        /// The first bad commit against its parent, a fresh pair.
        Verifying = "verifying",
        /// Verified and reported (or joined a report of the same culprit).
        Reported = "reported",
        /// Another bisection's report covers the same patch.
        Duplicate = "duplicate",
        /// The fresh pair did not show the change again.
        NotConfirmed = "not_confirmed",
        /// No single first bad commit: see `remaining`.
        Inconclusive = "inconclusive",
        Cancelled = "cancelled",
    }
}

impl BisectionState {
    /// Whether it still has work to do.
    pub fn is_open(self) -> bool {
        matches!(self, BisectionState::Running | BisectionState::Verifying)
    }
}

crate::wire_enum! {
    /// How a bisection classified one commit.
    pub enum StepState {
        /// Its runs are under way.
        Testing = "testing",
        /// Like the good end.
        Good = "good",
        /// Like the bad end.
        Bad = "bad",
        /// It cannot be tested (it does not build or boot).
        Skip = "skip",
        /// Its runs never decided it.
        Undecided = "undecided",
        Cancelled = "cancelled",
    }
}

/// `GET /api/v1/bisections[/{id}]`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BisectionView {
    pub id: i64,
    pub repo: String,
    pub state: BisectionState,
    /// The range: the good end and the bad end.
    pub good: String,
    pub bad: String,
    pub metric: String,
    pub tbox_group: String,
    /// Testcase and axes of the bisected atomic job.
    pub job_name: String,
    pub origin_submission: i64,
    /// The submission holding the probe runs.
    pub probe_submission: Option<i64>,
    /// The fresh A/B of the first bad commit against its parent.
    pub verify_submission: Option<i64>,
    pub first_bad: Option<CommitView>,
    /// Its report (outbox id and Message-ID), when reported: the one it
    /// wrote, or the report of the same culprit its finding joined.
    pub report_id: Option<i64>,
    pub report: Option<String>,
    /// The bisection whose report covers the same patch, for a duplicate.
    pub duplicate_of: Option<i64>,
    pub reason: Option<String>,
    /// Where the first bad commit may be, when inconclusive.
    pub remaining: Vec<String>,
    /// Commits tested so far.
    pub steps: u32,
    /// Commits a kernel was needed for (probes and verification).
    pub builds: u32,
    /// Runs finished or failed (probes and verification).
    pub runs: u32,
    /// From the start to the end (or to now).
    pub wall_secs: u64,
    /// Unix milliseconds.
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

/// One commit a bisection tested.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StepView {
    pub index: u32,
    pub sha: String,
    pub subject: String,
    pub state: StepState,
    /// Finished runs at this commit.
    pub runs: u32,
    pub failed_runs: u32,
    /// The first failure's kind (`build_failed`, `boot_failed`, ...).
    pub failure: Option<String>,
    /// Percent change of the mean against the good end's.
    pub change_percent: Option<f64>,
    /// The bisected metric in each finished run at this commit, in run order.
    pub samples: Vec<f64>,
    /// The statistics behind the classification.
    pub detail: String,
    /// Unix milliseconds.
    pub started_at: i64,
    pub finished_at: Option<i64>,
}

/// `GET /api/v1/bisections/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BisectionDetail {
    pub bisection: BisectionView,
    /// The bisected metric at the good end and at the bad end: the runs of
    /// the pair it came from and any probe runs there, which every step is
    /// classified against.
    pub good_samples: Vec<f64>,
    pub bad_samples: Vec<f64>,
    pub steps: Vec<StepView>,
}
