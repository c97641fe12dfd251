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
//!
//! The build key is the agent's: a hash of the commit, the resolved kconfig,
//! the compiler and the kernel's arch, the same key as its local build
//! cache. A claim belongs to the job that made it for as long as that job
//! holds its lease: a builder that dies loses the claim with its lease, and
//! the next agent to ask builds instead.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The header carrying a downloaded file's SHA-256, lowercase hex.
pub const SHA256_HEADER: &str = "x-kbot-sha256";

/// Files a build may hold: the boot image, the resolved `.config`, the
/// build's log.
pub const BUILD_FILES: &[&str] = &["bzImage", "config", "build.log"];

/// `POST /api/v1/builds/claim`: the kernel for a leased job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BuildClaim {
    /// The leased job that needs the kernel.
    pub job_id: i64,
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
    /// Another job is building it: ask again after `retry_after_secs`.
    Wait {
        builder_job_id: i64,
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

/// `POST /api/v1/builds/{key}/ready`: the claiming job built the kernel
/// and uploaded its files.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BuildReady {
    pub job_id: i64,
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
    pub job_id: i64,
    /// The end of the build log, the compiler's lines.
    pub log_tail: String,
}

/// A build as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BuildView {
    pub build_key: String,
    pub commit: String,
    pub arch: String,
    /// `building`, `ready` or `failed`.
    pub state: String,
    /// The job that holds (or last held) the claim.
    pub job_id: Option<i64>,
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
