//! stress-ng's `.pass` and `.fail` through a whole comparison: 0-day's rule
//! for function stats (lkp-tests' `lib/stats.rb`, `StatCompare` with
//! `function_stat?`), and kbot's verdict, which never takes them for KPIs.

use std::collections::BTreeMap;

use kbot_core::stats::{compare_runs, Side, StatsConfig, ZeroDayReason};
use kbot_core::table::{render, CommitRef, RowFilter, TableInput};

fn run(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// What kbot's stress-ng parser gives for a pipe run that did work, and for
/// one whose bogo-op counter stayed at 0.
fn passed(ops_per_sec: f64) -> BTreeMap<String, f64> {
    run(&[
        ("stress-ng.pipe.pass", 1.0),
        ("stress-ng.pipe.ops", ops_per_sec * 60.0),
        ("stress-ng.pipe.ops_per_sec", ops_per_sec),
    ])
}

fn failed() -> BTreeMap<String, f64> {
    run(&[("stress-ng.pipe.fail", 1.0)])
}

#[test]
fn a_stressor_that_stops_working_is_a_zero_day_change_not_a_kpi() {
    // Two runs a side: too few for any regular stat, not for a function stat.
    let base = vec![passed(500_000.0), passed(501_000.0)];
    let head = vec![passed(499_000.0), failed()];
    let c = compare_runs(&base, &head, &StatsConfig::default()).expect("compares");

    // The new `.fail` is compared although only the head has it, and the
    // base has its counterpart `.pass`.
    let fail = c
        .one_sided
        .iter()
        .find(|m| m.metric == "stress-ng.pipe.fail")
        .expect("the head's new failure is compared");
    assert_eq!(fail.present_in, Side::Head);
    assert!(fail.zero_day.changed, "{:?}", fail.zero_day);
    assert!(!fail.kpi);
    assert_eq!(fail.zero_day.row.function_runs, Some((2, 2)));
    assert_eq!(fail.zero_day.row.change, 50.0);

    // `.pass` lost a run, but the base never failed: upstream only weighs a
    // `.pass` against a base that has a `.fail`.
    let pass = c
        .metrics
        .iter()
        .find(|m| m.metric == "stress-ng.pipe.pass")
        .expect("both sides have .pass");
    assert_eq!(pass.zero_day.reason, ZeroDayReason::NoBaseCounterpart);
    assert!(!pass.kpi, "a function stat is no KPI for kbot's verdict");

    // The performance KPI is judged as before: two runs are too few for
    // 0-day, and kbot asks for more.
    let ops = c
        .metrics
        .iter()
        .find(|m| m.metric == "stress-ng.pipe.ops_per_sec")
        .expect("ops_per_sec");
    assert!(ops.kpi);
    assert_eq!(ops.zero_day.reason, ZeroDayReason::TooFewRuns);
    assert!(!c.runs_wanted(&StatsConfig::default()).none());

    // 0-day's table: the failure first, in its own block.
    let commit = |c: char| CommitRef {
        sha: c.to_string().repeat(40),
        subject: "s".into(),
    };
    let table = TableInput::from_comparison(
        BTreeMap::new(),
        commit('a'),
        commit('b'),
        &c,
        RowFilter::ZeroDayChanged,
    );
    let text = render(&table);
    assert!(
        text.contains("       fail:runs  %reproduction    fail:runs\n"),
        "{text}"
    );
    assert!(
        text.contains("           :2           50%           1:2     stress-ng.pipe.fail\n"),
        "{text}"
    );
}

#[test]
fn a_stressor_failing_on_both_sides_is_no_change() {
    let base = vec![failed(), failed(), passed(500_000.0)];
    let head = vec![failed(), passed(500_000.0), passed(500_000.0)];
    let c = compare_runs(&base, &head, &StatsConfig::default()).expect("compares");
    let fail = c
        .metrics
        .iter()
        .find(|m| m.metric == "stress-ng.pipe.fail")
        .expect("both sides failed");
    // Both sides' largest value is 1 (`changed_function_stat?`).
    assert_eq!(fail.zero_day.reason, ZeroDayReason::SameMaximum);
    assert!(!fail.kpi);
}
