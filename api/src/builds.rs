//! Wire types of shared kernel builds: a kernel is built once per build key
//! and every agent of its arch downloads it (agent token on every call).
//!
//! | call | request | response |
//! |---|---|---|
//! | `POST /api/v1/builds/claim` | [`BuildClaim`] | [`ClaimAnswer`] |
//! | `PUT  /api/v1/builds/{key}/files/{name}?job_id=N` | the file's bytes | [`BuildFile`] |
//! | `POST /api/v1/builds/{key}/ready` | [`BuildReady`] | [`BuildView`] |
//! | `POST /api/v1/builds/{key}/failed` | [`BuildFailed`] | [`BuildView`] |
//! | `GET  /api/v1/builds?limit=N&before=ID&commit=SHA` | | [`BuildView`]s, newest first |
//! | `GET  /api/v1/builds/{key}` | | [`BuildView`] |
//! | `GET  /api/v1/builds/{key}/files/{name}` | | the file's bytes, `x-kbot-sha256` |
//! | `POST /api/v1/builds/orders/lease` | [`OrderLease`] | [`OrderLeaseResponse`] |
//! | `POST /api/v1/builds/orders/{id}/heartbeat` | | [`OrderHeartbeat`] |
//! | `GET  /api/v1/builds/orders?limit=N&before=ID` | | [`OrderView`]s, newest first |
//!
//! The build key is the agent's: a hash of the commit, the resolved kconfig,
//! the compiler and the kernel's arch, the same key as its local build
//! cache. A claim belongs to the job that made it for as long as that job
//! holds its lease: a builder that dies loses the claim with its lease, and
//! the next agent to ask builds instead.
//!
//! Builds queued ahead of the tests: a lab machine that cannot build (an
//! agent with only the `test` role) leases only jobs whose kernel is built,
//! or known not to build, for its arch; asking for work queues a *build
//! order* for each kernel its queued jobs need (commit, kconfig name,
//! compiler, arch). A dedicated builder (only the `build` role) queues the
//! orders of every queued job a kernel-booting agent of its arch could run.
//! Any agent with the `build` role leases orders before test jobs, makes the
//! order's build key, and claims it as the order (`order_id` where a job
//! would give `job_id`); the claim lasts while the order's lease does,
//! which the builder's heartbeats extend.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::agent::{KconfigSpec, RepoSpec};

/// The header carrying a downloaded file's SHA-256, lowercase hex.
pub const SHA256_HEADER: &str = "x-kbot-sha256";

/// Files a build may hold: the boot image, the resolved `.config`, the
/// build's log.
pub const BUILD_FILES: &[&str] = &["bzImage", "config", "build.log"];

/// Who holds a build's claim: a leased job that needs the kernel, or a
/// build order a builder leased. On the wire, `job_id` or `order_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimant {
    Job(i64),
    Order(i64),
}

impl Claimant {
    /// The claimant of a request's `job_id` and `order_id`: exactly one.
    pub fn from_ids(job_id: Option<i64>, order_id: Option<i64>) -> Option<Claimant> {
        match (job_id, order_id) {
            (Some(j), None) => Some(Claimant::Job(j)),
            (None, Some(o)) => Some(Claimant::Order(o)),
            _ => None,
        }
    }

    /// `(job_id, order_id)`.
    pub fn ids(self) -> (Option<i64>, Option<i64>) {
        match self {
            Claimant::Job(j) => (Some(j), None),
            Claimant::Order(o) => (None, Some(o)),
        }
    }

    /// The query string naming it (`job_id=N`, `order_id=N`).
    pub fn query(self) -> String {
        match self {
            Claimant::Job(j) => format!("job_id={j}"),
            Claimant::Order(o) => format!("order_id={o}"),
        }
    }
}

impl std::fmt::Display for Claimant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Claimant::Job(j) => write!(f, "job {j}"),
            Claimant::Order(o) => write!(f, "build order {o}"),
        }
    }
}

/// `POST /api/v1/builds/claim`: the kernel for a leased job or order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BuildClaim {
    /// The leased job that needs the kernel (or `order_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
    /// The leased build order that builds it (or `job_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<i64>,
    /// 24 lowercase hex digits (the agent's build-cache key).
    pub build_key: String,
    pub commit: String,
    /// The kernel's `ARCH=` (`x86_64`, `arm64`).
    pub arch: String,
}

/// What a claim got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ClaimAnswer {
    /// Nobody has it: this job builds it, uploads its files and says
    /// `ready` or `failed`.
    Build,
    /// Another job (or a builder's order) is building it: ask again
    /// after `retry_after_secs`.
    Wait {
        /// 0 when an order or nobody holds it.
        builder_job_id: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        builder_order_id: Option<i64>,
        retry_after_secs: u32,
    },
    /// Built: download its files.
    Ready { build: BuildView },
    /// It does not build: the job fails with this log.
    Failed { build: BuildView },
}

/// One stored file of a build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BuildFile {
    /// One of [`BUILD_FILES`].
    pub name: String,
    /// SHA-256 of the content, lowercase hex.
    pub sha256: String,
    pub bytes: i64,
}

/// `POST /api/v1/builds/{key}/ready`: the claimant built the kernel and
/// uploaded its files.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BuildReady {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<i64>,
    /// `make kernelrelease`.
    pub release: String,
    /// The GNU build id of vmlinux, hex.
    #[serde(default)]
    pub build_id: Option<String>,
    pub build_secs: f64,
    /// The files as the builder has them: each must have been uploaded
    /// with this digest.
    pub files: Vec<BuildFile>,
}

/// `POST /api/v1/builds/{key}/failed`: the commit does not build.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BuildFailed {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<i64>,
    /// The end of the build log, the compiler's lines.
    pub log_tail: String,
}

crate::wire_enum! {
    /// Where a build is.
    pub enum BuildState {
        /// Its claimant builds it.
        Building = "building",
        /// Built: its files are in the store.
        Ready = "ready",
        /// It does not build: every job that needs it fails with its log.
        Failed = "failed",
    }
}

crate::wire_enum! {
    /// Where a build order is.
    pub enum OrderState {
        /// No builder has it.
        Queued = "queued",
        /// A builder has it while its lease lasts.
        Leased = "leased",
        /// Its build is ready or failed.
        Done = "done",
        /// Its builders lost it three times: the jobs that need it go out and
        /// fail instead of waiting for it.
        GivenUp = "given_up",
    }
}

/// A build as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BuildView {
    pub build_key: String,
    pub commit: String,
    pub arch: String,
    pub state: BuildState,
    /// The job that holds (or last held) the claim.
    pub job_id: Option<i64>,
    /// The build order that holds (or last held) the claim.
    #[serde(default)]
    pub order_id: Option<i64>,
    /// How many jobs claimed it: more than one when a builder died.
    pub claims: i64,
    pub release: Option<String>,
    pub build_id: Option<String>,
    pub build_secs: Option<f64>,
    pub log_tail: Option<String>,
    pub files: Vec<BuildFile>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The kernel's `ARCH=` of a machine arch as `uname -m` and agents name it.
pub fn kernel_arch(machine: &str) -> &str {
    match machine {
        "aarch64" => "arm64",
        other => other,
    }
}

/// The machine arch (`uname -m`) a kernel `ARCH=` boots on.
pub fn machine_arch(kernel: &str) -> &str {
    match kernel {
        "arm64" => "aarch64",
        other => other,
    }
}

/// `POST /api/v1/builds/orders/lease`: a builder asks for a kernel to build.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OrderLease {
    /// The kernel `ARCH=` the builder builds (`x86_64`, `arm64`).
    pub arch: String,
    /// How long the server may hold the request open (bounded server-side).
    #[serde(default)]
    pub wait_secs: u32,
    /// Also queue the orders of every queued job that a kernel-booting
    /// agent of this arch could run (a dedicated builder does; an agent that
    /// also tests builds what its own jobs need).
    #[serde(default)]
    pub plan: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OrderLeaseResponse {
    /// `None` when no order was queued within the wait.
    pub order: Option<BuildOrder>,
}

/// A kernel to build: claim its key as this order, build, share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BuildOrder {
    pub order_id: i64,
    pub repo: RepoSpec,
    /// Full 40-hex commit id.
    pub commit: String,
    pub kconfig: KconfigSpec,
    pub compiler: String,
    /// The kernel's `ARCH=`.
    pub arch: String,
    /// 1 for the first lease, more when a builder lost it.
    pub leases: i64,
    pub lease_expires_at: i64,
    pub heartbeat_interval_secs: u32,
}

/// `POST /api/v1/builds/orders/{id}/heartbeat`: the order's lease, extended.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OrderHeartbeat {
    pub lease_expires_at: i64,
}

/// A build order as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OrderView {
    pub order_id: i64,
    pub repo: String,
    pub commit: String,
    pub kconfig: String,
    pub compiler: String,
    pub arch: String,
    pub state: OrderState,
    /// The agent that holds (or last held) it.
    pub agent: Option<String>,
    pub leases: i64,
    /// The build it made or found, once a builder claimed it.
    pub build_key: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}
