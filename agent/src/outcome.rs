//! What one job produced: a result to upload, or a failure to report.

use kbot_api::agent::{FailureKind, ResultUpload};
use serde::{Deserialize, Serialize};

/// Reports a state change with a detail line.
pub type OnState<'a> = &'a (dyn Fn(kbot_api::agent::JobState, &str) + Sync);

/// A run that produced no statistics: the kind decides how the server
/// counts it (`build_failed`, `boot_failed`, `incomplete`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: FailureKind,
    /// The build log tail, console tail, or what went wrong.
    pub detail: String,
}

impl Failure {
    pub fn new(kind: FailureKind, detail: impl Into<String>) -> Failure {
        Failure {
            kind,
            detail: detail.into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    Success(ResultUpload),
    Failed(Failure),
    /// The kexec backend left for the built kernel; the restarted agent
    /// finishes the job.
    Rebooting,
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
