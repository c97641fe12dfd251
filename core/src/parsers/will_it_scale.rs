//! will-it-scale: the harness's own output or LKP's runtest.py CSV.
//!
//! Harness (`pipe1_processes -t N -s S`): the `average:<ops/s summed over
//! tasks>` line; LKP reports `per_process_ops` (or `per_thread_ops`) =
//! average / tasks, truncated to an integer as LKP's `%d`, and
//! `<p>.<tasks>.processes` (or `.threads`) and `workload` = the average. The
//! task count and mode come from the [`ParseContext`] since the output has
//! neither. kbot runs one harness execution per task count and mode, where
//! LKP's runtest.py runs them all and prints one CSV row per count;
//! [`combine`] turns the executions into what LKP's parser makes of those
//! rows.
//!
//! runtest.py CSV (`tasks,processes,processes_idle,threads,threads_idle,linear`):
//! as LKP's parser, `<p>.<tasks>.<column>` per row, `per_process_ops` and
//! `per_thread_ops` = the mean over rows of column / tasks (truncated;
//! omitted when all zero, as LKP drops all-zero stats), and `scalability`
//! = processes / linear of the last row with more than one task.

use std::collections::BTreeMap;

use super::{fail, nonempty, number, put, Metrics, ParseContext, Parsed};
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
    put(&mut m, &ctx.prefix, "workload", average)?;
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

/// One runtest.py row: a task count and its processes' and threads' ops/s
/// (summed over tasks; 0 for a mode not run).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Row {
    tasks: u64,
    processes: f64,
    threads: f64,
}

/// Replaces the per-execution `per_process_ops`, `per_thread_ops`,
/// `workload` and `scalability` of the will-it-scale executions in
/// `parsed` (those whose context has a task count) by what LKP gives for
/// the whole run (`programs/will-it-scale/parse` over runtest.py's rows,
/// one row per task count in run order):
/// - `per_process_ops`, `per_thread_ops`: the mean over rows of ops/s per
///   task, truncated (`%d`); left out when it is 0 (a mode not run: LKP
///   prints 0 and drops the all-zero stat when it builds its matrix);
/// - `workload`: the sum over rows of processes' and threads' ops/s;
/// - `scalability`: processes / linear of the last row with more than one
///   task, linear being `tasks × max(processes, threads)` of the 1-task
///   row (0 before it, as runtest.py), printed with `%f`.
///
/// Rows where neither mode did any work are skipped, as LKP's parser does.
/// Repeated executions of one invocation are averaged first. The workload's
/// total ops/s comes from each execution's `workload` (kbot-bench's and the
/// harness parser's), an integer as runtest.py reads it.
pub fn combine(parsed: &[Parsed<'_>], out: &mut Metrics) -> Result<()> {
    let mut prefix = None;
    // Per invocation: its context and the totals of its executions.
    let mut totals: BTreeMap<usize, (&ParseContext, Vec<f64>)> = BTreeMap::new();
    for p in parsed {
        let Some(_) = p.context.tasks else { continue };
        let name = format!("{}.workload", p.context.prefix);
        let total = p.metrics.get(&name).copied().ok_or_else(|| {
            fail(
                TOOL,
                format!("an execution of {name:?} printed no workload"),
            )
        })?;
        prefix.get_or_insert(p.context.prefix.as_str());
        totals
            .entry(p.invocation)
            .or_insert((p.context, Vec::new()))
            .1
            .push(total);
    }
    let Some(prefix) = prefix else {
        return Ok(());
    };
    let mut rows: Vec<Row> = Vec::new();
    for (ctx, values) in totals.values() {
        let tasks = ctx.tasks.unwrap_or(0);
        let total = (values.iter().sum::<f64>() / values.len() as f64).trunc();
        let i = match rows.iter().position(|r| r.tasks == tasks) {
            Some(i) => i,
            None => {
                rows.push(Row {
                    tasks,
                    processes: 0.0,
                    threads: 0.0,
                });
                rows.len() - 1
            }
        };
        if ctx.threads {
            rows[i].threads = total;
        } else {
            rows[i].processes = total;
        }
    }
    for key in [
        "per_process_ops",
        "per_thread_ops",
        "workload",
        "scalability",
    ] {
        out.remove(&format!("{prefix}.{key}"));
    }
    let (mut per_process, mut per_thread) = (Vec::new(), Vec::new());
    let (mut linear, mut workload, mut scalability) = (0.0, 0.0, None);
    for r in rows.iter().filter(|r| r.tasks > 0) {
        // runtest.py sets linear at the 1-task row, before printing it.
        if r.tasks == 1 {
            linear = r.processes.max(r.threads);
        }
        if r.processes == 0.0 && r.threads == 0.0 {
            continue;
        }
        let tasks = r.tasks as f64;
        let linear_column = linear * tasks;
        if linear_column != 0.0 && r.tasks != 1 {
            scalability = Some(r.processes / linear_column);
        }
        per_process.push(r.processes / tasks);
        per_thread.push(r.threads / tasks);
        workload += r.processes + r.threads;
    }
    let mean = |v: &[f64]| (v.iter().sum::<f64>() / v.len() as f64).trunc();
    if let Some(s) = scalability {
        // printf "%f": six decimals.
        put(out, prefix, "scalability", (s * 1e6).round() / 1e6)?;
    }
    if !per_process.is_empty() && mean(&per_process) != 0.0 {
        put(out, prefix, "per_process_ops", mean(&per_process))?;
    }
    if !per_thread.is_empty() && mean(&per_thread) != 0.0 {
        put(out, prefix, "per_thread_ops", mean(&per_thread))?;
    }
    if workload != 0.0 {
        put(out, prefix, "workload", workload.trunc())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parsers::merge_executions;

    fn ctx(tasks: u64, threads: bool) -> ParseContext {
        ParseContext {
            prefix: "will-it-scale".into(),
            tasks: Some(tasks),
            threads,
            ..ParseContext::default()
        }
    }

    /// What kbot-bench prints for one execution.
    fn bench(ctx: &ParseContext, total: f64) -> Metrics {
        let per = if ctx.threads {
            "per_thread_ops"
        } else {
            "per_process_ops"
        };
        let tasks = ctx.tasks.unwrap_or(1) as f64;
        Metrics::from([
            (format!("will-it-scale.{per}"), total / tasks),
            ("will-it-scale.workload".to_string(), total),
            ("will-it-scale.time.elapsed_time".to_string(), 10.0),
        ])
    }

    fn run(points: &[(u64, f64, f64)], modes: &[bool]) -> Metrics {
        let contexts: Vec<ParseContext> = points
            .iter()
            .flat_map(|(t, _, _)| modes.iter().map(move |m| ctx(*t, *m)))
            .collect();
        let parsed: Vec<Parsed<'_>> = contexts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (_, p, t) = points
                    .iter()
                    .find(|(n, _, _)| Some(*n) == c.tasks)
                    .expect("point");
                Parsed {
                    invocation: i,
                    context: c,
                    metrics: bench(c, if c.threads { *t } else { *p }),
                }
            })
            .collect();
        merge_executions(&parsed).expect("merge")
    }

    #[test]
    fn a_sweep_gives_lkps_results() {
        // runtest.py rows (tasks, processes, threads): 1,1000,900 /
        // 4,3600,3000 / 8,6000,5000; linear = 1000 per task.
        let m = run(
            &[(1, 1000.0, 900.0), (4, 3600.0, 3000.0), (8, 6000.0, 5000.0)],
            &[false, true],
        );
        // mean(1000, 900, 750) = 883.3 and mean(900, 750, 625) = 758.3, truncated.
        assert_eq!(m["will-it-scale.per_process_ops"], 883.0);
        assert_eq!(m["will-it-scale.per_thread_ops"], 758.0);
        // Every row's processes and threads, summed.
        assert_eq!(m["will-it-scale.workload"], 19_500.0);
        // The last row: 6000 / (8 × 1000).
        assert_eq!(m["will-it-scale.scalability"], 0.75);
        // Times add up over the six executions.
        assert_eq!(m["will-it-scale.time.elapsed_time"], 60.0);
    }

    #[test]
    fn one_count_and_one_mode() {
        // nr_task 4, both modes: no 1-task row, so no linear and no scalability.
        let m = run(&[(4, 3600.0, 3000.0)], &[false, true]);
        assert_eq!(m["will-it-scale.per_process_ops"], 900.0);
        assert_eq!(m["will-it-scale.per_thread_ops"], 750.0);
        assert_eq!(m["will-it-scale.workload"], 6600.0);
        assert!(!m.contains_key("will-it-scale.scalability"));
        // Processes only: LKP's per_thread_ops is 0, dropped as all-zero.
        let m = run(&[(1, 1001.0, 0.0), (2, 1900.0, 0.0)], &[false]);
        assert_eq!(m["will-it-scale.per_process_ops"], 975.0);
        assert!(!m.contains_key("will-it-scale.per_thread_ops"));
        // 1900 / (2 × 1001) = 0.9490509..., as `%f` prints it.
        assert_eq!(m["will-it-scale.scalability"], 0.949051);
    }

    #[test]
    fn harness_output_combines_the_same_way() {
        let contexts = [ctx(1, false), ctx(2, false)];
        let parsed: Vec<Parsed<'_>> = [("1000", &contexts[0]), ("1500", &contexts[1])]
            .iter()
            .enumerate()
            .map(|(i, (avg, c))| Parsed {
                invocation: i,
                context: c,
                metrics: parse(&format!("testcase:pipe\nwarmup\naverage:{avg}\n"), c)
                    .expect("harness output"),
            })
            .collect();
        let m = merge_executions(&parsed).expect("merge");
        assert_eq!(m["will-it-scale.per_process_ops"], 875.0);
        assert_eq!(m["will-it-scale.workload"], 2500.0);
        assert_eq!(m["will-it-scale.scalability"], 0.75);
        assert_eq!(m["will-it-scale.2.processes"], 1500.0);
    }
}
