//! pipebench's summary (stderr):
//! `Piped  480.00 MB in 00h00m00.16s:    2.91 GB/second`.
//!
//! pipebench scales with base 1024 by default (`-I` switches to 1000,
//! which its output does not reveal; kbot never passes `-I`), so the rate
//! is converted back to bytes with powers of 1024 and reported as
//! `<p>.MB/sec` in pipebench's own MB (2^20 bytes), with `<p>.bytes` and
//! `<p>.elapsed_sec` (the names kbot-bench uses). Progress lines before the summary are
//! ignored. Several summaries (runs concatenated) are averaged.

use super::{fail, number, put, Metrics};
use crate::Result;

const TOOL: &str = "pipebench";
const MIB: f64 = 1024.0 * 1024.0;

pub fn parse(output: &str, prefix: &str) -> Result<Metrics> {
    let mut runs = Vec::new();
    // Progress lines end in `\r`, so the summary can share a "line" with them.
    for piece in output.split(['\n', '\r']) {
        if let Some(rest) = piece.trim().strip_prefix("Piped ") {
            runs.push(parse_summary(rest)?);
        }
    }
    if runs.is_empty() {
        return Err(fail(
            TOOL,
            "no \"Piped … B/second\" summary (run with -Q or cut short?)",
        ));
    }
    let n = runs.len() as f64;
    let mean = |f: fn(&(f64, f64, f64)) -> f64| runs.iter().map(f).sum::<f64>() / n;
    let mut m = Metrics::new();
    put(&mut m, prefix, "MB/sec", mean(|r| r.2) / MIB)?;
    put(&mut m, prefix, "bytes", mean(|r| r.0))?;
    put(&mut m, prefix, "elapsed_sec", mean(|r| r.1))?;
    Ok(m)
}

/// `480.00 MB in 00h00m00.16s:    2.91 GB/second` → (bytes, seconds, bytes/s).
fn parse_summary(rest: &str) -> Result<(f64, f64, f64)> {
    let words: Vec<&str> = rest.split_whitespace().collect();
    let [amount, unit, "in", time, rate, rate_unit] = words.as_slice() else {
        return Err(fail(TOOL, format!("cannot read summary {rest:?}")));
    };
    let bytes = number(TOOL, amount)? * scale(unit, "B")?;
    let secs = hms_seconds(time.strip_suffix(':').unwrap_or(time))?;
    let rate = number(TOOL, rate)? * scale(rate_unit, "B/second")?;
    Ok((bytes, secs, rate))
}

/// `kB` → 1024, `MB` → 2^20 … for the given unit tail.
fn scale(unit: &str, tail: &str) -> Result<f64> {
    let prefix = unit
        .strip_suffix(tail)
        .ok_or_else(|| fail(TOOL, format!("unexpected unit {unit:?}")))?;
    let power = match prefix {
        "" => 0,
        "k" | "K" => 1,
        "M" => 2,
        "G" => 3,
        "T" => 4,
        "P" => 5,
        "E" => 6,
        _ => return Err(fail(TOOL, format!("unknown unit prefix in {unit:?}"))),
    };
    Ok(1024f64.powi(power))
}

/// `00h00m01.23s` → seconds.
fn hms_seconds(t: &str) -> Result<f64> {
    let bad = || fail(TOOL, format!("bad time {t:?}"));
    let (h, rest) = t.split_once('h').ok_or_else(bad)?;
    let (m, rest) = rest.split_once('m').ok_or_else(bad)?;
    let s = rest.strip_suffix('s').ok_or_else(bad)?;
    Ok(number(TOOL, h)? * 3600.0 + number(TOOL, m)? * 60.0 + number(TOOL, s)?)
}
