//! The one error type of kbot-agent.

use std::path::PathBuf;

/// Everything that can stop the agent or one of its jobs.
///
/// Kernel-side outcomes (a build that fails, a kernel that panics) are not
/// errors: they are [`crate::outcome::Failure`]s reported to the server.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse {what}: {reason}")]
    Parse { what: String, reason: String },
    #[error("bad configuration: {0}")]
    Config(String),
    #[error("command `{command}` failed: {detail}")]
    Command { command: String, detail: String },
    /// A call of the protocol: no answer, or the server refused it.
    #[error(transparent)]
    Api(#[from] kbot_api::client::Error),
    #[error("job model: {0}")]
    Job(#[from] kbot_core::Error),
    #[error("JSON in {path}: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("the job was cancelled")]
    Cancelled,
    /// The disk stayed full after the build cache gave up its kernels.
    #[error(
        "no space left on the agent's disk for {what} (after evicting {evicted} cached \
         kernels; free space under {dir}): {source}"
    )]
    DiskFull {
        what: String,
        dir: PathBuf,
        evicted: usize,
        #[source]
        source: std::io::Error,
    },
}

impl AgentError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> AgentError {
        AgentError::Io {
            context: context.into(),
            source,
        }
    }

    pub fn parse(what: impl Into<String>, reason: impl Into<String>) -> AgentError {
        AgentError::Parse {
            what: what.into(),
            reason: reason.into(),
        }
    }

    /// Whether this is a write that failed for want of disk space (ENOSPC,
    /// EDQUOT): room may be made, and the write tried again.
    pub fn is_disk_full(&self) -> bool {
        match self {
            AgentError::Io { source, .. } => is_disk_full(source),
            AgentError::DiskFull { .. } => true,
            _ => false,
        }
    }

    /// Whether retrying the same request later can succeed (network trouble,
    /// 5xx, 408/429) as opposed to a refusal that will never change.
    pub fn is_retryable(&self) -> bool {
        match self {
            AgentError::Api(kbot_api::client::Error::Http { .. }) => true,
            AgentError::Api(kbot_api::client::Error::Api { status, .. }) => {
                *status >= 500 || *status == 408 || *status == 429
            }
            _ => false,
        }
    }
}

/// ENOSPC or EDQUOT.
pub fn is_disk_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

pub type Result<T, E = AgentError> = std::result::Result<T, E>;
