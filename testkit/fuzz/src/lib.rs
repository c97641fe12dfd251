//! Runs a property target: a few cases under `cargo test`, and under
//! `scripts/fuzz` (`KBOT_FUZZ_SECS`) batch after batch of fresh random cases
//! until the time is up, counting executions. A case slower than
//! [`CASE_LIMIT`] fails as a hang; the process's peak RSS is printed so the
//! script can hold it against a bound. Shared by core's and server's targets.
//!
//! A crate of its own beside `kbot-testkit` (which links the server) so that
//! kbot-core's tests build without the server.

use std::cell::Cell;
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

/// One case taking this long is a hang (debug build, inputs of a few KiB).
pub const CASE_LIMIT: Duration = Duration::from_secs(5);

/// Cases per batch under `cargo test`, and under `scripts/fuzz`.
const QUICK_CASES: u32 = 64;
const LONG_BATCH: u32 = 256;

/// Runs `test` on values of `strategy`; panics with the shrunk input on failure.
pub fn run<S: Strategy>(
    name: &str,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let secs: Option<u64> = std::env::var("KBOT_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    let cases = if secs.is_some() {
        LONG_BATCH
    } else {
        QUICK_CASES
    };
    let started = Instant::now();
    let deadline = secs.map(|s| started + Duration::from_secs(s));
    let executions = Cell::new(0u64);
    loop {
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let outcome = runner.run(&strategy, |value| {
            // The batch's last cases after the deadline are generated but not run.
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(());
            }
            executions.set(executions.get() + 1);
            let t = Instant::now();
            test(value)?;
            if t.elapsed() > CASE_LIMIT {
                return Err(TestCaseError::fail(format!("took {:?}", t.elapsed())));
            }
            Ok(())
        });
        match outcome {
            Ok(()) => {}
            Err(TestError::Fail(why, value)) => {
                panic!("fuzz {name}: {why}\nminimal failing input: {value:?}")
            }
            Err(TestError::Abort(why)) => panic!("fuzz {name}: aborted: {why}"),
        }
        if deadline.is_none_or(|d| Instant::now() >= d) {
            break;
        }
    }
    println!(
        "fuzz {name}: {} executions in {:.1} s, no failure, peak RSS {} KiB",
        executions.get(),
        started.elapsed().as_secs_f64(),
        peak_rss_kib()
    );
}

/// VmHWM of this process.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Text with what breaks parsers and headers: control characters, CR and
/// LF, separators, numbers at the edges, non-ASCII; up to `max` chars.
pub fn hostile_text(max: usize) -> impl Strategy<Value = String> {
    use proptest::prelude::*;
    let piece = prop_oneof![
        4 => "[ -~]{0,12}",
        2 => Just("\r\n".to_string()),
        2 => Just("\n".to_string()),
        1 => Just("\r".to_string()),
        1 => "[\\x00-\\x1f\\x7f]{1,3}",
        1 => "\\PC{1,4}",
        1 => prop::sample::select(vec![
            "1e309", "-1e309", "NaN", "inf", "-0", "0x10", "1.7976931348623157e308",
            "99999999999999999999999999", "4.9e-324", ": ", "---", "- ", "{", "}", "[", "]",
            "&a", "*a", "<< :", "|", ">", "#", "\"", "'", "\t", "%", "=?utf-8?B?", "Bcc: x@y",
        ])
        .prop_map(str::to_string),
    ];
    prop::collection::vec(piece, 0..=max / 4).prop_map(move |v| {
        let s: String = v.concat();
        s.chars().take(max).collect()
    })
}
