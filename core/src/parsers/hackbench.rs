//! rt-tests hackbench (LKP `programs/hackbench/parse`).
//!
//! Reads one or more runs: `Running in … (== T tasks)`, `Each sender will
//! pass L messages of S bytes`, `Time: X`. As LKP: `kb = (T·L·S) >> 10`
//! (a KB/s-like proxy, not the true byte count), `throughput = kb / best`
//! (best = shortest time), `throughput_best` the same, `throughput_avg`
//! (rounded to 2 places) and `throughput_worst`; plus `time_sec` (mean).

use super::{fail, number, put, Metrics};
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
