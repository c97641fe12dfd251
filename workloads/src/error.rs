//! The one error type of kbot-bench.

use std::io;

/// Everything that can stop a workload. `Usage` is a bad argument (exit code 2);
/// the rest are run-time failures (exit code 1).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("usage: {0}")]
    Usage(String),
    #[error("{what}: {source}")]
    Sys {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("benchmark child failed: {0}")]
    Child(String),
    #[error("no measurement: {0}")]
    NoResult(String),
}

impl BenchError {
    /// Wraps the current `errno` with the name of the call that failed.
    pub fn last_os(what: &'static str) -> Self {
        BenchError::Sys {
            what,
            source: io::Error::last_os_error(),
        }
    }

    pub fn usage(msg: impl Into<String>) -> Self {
        BenchError::Usage(msg.into())
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            BenchError::Usage(_) => 2,
            _ => 1,
        }
    }
}

pub type Result<T> = std::result::Result<T, BenchError>;
