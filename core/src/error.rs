//! The one error type of kbot-core.

/// Everything that can go wrong in pure kbot-core code: bad job files,
/// unparseable tool output, invalid metric values.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A metric value that is NaN or infinite can never enter the statistics.
    #[error("metric {name:?} has a non-finite value")]
    NonFiniteMetric { name: String },
    /// A result with more metrics than one run may upload.
    #[error("the result has {count} metrics, more than the {max} one run may upload")]
    TooManyMetrics { count: usize, max: usize },
    /// A result with a metric name the server cannot store.
    #[error("metric name {name:?} must be 1-{max} bytes")]
    MetricName { name: String, max: usize },
    /// A result whose run finished before it started.
    #[error("the result's finished_at is before its started_at")]
    ResultTimes,
    /// A result's profile that cannot be stored: too large, or lines that
    /// are not folded stacks.
    #[error("the result's profile: {0}")]
    Profile(String),
    /// A job file that is not valid YAML; line and column are 1-based when
    /// known (the message, from serde_yaml, names them too).
    #[error("job file is not valid YAML: {message}")]
    JobYaml {
        message: String,
        line: Option<usize>,
        column: Option<usize>,
    },
    /// A job file that is valid YAML but not a valid job.
    #[error("invalid job file: {0}")]
    JobInvalid(String),
    /// A program key kbot does not know.
    #[error("unknown program {name:?}; known programs: {}", known.join(", "))]
    UnknownProgram { name: String, known: Vec<String> },
    /// An option (or top-level key) the program does not take.
    #[error("unknown option {option:?} for program {program}; valid: {}", valid.join(", "))]
    UnknownOption {
        program: String,
        option: String,
        valid: Vec<String>,
    },
    /// A parameter value that does not fit its option.
    #[error("invalid value {value:?} for {key}: {reason}")]
    InvalidValue {
        key: String,
        value: String,
        reason: String,
    },
    /// A job file in which kbot can run nothing, with each skipped atomic
    /// job and its reason.
    #[error(
        "nothing in the job file can run on kbot; skipped: {}",
        first_few(skipped)
    )]
    NothingRunnable { skipped: Vec<String> },
    /// Benchmark output a parser cannot read.
    #[error("cannot parse {tool} output: {reason}")]
    ToolOutput { tool: &'static str, reason: String },
    /// A report that cannot be rendered or mailed as asked (bad address, timestamp, line).
    #[error("invalid report: {reason}")]
    InvalidReport { reason: String },
    /// A statistics or change-point config that would make verdicts meaningless.
    #[error("invalid statistics config: {0}")]
    InvalidStatsConfig(String),
}

/// The first ten entries, and how many more: a sweep of upstream's tests
/// skips hundreds of jobs.
fn first_few(items: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > SHOWN {
        text.push_str(&format!("; and {} more", items.len() - SHOWN));
    }
    text
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
