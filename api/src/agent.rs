//! Wire types of the agent protocol under [`crate::API_PREFIX`], shared by the server and the agent.
//!
//! The agent protocol (all requests carry `Authorization: Bearer <agent token>`):
//!
//! | call | request | response |
//! |---|---|---|
//! | `POST /api/v1/agents/enroll` | [`EnrollRequest`] (enrolment token in the body) | [`EnrollResponse`] |
//! | `POST /api/v1/agents/lease` | [`LeaseRequest`] | [`LeaseResponse`] (long-poll, bounded) |
//! | `POST /api/v1/jobs/{id}/heartbeat` | (empty) | [`HeartbeatResponse`] |
//! | `POST /api/v1/jobs/{id}/events` | [`EventRequest`] | `204` |
//! | `PUT  /api/v1/jobs/{id}/result` | [`ResultUpload`] | [`UploadResponse`] (idempotent) |
//!
//! A job's kernel is built once for the lab through the calls of
//! [`crate::builds`].
//!
//! Every error is an [`crate::ErrorBody`] with a stable `code`.
//!
//! Times on the wire are Unix milliseconds (`i64`), so both database backends
//! and both ends agree without time-zone handling.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use kbot_core::job::AtomicJob;
pub use kbot_core::machine::Hardware;

/// How an agent gets the kernel under test running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BootBackend {
    /// Build the kernel and boot it in a QEMU guest.
    Qemu,
    /// Build the kernel and kexec into it on bare metal.
    Kexec,
    /// No build: measure the running kernel as it is.
    Host,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EnrollRequest {
    /// The one-time enrolment token an admin created with `kbot-server enroll-token`.
    pub enrollment_token: String,
    pub name: String,
    pub tbox_group: String,
    pub backend: BootBackend,
    /// The machine the jobs run on: the host itself, or for the qemu
    /// backend the guest it boots (its arch, vCPUs, memory and page size).
    /// Jobs' requirements are matched against this.
    pub hardware: Hardware,
    /// The machine the agent runs on, when that is not the machine under
    /// test (the qemu backend's host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Hardware>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EnrollResponse {
    pub agent_id: i64,
    /// The agent's own secret; the server keeps only its hash.
    pub agent_token: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LeaseRequest {
    /// How long the server may hold the request open waiting for work (bounded server-side).
    pub wait_secs: u32,
    /// False for a machine that cannot build kernels (an agent with only
    /// the `test` role): it gets only jobs whose kernel is built, or known
    /// not to build, for its arch, and asking queues the build orders its
    /// jobs need (`kbot_api::builds`).
    #[serde(default = "can_build")]
    pub can_build: bool,
}

fn can_build() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LeaseResponse {
    /// `None` when no job matched within the wait.
    pub job: Option<LeasedJob>,
}

/// Everything an agent needs to run one atomic job at one commit, one run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LeasedJob {
    pub job_id: i64,
    pub submission_id: i64,
    /// 1 for the first lease of this job, counting expired leases.
    pub attempt: u32,
    pub lease_expires_at: i64,
    pub heartbeat_interval_secs: u32,
    pub repo: RepoSpec,
    /// Full 40-hex commit id.
    pub commit: String,
    /// Which run of this (job, commit) this is, from 0.
    pub run_index: u32,
    /// The atomic job as submitted (literal `20%` values kept).
    pub job: AtomicJob,
    /// The job's parameters with `N%` and durations resolved against this agent's hardware.
    pub resolved: BTreeMap<String, String>,
    pub kconfig: KconfigSpec,
    /// The LKP-style result path: testcase/path_params/tbox_group/kconfig/compiler/commit.
    pub result_path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RepoSpec {
    pub name: String,
    /// A git URL or a local path the agent can clone or fetch from.
    pub url: String,
    /// The server's own git of this repo (`PUBLIC_URL/git/NAME.git`), which
    /// also holds the series kbot applied from mailing lists
    /// (`refs/kbot/...`): fetched when a commit is not in `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series_url: Option<String>,
}

/// A named kernel configuration: either a make target (`defconfig`, `tinyconfig`)
/// plus a fragment merged on top, or a whole `.config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KconfigSpec {
    pub name: String,
    /// `make <base>` before the fragment is merged; `None` when `full` is given.
    pub base: Option<String>,
    /// `CONFIG_FOO=y` lines merged on top of `base`, then `olddefconfig`.
    pub fragment: String,
    /// A complete `.config`; used as is (then `olddefconfig`).
    pub full: Option<String>,
}

impl KconfigSpec {
    /// The bare make target `name` (`defconfig`), or an agent's built-in
    /// kconfig of that name: what a name with no `kconfigs` row means.
    pub fn make_target(name: &str) -> KconfigSpec {
        KconfigSpec {
            name: name.to_string(),
            base: Some(name.to_string()),
            fragment: String::new(),
            full: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatResponse {
    pub lease_expires_at: i64,
    /// The submission was cancelled: stop working on the job.
    pub cancelled: bool,
}

crate::wire_enum! {
    /// States of a job, as stored and as reported by agents.
    pub enum JobState {
        Queued = "queued",
        Leased = "leased",
        Building = "building",
        Booting = "booting",
        Running = "running",
        Uploading = "uploading",
        Finished = "finished",
        Failed = "failed",
        Cancelled = "cancelled",
    }
}

impl JobState {
    /// No further transitions happen from a terminal state.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Finished | JobState::Failed | JobState::Cancelled
        )
    }
}

/// Why a job failed; runs that failed never enter the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The kernel did not build; the commit is unbuildable for this kconfig and compiler.
    BuildFailed,
    /// No boot to the workload: timeout, panic or oops before the workload started.
    BootFailed,
    /// The workload ran past its time limit.
    Timeout,
    /// The workload started but its output is missing or cut short (LKP's `is_incomplete_run`).
    Incomplete,
    /// A problem of the test machine, not the kernel (clone failed, disk full, ...).
    Infrastructure,
}

/// A state change reported by the agent. `finished` is implied by a result upload.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EventRequest {
    pub state: JobState,
    /// Required when `state` is `failed`.
    pub failure: Option<FailureKind>,
    /// Free text: the build log tail, console tail, or the step being done.
    pub detail: String,
}

/// The outcome of one run of one job, uploaded once the workload finished.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ResultUpload {
    /// One value per metric for this run, under LKP names
    /// (`lmbench3.PIPE.bandwidth.MB/sec`, `lmbench3.time.elapsed_time`, ...).
    /// JSON cannot carry NaN or infinity; the server also rejects them.
    pub metrics: BTreeMap<String, f64>,
    /// The workload's own text output.
    pub raw_output: String,
    /// Serial console or dmesg of the booted kernel, if any.
    pub console: Option<String>,
    /// The `.config` the kernel was built with, if it was built.
    pub kconfig: Option<String>,
    /// `uname -r` of the kernel the workload ran on.
    pub kernel_release: String,
    /// Host tuning applied and what could not be applied (`cpufreq_governor: unavailable`).
    pub tuning: BTreeMap<String, String>,
    pub started_at: i64,
    pub finished_at: i64,
    /// The kernel profile of one extra, unmeasured execution of the workload
    /// (QEMU guests with perf), as folded call stacks; absent where the
    /// backend took none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<FoldedProfile>,
}

/// `PUT /api/v1/jobs/{id}/initramfs`: the initramfs a leased job's guest
/// booted, stored once by its SHA-256 for reproduction scripts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InitramfsStored {
    /// SHA-256 of the archive, lowercase hex.
    pub sha256: String,
    pub bytes: i64,
}

/// Most bytes of a result's folded stacks (a profile of a pipe workload
/// folds to a few tens of KiB).
pub const MAX_PROFILE_BYTES: usize = 4 << 20;

/// A sampled profile as folded call stacks, the format of Brendan Gregg's
/// `stackcollapse` and of `inferno`: one line per distinct stack,
/// `root;caller;...;leaf COUNT`, the frames' symbols as perf resolved them
/// (kernel symbols from the guest's kallsyms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FoldedProfile {
    /// The sampling event (`cpu-clock` in a guest without a PMU).
    pub event: String,
    /// `stack COUNT` lines.
    pub folded: String,
}

impl ResultUpload {
    /// Whether the server can store this result: the rules of
    /// `PUT /jobs/{id}/result`, checked by the agent before it spools a
    /// result too, so that a run the server must refuse is reported as a
    /// failure with the reason instead of being re-run after its lease ends.
    pub fn check(&self) -> kbot_core::Result<()> {
        use kbot_core::metrics::{is_storable_name, MAX_METRICS_PER_RESULT, MAX_METRIC_NAME_LEN};
        // Within the body limit, a body of tiny metrics would still cost a
        // row of work per metric in every comparison of the pair.
        if self.metrics.len() > MAX_METRICS_PER_RESULT {
            return Err(kbot_core::Error::TooManyMetrics {
                count: self.metrics.len(),
                max: MAX_METRICS_PER_RESULT,
            });
        }
        for (name, value) in &self.metrics {
            if !is_storable_name(name) {
                return Err(kbot_core::Error::MetricName {
                    name: name.chars().take(MAX_METRIC_NAME_LEN + 8).collect(),
                    max: MAX_METRIC_NAME_LEN,
                });
            }
            // JSON cannot carry NaN, but a literal like `1e999` parses to
            // infinity.
            if !value.is_finite() {
                return Err(kbot_core::Error::NonFiniteMetric { name: name.clone() });
            }
        }
        if self.finished_at < self.started_at {
            return Err(kbot_core::Error::ResultTimes);
        }
        if let Some(p) = &self.profile {
            if p.folded.len() > MAX_PROFILE_BYTES {
                return Err(kbot_core::Error::Profile(format!(
                    "{} bytes of folded stacks, over the {MAX_PROFILE_BYTES}-byte limit",
                    p.folded.len()
                )));
            }
            kbot_core::profile::parse(&p.folded)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UploadResponse {
    pub result_id: i64,
    /// False when this run had already been stored (idempotent re-upload).
    pub stored: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kbot_core::metrics::{MAX_METRICS_PER_RESULT, MAX_METRIC_NAME_LEN};

    fn upload(metrics: BTreeMap<String, f64>) -> ResultUpload {
        ResultUpload {
            metrics,
            raw_output: String::new(),
            console: None,
            kconfig: None,
            kernel_release: "6.1".into(),
            tuning: BTreeMap::new(),
            started_at: 1,
            finished_at: 2,
            profile: None,
        }
    }

    #[test]
    fn the_upload_rules_name_what_is_wrong() {
        let at_limit = (0..MAX_METRICS_PER_RESULT).map(|i| (format!("m{i}"), 1.0));
        assert!(upload(at_limit.collect()).check().is_ok());
        let over = (0..=MAX_METRICS_PER_RESULT).map(|i| (format!("m{i}"), 1.0));
        let err = upload(over.collect()).check().expect_err("one too many");
        assert!(
            matches!(err, kbot_core::Error::TooManyMetrics { count, .. } if count == MAX_METRICS_PER_RESULT + 1)
        );
        let long = "n".repeat(MAX_METRIC_NAME_LEN + 1);
        let err = upload([(long, 1.0)].into()).check().expect_err("too long");
        assert!(matches!(err, kbot_core::Error::MetricName { .. }), "{err}");
        let err = upload([("m".into(), f64::INFINITY)].into())
            .check()
            .expect_err("infinite");
        assert!(
            matches!(err, kbot_core::Error::NonFiniteMetric { .. }),
            "{err}"
        );
        let mut backwards = upload([("m".into(), 1.0)].into());
        backwards.finished_at = 0;
        assert!(matches!(
            backwards.check(),
            Err(kbot_core::Error::ResultTimes)
        ));
    }
}
