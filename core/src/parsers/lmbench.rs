//! lmbench3 `bw_pipe` and `lat_pipe` (LKP `programs/lmbench3/parse`).
//!
//! `Pipe bandwidth: 3042.74 MB/sec` → `<p>.PIPE.bandwidth.MB/sec`,
//! `Pipe latency: 7.9239 microseconds` → `<p>.PIPE.latency.us`, and the
//! AF_UNIX stream pair likewise. A key seen on several lines (runs
//! concatenated) is averaged, as LKP's matrix does with repeated samples.

use std::collections::BTreeMap;

use super::{fail, nonempty, number, put, Metrics};
use crate::Result;

const TOOL: &str = "lmbench";

/// Line prefix, expected unit word, metric key.
const LINES: &[(&str, &str, &str)] = &[
    ("Pipe bandwidth:", "MB/sec", "PIPE.bandwidth.MB/sec"),
    ("Pipe latency:", "microseconds", "PIPE.latency.us"),
    (
        "AF_UNIX sock stream bandwidth:",
        "MB/sec",
        "AF_UNIX.sock.stream.bandwidth.MB/sec",
    ),
    (
        "AF_UNIX sock stream latency:",
        "microseconds",
        "AF_UNIX.sock.stream.latency.us",
    ),
];

pub fn parse(output: &str, prefix: &str) -> Result<Metrics> {
    let mut samples: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for line in output.lines().map(str::trim) {
        for (head, unit, key) in LINES {
            let Some(rest) = line.strip_prefix(head) else {
                continue;
            };
            let mut words = rest.split_whitespace();
            let (Some(value), Some(u)) = (words.next(), words.next()) else {
                return Err(fail(TOOL, format!("truncated line {line:?}")));
            };
            if u != *unit {
                return Err(fail(TOOL, format!("unexpected unit {u:?} in {line:?}")));
            }
            samples.entry(key).or_default().push(number(TOOL, value)?);
        }
    }
    let mut m = Metrics::new();
    for (key, values) in samples {
        put(
            &mut m,
            prefix,
            key,
            values.iter().sum::<f64>() / values.len() as f64,
        )?;
    }
    nonempty(TOOL, m)
}
