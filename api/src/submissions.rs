//! Wire types of submissions, their jobs, results and comparisons, shared
//! by the REST handlers and the `kbot-server` user CLI.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use kbot_core::job::{AtomicJob, Skipped};
use kbot_core::needs::Needs;

use crate::agent::JobState;
use crate::repos::CommitView;

crate::wire_enum! {
    /// Who made a submission.
    pub enum SubmissionKind {
        /// A person (or a list's sender, through the robot).
        User = "user",
        /// A watched branch moved.
        Watch = "watch",
        /// A bisection's probe runs.
        Bisect = "bisect",
        /// A first bad commit against its parent, or a run that must not be
        /// reported (a list's base probe, a recheck).
        Verify = "verify",
    }
}

crate::wire_enum! {
    /// Where a submission is, as users see it.
    pub enum SubmissionStatus {
        /// No run has started.
        Queued = "queued",
        /// Runs have started; some are still to do.
        Running = "running",
        /// Every run is settled.
        Done = "done",
        /// Settled, and not one run finished.
        Failed = "failed",
        Cancelled = "cancelled",
    }
}

crate::wire_enum! {
    /// Which commit of a pair a job runs.
    pub enum Side {
        Base = "base",
        Head = "head",
    }
}

crate::wire_enum! {
    /// kbot's verdict on one metric of a pair.
    pub enum Verdict {
        /// The change is real and above the metric's floor.
        Different = "different",
        /// Any change is ruled out beyond the metric's margin.
        Same = "same",
        /// Neither yet: more runs are needed.
        Unknown = "unknown",
    }
}

impl From<kbot_core::stats::Outcome> for Verdict {
    fn from(outcome: kbot_core::stats::Outcome) -> Verdict {
        match outcome {
            kbot_core::stats::Outcome::Different => Verdict::Different,
            kbot_core::stats::Outcome::Same => Verdict::Same,
            kbot_core::stats::Outcome::Unknown => Verdict::Unknown,
        }
    }
}

/// `POST /api/v1/submissions`: a job file for a base/head pair, or for one
/// commit (`base` omitted: the head's first parent becomes the base).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SubmitRequest {
    pub repo: String,
    /// The LKP-style job file, as YAML text.
    pub job_file: String,
    /// Branch, tag or (short) sha; omitted for a single-commit submission.
    pub base: Option<String>,
    pub head: String,
    /// Higher runs first; 0 by default.
    #[serde(default)]
    pub priority: i32,
    /// Cap on runs per side when `unknown` verdicts ask for more (default 10).
    pub max_runs: Option<u32>,
    /// Whether a regression on a pair more than one commit apart starts a
    /// bisection (default true).
    #[serde(default)]
    pub bisect: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SubmissionView {
    pub id: i64,
    pub repo: String,
    pub submitter: String,
    pub kind: SubmissionKind,
    pub state: SubmissionStatus,
    pub base: CommitView,
    pub head: CommitView,
    pub priority: i32,
    pub max_runs: u32,
    /// Unix milliseconds.
    pub created_at: i64,
    pub jobs: JobCounts,
    /// The job file's atomic jobs, monitors and keys that kbot does not run
    /// or use, each with the reason (empty when everything runs).
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobCounts {
    pub total: u32,
    pub queued: u32,
    pub active: u32,
    pub finished: u32,
    pub failed: u32,
    pub cancelled: u32,
}

/// `GET /api/v1/submissions/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SubmissionDetail {
    pub submission: SubmissionView,
    /// The job file as submitted.
    pub job_file: String,
    /// The atomic jobs the job file expanded into, in order.
    pub atomic_jobs: Vec<AtomicJob>,
    pub jobs: Vec<JobView>,
    /// Atomic jobs with queued runs that no enrolled agent can lease, each
    /// with the reason (empty when every queued job has a machine).
    #[serde(default)]
    pub waiting: Vec<WaitingJob>,
}

/// An atomic job whose queued runs no enrolled agent can take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WaitingJob {
    /// Index into the submission's `atomic_jobs`.
    pub job_index: u32,
    /// The tbox group the job's pair is pinned to, if any.
    pub tbox_group: Option<String>,
    /// The hardware the job needs.
    pub needs: Needs,
    /// Why no agent can take it, e.g. "no enrolled agent has arch aarch64,
    /// 64K pages: vm-1 (vm) lacks arch aarch64 (has x86_64), ...".
    pub reason: String,
}

/// One job row: one atomic job × one commit × one run index.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    pub id: i64,
    /// Index into the submission's `atomic_jobs`.
    pub job_index: u32,
    pub side: Side,
    pub commit: String,
    pub run_index: u32,
    pub state: JobState,
    pub attempts: u32,
    pub agent: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EventView {
    pub id: i64,
    pub job_id: i64,
    pub state: JobState,
    pub detail: String,
    /// Unix milliseconds.
    pub at: i64,
}

/// The metrics of one finished run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunResult {
    pub job_id: i64,
    pub job_index: u32,
    pub side: Side,
    pub commit: String,
    pub run_index: u32,
    pub metrics: BTreeMap<String, f64>,
    /// The agent that ran it (`None` when its agent is gone).
    pub agent: Option<String>,
    /// How that agent boots the kernel under test: `qemu`, `kexec` or
    /// `host` (the running kernel, not the run's commit).
    pub backend: Option<crate::agent::BootBackend>,
    pub tbox_group: Option<String>,
    /// The machine under test as the agent enrolled it (a qemu agent's
    /// guest): `uname -m` and page size in bytes.
    pub arch: Option<String>,
    pub page_size: Option<u64>,
    /// How the run was measured: the agent's tuning map, with the
    /// conditions of `kbot_core::conditions` (`guest_arch`,
    /// `guest_page_size`, `qemu_clock`, ...).
    pub tuning: BTreeMap<String, String>,
}

/// The stored comparison of one metric of one atomic job of a submission.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ComparisonView {
    pub job_index: u32,
    pub metric: String,
    pub verdict: Verdict,
    pub base_runs: u32,
    pub head_runs: u32,
    pub base_mean: Option<f64>,
    pub head_mean: Option<f64>,
    /// Percent change of the means (absolute difference for perf-profile
    /// rows); `None` when the base mean is 0.
    pub change_percent: Option<f64>,
    /// The statistics module's full output for this metric, as JSON.
    pub detail: serde_json::Value,
    /// Unix milliseconds.
    pub computed_at: i64,
    /// Whether every finished run of this job booted its own commit's
    /// kernel (`qemu` or `kexec` agents). False when some ran on the `host`
    /// backend, where both sides run the machine's kernel: the verdict then
    /// says nothing about the commits.
    #[serde(default)]
    pub tests_the_commits: bool,
    /// Why the comparison is not a test of the commits (`tests_the_commits`
    /// false), e.g. "host backend: both sides ran the running kernel 6.1.0;
    /// this is an A/A comparison, not a test of the commits".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_note: Option<String>,
    /// The mode every run of the job was measured in (a QEMU guest's clock
    /// and vCPUs), and what that mode cannot see; `None` outside QEMU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_by: Option<MeasuredBy>,
}

impl ComparisonView {
    /// A `same` in a mode blind to contention between CPUs: below that
    /// mode's sight, not "no change" for a change that costs only so.
    pub fn blind_same(&self) -> bool {
        self.verdict == Verdict::Same
            && self
                .measured_by
                .as_ref()
                .is_some_and(|m| m.blind_to_contention)
    }
}

/// How a comparison's runs were measured, and what that mode cannot see:
/// a `same` there says nothing about what it cannot see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MeasuredBy {
    /// `exact clock (icount), 1 vCPU`, `wall clock (KVM), 4 vCPUs`, ...
    pub mode: String,
    /// What no number of runs in this mode can show (e.g. "contention
    /// between CPUs ...").
    pub blind_to: String,
    /// True when a change that costs only as CPUs contend (a lock handed
    /// between them, a cache line bouncing) cannot move this mode's numbers.
    pub blind_to_contention: bool,
}

impl MeasuredBy {
    pub fn new(mode: kbot_core::conditions::Mode) -> MeasuredBy {
        MeasuredBy {
            mode: mode.to_string(),
            blind_to: mode.blind_to().to_string(),
            blind_to_contention: mode.blind_to_contention(),
        }
    }
}

/// `GET /api/v1/submissions/{id}/results`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SubmissionResults {
    pub submission: SubmissionView,
    pub runs: Vec<RunResult>,
    pub comparisons: Vec<ComparisonView>,
}
