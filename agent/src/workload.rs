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

/// Parses every execution and merges the metrics of the whole workload:
/// `*.time.*` figures add up over executions (the workload's total, as one
/// `time` around it would show) except the peak RSS, which is the maximum;
/// any other metric seen several times (repeated runs) is averaged.
pub fn metrics(plan: &[Invocation], runs: &[Execution]) -> Result<Metrics> {
    let mut seen: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for run in runs {
        let Some(inv) = plan.get(run.invocation) else {
            continue;
        };
        for (k, v) in parsers::parse(inv.parser, &run.stdout, &inv.context)? {
            seen.entry(k).or_default().push(v);
        }
    }
    Ok(seen
        .into_iter()
        .map(|(k, vs)| {
            let v = merge(&k, &vs);
            (k, v)
        })
        .collect())
}

fn merge(name: &str, values: &[f64]) -> f64 {
    if name.ends_with(".time.maximum_resident_set_size") {
        values.iter().copied().fold(0.0, f64::max)
    } else if name.contains(".time.") {
        values.iter().sum()
    } else {
        values.iter().sum::<f64>() / values.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_figures_add_up_and_kpis_average() {
        assert_eq!(merge("lmbench3.time.elapsed_time", &[1.5, 2.5]), 4.0);
        assert_eq!(
            merge("lmbench3.time.maximum_resident_set_size", &[10.0, 30.0]),
            30.0
        );
        assert_eq!(
            merge("lmbench3.PIPE.bandwidth.MB/sec", &[100.0, 200.0]),
            150.0
        );
    }
}
