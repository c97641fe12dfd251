//! The workload of a job: the kbot-bench command lines (from
//! `kbot_core::programs`) and the metrics of their outputs.

use std::collections::BTreeMap;

use kbot_core::job::AtomicJob;
use kbot_core::parsers::{self, Metrics};
use kbot_core::programs::{self, Invocation};

use crate::error::Result;

/// The kbot-bench invocations of `job`, in run order.
pub fn plan(job: &AtomicJob, resolved: &BTreeMap<String, String>) -> Result<Vec<Invocation>> {
    Ok(programs::kbot_bench_invocations(job, resolved)?)
}

/// One execution of one invocation.
#[derive(Debug, Clone)]
pub struct Execution {
    /// Index into the plan.
    pub invocation: usize,
    pub stdout: String,
}

/// Parses every execution and merges the metrics of the whole workload
/// ([`parsers::merge_executions`]: times add up, a will-it-scale sweep gives
/// LKP's results for the sweep, repeated runs are averaged).
pub fn metrics(plan: &[Invocation], runs: &[Execution]) -> Result<Metrics> {
    let mut parsed = Vec::new();
    for run in runs {
        let Some(inv) = plan.get(run.invocation) else {
            continue;
        };
        parsed.push(parsers::Parsed {
            invocation: run.invocation,
            context: &inv.context,
            metrics: parsers::parse(inv.parser, &run.stdout, &inv.context)?,
        });
    }
    Ok(parsers::merge_executions(&parsed)?)
}
