//! `stress-ng --metrics` / `--metrics-brief` (LKP `programs/stress-ng/parse`).
//!
//! After the `(secs) (secs) (secs)` header row, each stressor row (10
//! fields with `--metrics-brief`, 12 with `--metrics`, counting the
//! `stress-ng: metrc: [pid]` lead) gives `<p>.<stressor>.ops` and
//! `<p>.<stressor>.ops_per_sec` (real time) and `<p>.<stressor>.pass` = 1,
//! or `<p>.<stressor>.fail` = 1 when its bogo ops are 0. Each
//! miscellaneous-metrics row (`pipe 126.77 MB per sec pipe write rate
//! (harmonic mean of 2 instances)`) gives `<p>.<stressor>.<unit>` with the
//! unit normalised as lkp-tests' `lib/tests/stats.rb` (`normalize`) does
//! (`MB_per_sec_pipe_write_rate`, `pipe_read+write_calls_per_sec`), and
//! `<p>.<stressor>.<unit>.pass` = 1, or only `.fail` = 1 when it is 0.
//! Parsing stops at the `run time:` summary, as LKP's does.

use super::{fail, nonempty, number, put, Metrics};
use crate::Result;

const TOOL: &str = "stress-ng";

const AGGREGATES: &[&str] = &[
    "(average",
    "(geometric mean",
    "(geometic mean",
    "(harmonic mean",
    "(total",
    "(maximum",
    "(minimum",
];

pub fn parse(output: &str, prefix: &str) -> Result<Metrics> {
    let mut m = Metrics::new();
    let mut in_table = false;
    for line in output.lines() {
        if line.contains("this stressor is not implemented on this system")
            || line.contains("No stress workers invoked")
        {
            return Err(fail(TOOL, line.trim().to_string()));
        }
        if line.contains("fail:") || line.contains("warn:") {
            continue;
        }
        if line.contains("run time:") {
            break;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if words
            .windows(3)
            .any(|w| w == ["(secs)", "(secs)", "(secs)"])
        {
            in_table = true;
        } else if in_table {
            match AGGREGATES.iter().find_map(|a| line.find(a)) {
                Some(cut) => misc_row(&mut m, prefix, &line[..cut])?,
                None => major_row(&mut m, prefix, &words)?,
            }
        }
    }
    nonempty(TOOL, m)
}

fn major_row(m: &mut Metrics, prefix: &str, words: &[&str]) -> Result<()> {
    if words.len() != 10 && words.len() != 12 {
        return Ok(());
    }
    let stressor = words[3];
    let ops = number(TOOL, words[4])?;
    if ops == 0.0 {
        return put(m, prefix, &format!("{stressor}.fail"), 1.0);
    }
    put(m, prefix, &format!("{stressor}.pass"), 1.0)?;
    put(m, prefix, &format!("{stressor}.ops"), ops)?;
    put(
        m,
        prefix,
        &format!("{stressor}.ops_per_sec"),
        number(TOOL, words[8])?,
    )
}

fn misc_row(m: &mut Metrics, prefix: &str, head: &str) -> Result<()> {
    let words: Vec<&str> = head.split_whitespace().collect();
    if words.len() < 6 {
        return Err(fail(TOOL, format!("cannot read metrics row {head:?}")));
    }
    let stressor = words[3];
    let unit = normalize(&words[5..].join("_"));
    let value = number(TOOL, words[4])?;
    if value == 0.0 {
        return put(m, prefix, &format!("{stressor}.{unit}.fail"), 1.0);
    }
    put(m, prefix, &format!("{stressor}.{unit}.pass"), 1.0)?;
    put(m, prefix, &format!("{stressor}.{unit}"), value)
}

/// `LKP::Stats.normalize`: every run of blanks, `,`, `"`, `_`, `[`, `]`,
/// `(`, `)` and `:` becomes one `_`, leading and trailing `_` go, and a run
/// of four or more dots becomes one.
fn normalize(unit: &str) -> String {
    let separator = |c: char| c.is_whitespace() || ",\"_[]():".contains(c);
    let mut joined = String::new();
    for c in unit.trim().chars() {
        if !separator(c) {
            joined.push(c);
        } else if !joined.ends_with('_') {
            joined.push('_');
        }
    }
    let mut out = String::new();
    let mut dots = 0;
    for c in joined
        .trim_matches('_')
        .chars()
        .chain(std::iter::once('\0'))
    {
        if c == '.' {
            dots += 1;
            continue;
        }
        let run = if dots >= 4 { 1 } else { dots };
        out.extend(std::iter::repeat_n('.', run));
        dots = 0;
        if c != '\0' {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_normalised_as_lkp_does() {
        for (unit, want) in [
            ("MB per sec pipe write rate", "MB_per_sec_pipe_write_rate"),
            (
                "pipe read+write calls per sec",
                "pipe_read+write_calls_per_sec",
            ),
            ("memory rate (Mflop per sec)", "memory_rate_Mflop_per_sec"),
            ("% of 4096 pthreads created", "%_of_4096_pthreads_created"),
            ("/dev/kmem mmaps succeed", "/dev/kmem_mmaps_succeed"),
            (
                "nanosecs per call (excluding test overhead",
                "nanosecs_per_call_excluding_test_overhead",
            ),
            ("_a__b: \"c\", [d]_", "a_b_c_d"),
            ("x...y....z.....", "x...y.z."),
        ] {
            assert_eq!(normalize(unit), want, "{unit}");
        }
    }
}
