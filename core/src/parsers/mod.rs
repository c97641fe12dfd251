//! Parsers for benchmark output, returning metrics under LKP's names.
//!
//! Each parser reads one tool's text output (as the agent captured it, or
//! several runs concatenated, as LKP's `programs/<p>/parse` reads its log)
//! and returns `<prefix>.<key>` metrics, where the prefix is the job's
//! testcase (`lmbench3`, `hackbench`, ...) or `<testcase>.time` for GNU
//! `time -v`. Keys follow LKP's parsers. Output that carries no result,
//! numbers that are NaN or infinite, and garbage are errors
//! ([`Error::ToolOutput`], [`Error::NonFiniteMetric`]), never panics.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

mod gnu_time;
mod hackbench;
mod kbot_bench;
mod lmbench;
mod perf_bench;
pub mod perf_stat;
mod pipebench;
mod stress_ng;
mod unixbench;
mod will_it_scale;

pub use gnu_time::parse as parse_gnu_time;
pub use hackbench::parse as parse_hackbench;
pub use kbot_bench::parse as parse_kbot_bench_json;
pub use lmbench::parse as parse_lmbench;
pub use perf_bench::{
    parse_messaging as parse_perf_sched_messaging, parse_pipe as parse_perf_sched_pipe,
};
pub use pipebench::parse as parse_pipebench;
pub use stress_ng::parse as parse_stress_ng;
pub use unixbench::parse as parse_unixbench;
pub use will_it_scale::parse as parse_will_it_scale;

/// Metric name → value for one run.
pub type Metrics = BTreeMap<String, f64>;

/// Which parser reads an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tool {
    /// lmbench3 `bw_pipe` / `lat_pipe` (also lmbench's results file).
    Lmbench,
    /// will-it-scale harness output (`average:`) or runtest.py CSV.
    WillItScale,
    /// UnixBench `Run` report.
    UnixBench,
    /// rt-tests hackbench.
    Hackbench,
    /// `perf bench sched messaging`.
    PerfSchedMessaging,
    /// `perf bench sched pipe`.
    PerfSchedPipe,
    /// `stress-ng --metrics` or `--metrics-brief`.
    StressNg,
    /// pipebench's summary (stderr).
    Pipebench,
    /// GNU `time -v` (its `-o` file).
    GnuTime,
    /// `kbot-bench <subcommand> --json`.
    KbotBenchJson,
}

/// What a parser needs beyond the text.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ParseContext {
    /// Metric prefix: the job's testcase (`lmbench3`), or `<testcase>.time`
    /// for GNU time.
    pub prefix: String,
    /// Tasks of a will-it-scale harness run (`-t`): its `average:` is
    /// summed over tasks, LKP reports it per task.
    pub tasks: Option<u64>,
    /// The will-it-scale harness run used threads (`*_threads`), so the
    /// metric is `per_thread_ops` rather than `per_process_ops`.
    pub threads: bool,
    /// Each execution is one iteration of a hackbench run (one `Time:`):
    /// the iterations' throughputs are combined as LKP's parser combines
    /// the times of its log (`hackbench::combine`), not averaged.
    #[serde(default)]
    pub hackbench_iterations: bool,
}

impl ParseContext {
    pub fn new(prefix: &str) -> ParseContext {
        ParseContext {
            prefix: prefix.to_string(),
            ..ParseContext::default()
        }
    }
}

/// Parses `output` with the parser for `tool`.
pub fn parse(tool: Tool, output: &str, ctx: &ParseContext) -> Result<Metrics> {
    let p = ctx.prefix.as_str();
    match tool {
        Tool::Lmbench => lmbench::parse(output, p),
        Tool::WillItScale => will_it_scale::parse(output, ctx),
        Tool::UnixBench => unixbench::parse(output, p),
        Tool::Hackbench => hackbench::parse(output, p),
        Tool::PerfSchedMessaging => perf_bench::parse_messaging(output, p),
        Tool::PerfSchedPipe => perf_bench::parse_pipe(output, p),
        Tool::StressNg => stress_ng::parse(output, p),
        Tool::Pipebench => pipebench::parse(output, p),
        Tool::GnuTime => gnu_time::parse(output, p),
        Tool::KbotBenchJson => kbot_bench::parse(output),
    }
}

/// A typed parse error for `tool`.
fn fail(tool: &'static str, reason: impl Into<String>) -> Error {
    Error::ToolOutput {
        tool,
        reason: reason.into(),
    }
}

/// Parses a decimal number as tools print them; rejects `nan`, `inf` and
/// anything that is not plain digits, sign, point and exponent.
fn number(tool: &'static str, text: &str) -> Result<f64> {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || "+-.eE".contains(c))
        && text.chars().any(|c| c.is_ascii_digit());
    let value: f64 = if plain {
        text.parse()
            .map_err(|_| fail(tool, format!("{text:?} is not a number")))?
    } else {
        return Err(fail(tool, format!("{text:?} is not a number")));
    };
    if value.is_finite() {
        Ok(value)
    } else {
        Err(fail(tool, format!("{text:?} is out of range")))
    }
}

/// Adds `<prefix>.<key>`, refusing non-finite values, unnamed metrics and
/// names too long to store (the server stores none of them).
fn put(m: &mut Metrics, prefix: &str, key: &str, value: f64) -> Result<()> {
    let name = if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    };
    if key.is_empty() || !crate::metrics::is_storable_name(&name) {
        return Err(Error::ToolOutput {
            tool: "metrics",
            reason: format!("metric name {name:?} cannot be stored"),
        });
    }
    if !value.is_finite() {
        return Err(Error::NonFiniteMetric { name });
    }
    m.insert(name, value);
    Ok(())
}

/// Errors when a parser found nothing: an empty map would silently pass as
/// a run without results.
fn nonempty(tool: &'static str, m: Metrics) -> Result<Metrics> {
    if m.is_empty() {
        Err(fail(tool, "no result found in the output"))
    } else {
        Ok(m)
    }
}

/// One execution's metrics, with the context its output was parsed in.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<'a> {
    /// Which invocation of the plan ran.
    pub invocation: usize,
    pub context: &'a ParseContext,
    pub metrics: Metrics,
}

/// The metrics of a whole workload from those of its executions:
/// `*.time.*` figures add up (the workload's total, as one `time` around it
/// would show) except the peak RSS, which is the maximum; a will-it-scale
/// run over several task counts or modes gives upstream's results for the
/// sweep (`will_it_scale::combine`); hackbench's iterations give upstream's
/// best, average and worst throughputs (`hackbench::combine`); any other
/// metric seen several times (repeated runs) is averaged.
pub fn merge_executions(parsed: &[Parsed<'_>]) -> Result<Metrics> {
    let mut seen: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for p in parsed {
        for (k, v) in &p.metrics {
            seen.entry(k.as_str()).or_default().push(*v);
        }
    }
    let mut out = Metrics::new();
    for (k, vs) in seen {
        // Each value is finite, but a sum can overflow: that is no figure.
        put(&mut out, "", k, merge_values(k, &vs))?;
    }
    will_it_scale::combine(parsed, &mut out)?;
    hackbench::combine(parsed, &mut out)?;
    Ok(out)
}

fn merge_values(name: &str, values: &[f64]) -> f64 {
    if name.ends_with(".time.maximum_resident_set_size") {
        values.iter().copied().fold(0.0, f64::max)
    } else if name.contains(".time.") {
        values.iter().sum()
    } else {
        // Divided first, so the mean of values near f64::MAX stays finite.
        let n = values.len().max(1) as f64;
        values.iter().map(|v| v / n).sum()
    }
}
