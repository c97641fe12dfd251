//! GNU `time -v` (LKP `programs/time/parse`).
//!
//! Each `Field name (unit): value` line becomes `<prefix>.<field_name>`:
//! parenthesised units dropped, spaces to `_`, lowercased; the elapsed time
//! (`h:mm:ss` or `m:ss`) in seconds; `Percent of CPU this job got: 76%`
//! without the `%` (`?` is 0). Use the prefix `<testcase>.time` to get
//! LKP's `lmbench3.time.elapsed_time`. Several `time -v` outputs
//! concatenated (one per command of a job) combine as one run of the whole
//! job would: counters and times add up, the maximum RSS is the maximum,
//! other fields keep the last value.

use super::{fail, nonempty, number, put, Metrics};
use crate::Result;

const TOOL: &str = "GNU time";

pub fn parse(output: &str, prefix: &str) -> Result<Metrics> {
    let mut m = Metrics::new();
    for line in output.lines() {
        if line.contains("Command being timed:") {
            continue;
        }
        // `Command exited with non-zero status 2` has no `: ` and is skipped, as in LKP.
        let Some((raw_key, raw_value)) = line.split_once(": ") else {
            continue;
        };
        let key = normalise_key(raw_key);
        if key.is_empty() {
            // `: 0`, `(x): 1`: no field name, so no `time -v` field.
            continue;
        }
        let value = match key.as_str() {
            "elapsed_time" => clock_seconds(raw_value.trim())?,
            "percent_of_cpu_this_job_got" => match raw_value.trim().trim_end_matches('%') {
                "?" => 0.0,
                v => number(TOOL, v)?,
            },
            _ => number(TOOL, raw_value.trim())?,
        };
        let name = format!("{prefix}.{key}");
        let combined = match (m.get(&name), combine_rule(&key)) {
            (Some(prev), Combine::Sum) => prev + value,
            (Some(prev), Combine::Max) => prev.max(value),
            _ => value,
        };
        put(&mut m, prefix, &key, combined)?;
    }
    nonempty(TOOL, m)
}

/// LKP: strip leading blanks, drop ` (…)`, blanks to `_`, lowercase.
fn normalise_key(raw: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in raw.trim().chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace()
        .collect::<Vec<_>>()
        .join("_")
        .to_lowercase()
}

/// `1:02:03.45`, `0:00.14` → seconds.
fn clock_seconds(v: &str) -> Result<f64> {
    v.split(':').try_fold(0.0, |acc, part| {
        if part.is_empty() {
            return Err(fail(TOOL, format!("bad elapsed time {v:?}")));
        }
        Ok(acc * 60.0 + number(TOOL, part)?)
    })
}

enum Combine {
    Sum,
    Max,
    Last,
}

fn combine_rule(key: &str) -> Combine {
    const SUMMED: &[&str] = &[
        "user_time",
        "system_time",
        "elapsed_time",
        "major_page_faults",
        "minor_page_faults",
        "voluntary_context_switches",
        "involuntary_context_switches",
        "swaps",
        "file_system_inputs",
        "file_system_outputs",
        "socket_messages_sent",
        "socket_messages_received",
        "signals_delivered",
    ];
    if SUMMED.contains(&key) {
        Combine::Sum
    } else if key == "maximum_resident_set_size" {
        Combine::Max
    } else {
        Combine::Last
    }
}
