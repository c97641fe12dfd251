//! What a command can fail with; `main` prints it as one line.

/// The command line's one error enum.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An admin command (`serve`, `migrate`, tokens, users) failed in the
    /// server library.
    #[error(transparent)]
    Server(#[from] kbot_server::Error),
    /// A user command's call: no answer, or the server refused it.
    #[error(transparent)]
    Api(#[from] kbot_api::client::Error),
    /// A job file the command line changes before sending (`--set`).
    #[error(transparent)]
    Job(#[from] kbot_core::Error),
    #[error("cannot read {path}: {source}")]
    ReadFile {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot print the answer as JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot write to stdout: {0}")]
    Stdout(std::io::Error),
    /// Stdout's reader closed the pipe: not a failure of the command.
    #[error("stdout was closed")]
    ClosedPipe,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
