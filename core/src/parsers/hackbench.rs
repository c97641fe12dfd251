//! rt-tests hackbench (LKP `programs/hackbench/parse`).
//!
//! Reads one or more runs: `Running in … (== T tasks)`, `Each sender will
//! pass L messages of S bytes`, `Time: X`. As LKP: `kb = (T·L·S) >> 10`
//! (a KB/s-like proxy, not the true byte count), `throughput = kb / best`
//! (best = shortest time), `throughput_best` the same, `throughput_avg`
//! (`kb` over the mean time, rounded to 2 places) and `throughput_worst`;
//! plus `time_sec` (mean). kbot runs each iteration as its own execution,
//! so [`combine`] gives the same figures over the executions.

use super::{fail, number, put, Metrics, Parsed};
use crate::Result;

const TOOL: &str = "hackbench";

pub fn parse(output: &str, prefix: &str) -> Result<Metrics> {
    let mut tasks: Option<u64> = None;
    let mut per_sender: Option<(u64, u64)> = None;
    let mut times = Vec::new();
    for line in output.lines().map(str::trim) {
        if line.starts_with("Running in ") {
            tasks = Some(parse_tasks(line)?);
        } else if let Some(rest) = line
            .strip_prefix("Each sender will pass ")
            .or_else(|| line.strip_prefix("Each sender passed "))
        {
            per_sender = Some(parse_messages(rest)?);
        } else if let Some(t) = line.strip_prefix("Time:") {
            times.push(number(TOOL, t.trim())?);
        }
    }
    let tasks = tasks.ok_or_else(|| fail(TOOL, "no \"Running in … tasks)\" line"))?;
    let (messages, bytes) =
        per_sender.ok_or_else(|| fail(TOOL, "no \"Each sender will pass\" line"))?;
    if times.is_empty() {
        return Err(fail(TOOL, "no \"Time:\" line (incomplete run)"));
    }
    if times.iter().any(|t| *t <= 0.0) {
        return Err(fail(TOOL, "a run reported a time of zero"));
    }
    let kb = ((u128::from(tasks) * u128::from(messages) * u128::from(bytes)) >> 10) as f64;
    let best = times.iter().copied().fold(f64::INFINITY, f64::min);
    let worst = times.iter().copied().fold(0.0, f64::max);
    let avg = times.iter().sum::<f64>() / times.len() as f64;
    let mut m = Metrics::new();
    put(&mut m, prefix, "throughput", kb / best)?;
    put(&mut m, prefix, "throughput_best", kb / best)?;
    put(
        &mut m,
        prefix,
        "throughput_avg",
        ((kb / avg) * 100.0).round() / 100.0,
    )?;
    put(&mut m, prefix, "throughput_worst", kb / worst)?;
    put(&mut m, prefix, "time_sec", avg)?;
    Ok(m)
}

/// `Running in process mode with 10 groups using 40 file descriptors each (== 400 tasks)`.
fn parse_tasks(line: &str) -> Result<u64> {
    let inner = line
        .rsplit_once("(==")
        .and_then(|(_, r)| r.trim().strip_suffix("tasks)"))
        .ok_or_else(|| fail(TOOL, format!("cannot read the task count in {line:?}")))?;
    inner
        .trim()
        .parse()
        .map_err(|_| fail(TOOL, format!("bad task count in {line:?}")))
}

/// `100 messages of 100 bytes` (and LKP's `… bytes in average`).
fn parse_messages(rest: &str) -> Result<(u64, u64)> {
    let words: Vec<&str> = rest.split_whitespace().collect();
    match words.as_slice() {
        [l, "messages", "of", s, "bytes", ..] => match (l.parse(), s.parse()) {
            (Ok(l), Ok(s)) => Ok((l, s)),
            _ => Err(fail(TOOL, format!("bad message counts in {rest:?}"))),
        },
        _ => Err(fail(TOOL, format!("cannot read {rest:?}"))),
    }
}

/// Replaces the averaged throughputs of hackbench's iterations (the
/// executions whose context has `hackbench_iterations`) by what LKP's parse
/// prints over the log of all of them. Each execution is one iteration, one
/// `Time:` (LKP's run script starts hackbench once per iteration, and so
/// does kbot), and its `throughput` is `kb / time` with the same `kb`: so
/// `throughput` and `throughput_best` are the highest, `throughput_worst`
/// the lowest, and `throughput_avg`, `kb` over the mean time, is their
/// harmonic mean, rounded to 2 places.
pub fn combine(parsed: &[Parsed<'_>], out: &mut Metrics) -> Result<()> {
    let mut prefix = None;
    let mut throughputs = Vec::new();
    for p in parsed.iter().filter(|p| p.context.hackbench_iterations) {
        let name = format!("{}.throughput", p.context.prefix);
        let t = p.metrics.get(&name).copied().ok_or_else(|| {
            fail(
                TOOL,
                format!("an iteration of {name:?} printed no throughput"),
            )
        })?;
        if t < 0.0 {
            return Err(fail(TOOL, format!("an iteration's {name:?} is negative")));
        }
        prefix.get_or_insert(p.context.prefix.as_str());
        throughputs.push(t);
    }
    let Some(prefix) = prefix else {
        return Ok(());
    };
    let best = throughputs.iter().copied().fold(0.0, f64::max);
    let worst = throughputs.iter().copied().fold(f64::INFINITY, f64::min);
    // A zero throughput is a zero kb, the same for every iteration.
    let avg = if worst == 0.0 {
        0.0
    } else {
        throughputs.len() as f64 / throughputs.iter().map(|t| 1.0 / t).sum::<f64>()
    };
    put(out, prefix, "throughput", best)?;
    put(out, prefix, "throughput_best", best)?;
    put(out, prefix, "throughput_avg", (avg * 100.0).round() / 100.0)?;
    put(out, prefix, "throughput_worst", worst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parsers::{merge_executions, ParseContext, Tool};

    /// One iteration as LKP's run log holds it (lkp-tests'
    /// `spec/fixtures/stats/hackbench/hackbench`).
    fn iteration(time: &str) -> String {
        format!(
            "Running in process mode with 256 groups using 40 file descriptors each (== 10240 tasks)\n\
             Each sender will pass 30000 messages of 100 bytes\n\
             Time: {time}\n"
        )
    }

    const TIMES: [&str; 8] = [
        "9.541", "10.018", "12.241", "9.950", "10.014", "10.497", "9.924", "9.998",
    ];

    /// What upstream's parse prints for the eight iterations of its fixture
    /// (`spec/fixtures/stats/hackbench/hackbench.yaml`).
    const UPSTREAM: [(&str, f64); 4] = [
        ("hackbench.throughput", 3144324.4942878103),
        ("hackbench.throughput_best", 3144324.4942878103),
        ("hackbench.throughput_avg", 2920311.99),
        ("hackbench.throughput_worst", 2450780.165019198),
    ];

    fn assert_upstream(m: &Metrics) {
        for (name, want) in UPSTREAM {
            let got = m[name];
            assert!(
                (got - want).abs() <= want * 1e-12,
                "{name}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn one_log_of_all_iterations_gives_upstreams_figures() {
        let log: String = TIMES.iter().map(|t| iteration(t)).collect();
        assert_upstream(&parse(&log, "hackbench").expect("parses"));
    }

    #[test]
    fn iterations_run_one_by_one_combine_to_upstreams_figures() {
        let ctx = ParseContext {
            hackbench_iterations: true,
            ..ParseContext::new("hackbench")
        };
        let parsed: Vec<Parsed<'_>> = TIMES
            .iter()
            .map(|t| Parsed {
                invocation: 0,
                context: &ctx,
                metrics: parse(&iteration(t), "hackbench").expect("parses"),
            })
            .collect();
        let m = merge_executions(&parsed).expect("merges");
        assert_upstream(&m);
        // The mean of the eight times, as before.
        assert!((m["hackbench.time_sec"] - 82.183 / 8.0).abs() < 1e-9);
        // kbot-bench's executions carry `throughput` only: the same figures.
        let bench: Vec<Metrics> = TIMES
            .iter()
            .map(|t| {
                let secs: f64 = t.parse().expect("number");
                let kb = ((10240u64 * 30000 * 100) >> 10) as f64;
                Metrics::from([
                    ("hackbench.throughput".to_string(), kb / secs),
                    ("hackbench.time_sec".to_string(), secs),
                ])
            })
            .collect();
        let parsed: Vec<Parsed<'_>> = bench
            .into_iter()
            .map(|metrics| Parsed {
                invocation: 0,
                context: &ctx,
                metrics,
            })
            .collect();
        assert_upstream(&merge_executions(&parsed).expect("merges"));
    }

    #[test]
    fn other_repeated_runs_are_still_averaged() {
        let ctx = ParseContext::new("hackbench");
        let outputs = [iteration("1.0"), iteration("3.0")];
        let parsed: Vec<Parsed<'_>> = outputs
            .iter()
            .map(|o| Parsed {
                invocation: 0,
                context: &ctx,
                metrics: crate::parsers::parse(Tool::Hackbench, o, &ctx).expect("parses"),
            })
            .collect();
        let m = merge_executions(&parsed).expect("merges");
        let kb = ((10240u64 * 30000 * 100) >> 10) as f64;
        assert!((m["hackbench.throughput"] - (kb + kb / 3.0) / 2.0).abs() < 1e-6);
    }
}
