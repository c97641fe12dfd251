//! UnixBench `Run` report (LKP `programs/unixbench/parse`).
//!
//! `throughput` is the RESULT of the index table's first row (or, without
//! an index table, the last `<name> N lps (T s, K samples)` line);
//! `score` the `… Benchmarks Index Score` value; `workload` = throughput ×
//! the run's duration from `Benchmark Run: <date> HH:MM:SS - HH:MM:SS`.

use super::{fail, number, put, Metrics};
use crate::Result;

const TOOL: &str = "UnixBench";

pub fn parse(output: &str, prefix: &str) -> Result<Metrics> {
    let mut duration = None;
    let mut throughput = None;
    let mut score = None;
    let mut lines = output.lines().map(str::trim_end);
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("Benchmark Run:") {
            duration = Some(run_duration(rest)?);
        } else if line.contains("Index") && line.ends_with("INDEX") && line.contains("Benchmarks") {
            let row = lines.next().unwrap_or_default();
            let words: Vec<&str> = row.split_whitespace().collect();
            if words.len() >= 3 {
                throughput = Some(number(TOOL, words[words.len() - 2])?);
            }
        } else if line.contains("Benchmarks Index Score") {
            let last = line.split_whitespace().last().unwrap_or_default();
            score = Some(number(TOOL, last)?);
        } else if let Some(v) = result_line(line) {
            throughput = Some(number(TOOL, v)?);
        }
    }
    let duration = duration.ok_or_else(|| fail(TOOL, "no \"Benchmark Run:\" line"))?;
    let throughput = throughput.ok_or_else(|| fail(TOOL, "no result line (incomplete run)"))?;
    let mut m = Metrics::new();
    if let Some(s) = score {
        put(&mut m, prefix, "score", s)?;
    }
    put(&mut m, prefix, "throughput", throughput)?;
    put(&mut m, prefix, "workload", duration * throughput)?;
    Ok(m)
}

/// The number in `Pipe Throughput   2612345.6 lps   (10.0 s, 7 samples)`.
fn result_line(line: &str) -> Option<&str> {
    let (head, tail) = line.split_once('(')?;
    if !(tail.contains(" s, ") && tail.contains("sample")) {
        return None;
    }
    let words: Vec<&str> = head.split_whitespace().collect();
    match words.as_slice() {
        [.., value, "KBps" | "lps" | "lpm" | "score"] => Some(value),
        _ => None,
    }
}

/// ` Mon Nov 30 2026 03:59:12 - 04:04:15` → seconds (wrapping past midnight).
fn run_duration(rest: &str) -> Result<f64> {
    let (start, end) = rest
        .rsplit_once(" - ")
        .ok_or_else(|| fail(TOOL, format!("cannot read run times in {rest:?}")))?;
    let start = clock(start.split_whitespace().last().unwrap_or_default())?;
    let end = clock(end.trim())?;
    Ok(if end > start {
        end - start
    } else {
        end + 86400.0 - start
    })
}

/// `HH:MM:SS` → seconds since midnight.
fn clock(t: &str) -> Result<f64> {
    let parts: Vec<&str> = t.split(':').collect();
    let [h, m, s] = parts.as_slice() else {
        return Err(fail(TOOL, format!("bad clock time {t:?}")));
    };
    Ok(number(TOOL, h)? * 3600.0 + number(TOOL, m)? * 60.0 + number(TOOL, s)?)
}
