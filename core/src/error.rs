//! The one error type of kbot-core.

/// Everything that can go wrong in pure kbot-core code: bad job files,
/// unparseable tool output, invalid metric values.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A metric value that is NaN or infinite can never enter the statistics.
    #[error("metric {name:?} has a non-finite value")]
    NonFiniteMetric { name: String },
    /// A report that cannot be rendered or mailed as asked (bad address, timestamp, line).
    #[error("invalid report: {reason}")]
    InvalidReport { reason: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
