//! `perf bench sched messaging` and `perf bench sched pipe`.
//!
//! messaging: ` Total time: 0.088 [sec]` (or `-f simple`'s bare number) →
//! `<p>.total_time_sec` (the mean when several runs are concatenated).
//! pipe: `190790 ops/sec` → `<p>.ops_per_sec` (LKP's key), plus
//! `<p>.usecs_per_op` and `<p>.total_time_sec`.

use super::{fail, nonempty, number, put, Metrics};
use crate::Result;

const MESSAGING: &str = "perf bench sched messaging";
const PIPE: &str = "perf bench sched pipe";

/// `Total time: X [sec]` values in order.
fn total_times(tool: &'static str, output: &str) -> Result<Vec<f64>> {
    output
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Total time:"))
        .map(|rest| {
            let value = rest.trim().strip_suffix("[sec]").unwrap_or(rest).trim();
            number(tool, value)
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

pub fn parse_messaging(output: &str, prefix: &str) -> Result<Metrics> {
    let mut times = total_times(MESSAGING, output)?;
    if times.is_empty() {
        // `-f simple` prints only the seconds, one line per run.
        times = output
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| number(MESSAGING, l))
            .collect::<Result<_>>()?;
    }
    if times.is_empty() {
        return Err(fail(MESSAGING, "no \"Total time:\" line"));
    }
    let mut m = Metrics::new();
    put(&mut m, prefix, "total_time_sec", mean(&times))?;
    Ok(m)
}

pub fn parse_pipe(output: &str, prefix: &str) -> Result<Metrics> {
    let mut ops = Vec::new();
    let mut usecs = Vec::new();
    for line in output.lines().map(str::trim) {
        if let Some(v) = line.strip_suffix("ops/sec") {
            ops.push(number(PIPE, v.trim())?);
        } else if let Some(v) = line.strip_suffix("usecs/op") {
            usecs.push(number(PIPE, v.trim())?);
        }
    }
    let times = total_times(PIPE, output)?;
    let mut m = Metrics::new();
    if !ops.is_empty() {
        put(&mut m, prefix, "ops_per_sec", mean(&ops))?;
    }
    if !usecs.is_empty() {
        put(&mut m, prefix, "usecs_per_op", mean(&usecs))?;
    }
    if !times.is_empty() && !m.is_empty() {
        put(&mut m, prefix, "total_time_sec", mean(&times))?;
    }
    nonempty(PIPE, m)
}
