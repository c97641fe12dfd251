//! will-it-scale: the harness's own output or LKP's runtest.py CSV.
//!
//! Harness (`pipe1_processes -t N -s S`): the `average:<ops/s summed over
//! tasks>` line; LKP reports `per_process_ops` (or `per_thread_ops`) =
//! average / tasks, truncated to an integer as LKP's `%d`, and
//! `<p>.<tasks>.processes` (or `.threads`) = the average. The task count
//! and mode come from the [`ParseContext`] since the output has neither.
//!
//! runtest.py CSV (`tasks,processes,processes_idle,threads,threads_idle,linear`):
//! as LKP's parser, `<p>.<tasks>.<column>` per row, `per_process_ops` and
//! `per_thread_ops` = the mean over rows of column / tasks (truncated;
//! omitted when all zero, as LKP drops all-zero stats), and `scalability`
//! = processes / linear of the last row with more than one task.

use super::{fail, nonempty, number, put, Metrics, ParseContext};
use crate::Result;

const TOOL: &str = "will-it-scale";

pub fn parse(output: &str, ctx: &ParseContext) -> Result<Metrics> {
    if output.lines().any(|l| l.trim().starts_with("tasks,")) {
        parse_csv(output, &ctx.prefix)
    } else {
        parse_harness(output, ctx)
    }
}

fn parse_harness(output: &str, ctx: &ParseContext) -> Result<Metrics> {
    let averages = output
        .lines()
        .filter_map(|l| l.trim().strip_prefix("average:"))
        .map(|v| number(TOOL, v.trim()))
        .collect::<Result<Vec<f64>>>()?;
    if averages.is_empty() {
        return Err(fail(TOOL, "no \"average:\" line (incomplete run)"));
    }
    let tasks = ctx
        .tasks
        .filter(|t| *t > 0)
        .ok_or_else(|| fail(TOOL, "the task count (-t) is needed to read harness output"))?;
    let average = averages.iter().sum::<f64>() / averages.len() as f64;
    let (per, column) = if ctx.threads {
        ("per_thread_ops", "threads")
    } else {
        ("per_process_ops", "processes")
    };
    let mut m = Metrics::new();
    put(&mut m, &ctx.prefix, per, (average / tasks as f64).trunc())?;
    put(&mut m, &ctx.prefix, &format!("{tasks}.{column}"), average)?;
    Ok(m)
}

fn parse_csv(output: &str, prefix: &str) -> Result<Metrics> {
    let mut names: Vec<String> = Vec::new();
    let (mut per_process, mut per_thread, mut scalability) = (Vec::new(), Vec::new(), None);
    let mut m = Metrics::new();
    for line in output.lines().map(str::trim) {
        if line.starts_with("tasks,") {
            names = line.split(',').skip(1).map(str::to_string).collect();
            continue;
        }
        if line.is_empty() || !line.starts_with(|c: char| c.is_ascii_digit()) || !line.contains(',')
        {
            continue;
        }
        let cells: Vec<&str> = line.split(',').collect();
        let tasks: u64 = cells[0]
            .parse()
            .map_err(|_| fail(TOOL, format!("bad task count in {line:?}")))?;
        let values = cells[1..]
            .iter()
            .map(|c| number(TOOL, c))
            .collect::<Result<Vec<f64>>>()?;
        if tasks == 0 {
            continue;
        }
        if values.len() != names.len() || values.len() < 3 {
            return Err(fail(
                TOOL,
                format!("row {line:?} does not match the header"),
            ));
        }
        for (name, v) in names.iter().zip(&values) {
            put(&mut m, prefix, &format!("{tasks}.{name}"), *v)?;
        }
        let linear = values[values.len() - 1];
        if linear != 0.0 && tasks != 1 {
            scalability = Some(values[0] / linear);
        }
        per_process.push(values[0] / tasks as f64);
        per_thread.push(values[2] / tasks as f64);
    }
    let mean = |v: &[f64]| (v.iter().sum::<f64>() / v.len() as f64).trunc();
    if let Some(s) = scalability {
        put(&mut m, prefix, "scalability", s)?;
    }
    if per_process.iter().any(|v| *v != 0.0) {
        put(&mut m, prefix, "per_process_ops", mean(&per_process))?;
    }
    if per_thread.iter().any(|v| *v != 0.0) {
        put(&mut m, prefix, "per_thread_ops", mean(&per_thread))?;
    }
    nonempty(TOOL, m)
}
