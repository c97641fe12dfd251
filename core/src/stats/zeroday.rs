//! 0-day's changed-stat rule, exactly as `lib/stats.rb` (`StatCompare`) and
//! `lib/changed_stat.rb` (intel/lkp-tests) apply it by default,
//! with the inputs `lkp compare` (`lib/compare.rb`) gives it.
//!
//! Inputs are one [`Sample`] per run of each side: lkp's result matrices
//! hold one column per run (`stats_source`), and a run without the stat is
//! padded with an integer 0 (`matrix_fill_missing_zeros` when the matrix is
//! loaded; `StatCompare#calculate_matrix_values` for a stat a whole side
//! lacks). So the run counts are the number of runs, whatever each run
//! printed, and a stat that vanishes is compared against zeros.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::metrics;

/// Why 0-day calls a stat changed or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ZeroDayReason {
    /// Passed every test.
    Changed,
    /// `lkp compare` leaves the stat out unless asked for more (`-m`): it is
    /// on lkp-tests' stat deny list and on neither allow list
    /// (`StatCompare#skip_stat?`, see [`shown_by_default`]).
    HiddenByDefault,
    /// Both sides have fewer than 3 runs (`skip_regular_stat?`).
    TooFewRuns,
    /// Nothing was left of a side once `-1` placeholders were dropped and
    /// the margins trimmed (`calculate_matrix_values` returns nothing).
    NoSamples,
    /// The min/median/max separation test failed.
    RangesOverlap,
    /// `ratio ≤ 1.01`, or `≤ 1.05` for a stat that is not a perf metric.
    BelowRatioFloor,
    /// `reasonable_perf_change?` rejected it (per-metric absolute floors).
    BelowAbsoluteFloor,
    /// perf-profile threshold rule: neither median is above the threshold.
    BelowPerfProfileThreshold,
    /// A function stat whose counterpart the base lacks: a `.fail`,
    /// `.error` or `.warn` without `<stat>.pass` in the base, or a `.pass`
    /// without `<stat>.fail`, `.error` or `.warn` there
    /// (`skip_function_stat?`).
    NoBaseCounterpart,
    /// A function stat whose largest value is the same on both sides
    /// (`changed_function_stat?`).
    SameMaximum,
}

/// The numbers of a stat's row in `lkp compare`'s table (`calc_avg_stddev`,
/// `calc_perf_change`), from the padded samples: every run counts, a
/// missing one as 0, and `-1` placeholders are averaged like any value.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ZeroDayRow {
    pub base_mean: f64,
    /// `100·σ/mean` (population σ), signed like the mean; σ itself when the
    /// mean is 0; 0 with fewer than 2 runs (lkp's `-1`, never shown).
    pub base_stddev_pct: f64,
    pub head_mean: f64,
    pub head_stddev_pct: f64,
    /// `100·(head − base)/base`, with a base mean of 0 taken as 1e-100 (and
    /// 0 when the means are equal: 0 → 0 is no change); the difference of
    /// the means for perf-profile and `%` stats.
    pub change: f64,
    /// For a function stat, the runs of each side `(base, head)`: `lkp
    /// compare` then prints `fail:runs` (the means are the sums of the
    /// samples, the runs that failed or passed) and `change` is the change
    /// of that share in percentage points (`calc_failure_change`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_runs: Option<(usize, usize)>,
}

/// 0-day's verdict on one stat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZeroDayVerdict {
    pub changed: bool,
    pub reason: ZeroDayReason,
    /// `med_hi / med_lo` of the trimmed samples, capped at 5.
    pub ratio: f64,
    /// What `lkp compare` prints for the stat.
    #[serde(default)]
    pub row: ZeroDayRow,
}

/// One run's value of a stat, as lkp's matrix holds it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sample {
    /// What the run printed (a float, as every kbot sample is).
    Value(f64),
    /// The run did not print the stat: lkp pads it with the integer 0.
    Missing,
}

impl Sample {
    pub fn value(self) -> f64 {
        match self {
            Sample::Value(v) => v,
            Sample::Missing => 0.0,
        }
    }

    /// Ruby's class of the padded value: an Integer, where a printed value
    /// of the stats kbot has is a Float.
    fn is_integer(self) -> bool {
        self == Sample::Missing
    }
}

/// 0-day's default ratio cap (`skip_small_change?`).
const RATIO_CAP: f64 = 5.0;
/// "`time.elapsed_time` only has 0.01 s precision", so every stat needs > 1%.
const RATIO_FLOOR_ALL: f64 = 1.01;
/// Stats that are not perf metrics need > 5%.
const RATIO_FLOOR_NON_PERF: f64 = 1.05;
/// `skip_regular_stat?`: at least one side needs 3 runs.
const MIN_RUNS_ONE_SIDE: usize = 3;
/// `lkp compare`'s built-in perf-profile threshold, the Integer 5.
const DEFAULT_PERF_PROFILE_THRESHOLD: f64 = 5.0;
/// `sort_remove_margin`: trim `n >> 5` from each end...
const MARGIN_SHIFT: u32 = 5;
/// ...but at most this many (`max_margin` of a regular stat)...
const MAX_MARGIN: usize = 3;
/// ...and at most 1 from the head when the base has at most 3 runs.
const MAX_MARGIN_SMALL_BASE: usize = 1;

/// Monitors on lkp-tests' `etc/stat-denylist` that neither `etc/stat-allowlist`
/// nor `etc/report-allowlist` lets back in (`^<monitor>\.`): `lkp compare`
/// skips their stats unless run with `-m`. Of kbot's monitors these are
/// `interrupts`, `softirqs`, `buddyinfo` and `slabinfo`; the rest are listed
/// so that a metric kbot may add later is judged as upstream judges it.
const HIDDEN_MONITORS: &[&str] = &[
    "buddyinfo",
    "diskstats",
    "interrupts",
    "max_iostat",
    "pagetypeinfo",
    "slabinfo",
    "softirqs",
    "tcrypt",
    "zoneinfo",
];

/// Unanchored entries of `etc/stat-denylist` (substrings of any stat name).
const HIDDEN_ANYWHERE: &[&str] = &[
    "Modules_linked_in",
    "Spectre_v2_mitigation",
    "{#:#}",
    "},at",
];

/// Whether `lkp compare` considers `metric` without `-m` (`skip_stat?`:
/// `bisectable_stat?` or `ReportAllowlist`). The deny list's other entries
/// name tests and logs kbot never produces (`dmesg.*`, `kmsg.*`,
/// `last_state.*`, `aim7.*`, ...); its monitors that the report allow list
/// lets back in (`vmstat`, `proc-vmstat`, `perf-stat`, `perf-profile`,
/// `time`, `meminfo`, ...) are shown.
pub fn shown_by_default(metric: &str) -> bool {
    let prefix = metrics::prefix(metric);
    let denied = (metric.contains('.') && HIDDEN_MONITORS.contains(&prefix))
        || HIDDEN_ANYWHERE.iter().any(|s| metric.contains(s));
    // etc/stat-allowlist's `^stress-ng\..+\.fail`.
    let allowed = metric
        .strip_prefix("stress-ng.")
        .and_then(|rest| rest.strip_suffix(".fail"))
        .is_some_and(|mid| !mid.is_empty());
    !denied || allowed
}

/// Apply 0-day's rule to `metric` when every run of both sides has it and
/// the base has no other stat: a function stat ([`metrics::is_function_stat`])
/// then has no counterpart in the base and is never called changed; use
/// [`verdict_padded`] with the base's stat names for those.
pub fn verdict(
    metric: &str,
    base: &[f64],
    head: &[f64],
    perf_profile_threshold: Option<f64>,
) -> ZeroDayVerdict {
    let wrap = |v: &[f64]| v.iter().map(|x| Sample::Value(*x)).collect::<Vec<_>>();
    let base_stats = BTreeSet::from([metric.to_string()]);
    verdict_padded(
        metric,
        &wrap(base),
        &wrap(head),
        &base_stats,
        perf_profile_threshold,
    )
}

/// Apply 0-day's rule to one sample per run of each side ([`Sample::Missing`]
/// where a run lacks the stat). `base_stats` are the stat names some run of
/// the base has: the rule for function stats looks up a stat's counterpart
/// there. `perf_profile_threshold` is `lkp compare -p X`; `None` is its
/// built-in Integer 5, which only applies where the head's median is an
/// Integer, i.e. a padded 0 (Ruby's `is_a?` test).
pub fn verdict_padded(
    metric: &str,
    base: &[Sample],
    head: &[Sample],
    base_stats: &BTreeSet<String>,
    perf_profile_threshold: Option<f64>,
) -> ZeroDayVerdict {
    if metrics::is_function_stat(metric) {
        return function_verdict(metric, base, head, base_stats);
    }
    let row = table_row(metric, base, head);
    let not = |reason, ratio| ZeroDayVerdict {
        changed: false,
        reason,
        ratio,
        row,
    };
    if !shown_by_default(metric) {
        return not(ZeroDayReason::HiddenByDefault, 1.0);
    }
    // Runs, not samples: each side's matrix has one column per run.
    if head.len() < MIN_RUNS_ONE_SIDE && base.len() < MIN_RUNS_ONE_SIDE {
        return not(ZeroDayReason::TooFewRuns, 1.0);
    }
    let b = trimmed(base, MAX_MARGIN);
    let head_margin = if base.len() <= 3 {
        MAX_MARGIN_SMALL_BASE
    } else {
        MAX_MARGIN
    };
    let a = trimmed(head, head_margin);
    if a.is_empty() || b.is_empty() {
        return not(ZeroDayReason::NoSamples, 1.0);
    }
    let (min_a, med_a, max_a) = min_med_max(&a);
    let (min_b, med_b, max_b) = min_med_max(&b);
    let (va, vb) = (med_a.value(), med_b.value());
    let (ratio, delta) = median_ratio(va, vb);
    let changed = ZeroDayVerdict {
        changed: true,
        reason: ZeroDayReason::Changed,
        ratio,
        row,
    };
    let profile = metrics::is_perf_profile(metric);
    // `changed_stats?`: the threshold replaces the separation test when it
    // is of the head median's class (Integer 5 by default, a Float with -p).
    let threshold = match perf_profile_threshold {
        Some(t) if !med_a.is_integer() => Some(t),
        None if med_a.is_integer() => Some(DEFAULT_PERF_PROFILE_THRESHOLD),
        _ => None,
    };
    if let (true, Some(t)) = (profile, threshold) {
        return if va > t || vb > t {
            changed
        } else {
            not(ZeroDayReason::BelowPerfProfileThreshold, ratio)
        };
    }
    let (min_a, max_a, min_b, max_b) = (min_a.value(), max_a.value(), min_b.value(), max_b.value());
    let separated = (min_b > va && vb > max_a) || (min_a > vb && va > max_b);
    if !separated {
        return not(ZeroDayReason::RangesOverlap, ratio);
    }
    if profile {
        // lkp compare always passes a perf-profile option, so
        // skip_small_change? never filters perf-profile stats.
        return changed;
    }
    if let Some(reason) = small_change(metric, ratio, max_a.max(max_b), delta) {
        return not(reason, ratio);
    }
    changed
}

/// The ratio of the larger median to the smaller (capped at `RATIO_CAP`,
/// and the cap when the smaller is not positive) and their difference.
fn median_ratio(va: f64, vb: f64) -> (f64, f64) {
    let (hi, lo) = (va.max(vb), va.min(vb));
    let ratio = if lo > 0.0 {
        (hi / lo).min(RATIO_CAP)
    } else {
        RATIO_CAP
    };
    (ratio, hi - lo)
}

/// `skip_small_change?`: why a change of `ratio` (medians `delta` apart,
/// largest value `max`) is too small to count, if it is: the ratio floors,
/// then the absolute floors.
fn small_change(metric: &str, ratio: f64, max: f64, delta: f64) -> Option<ZeroDayReason> {
    if ratio <= RATIO_FLOOR_ALL
        || (!metrics::is_perf_metric(metric) && ratio <= RATIO_FLOOR_NON_PERF)
    {
        Some(ZeroDayReason::BelowRatioFloor)
    } else if !metrics::passes_absolute_floor(metric, max, delta) {
        Some(ZeroDayReason::BelowAbsoluteFloor)
    } else {
        None
    }
}

/// 0-day's rule for a function stat (`StatCompare` with `is_function_stat`):
/// compared whatever the run counts and even when the base lacks it (its
/// runs are zeros), but only when the base has its counterpart
/// (`skip_function_stat?`); no margin is trimmed; changed when the largest
/// values of the two sides differ (`changed_function_stat?`) and the ratio
/// of the medians and the absolute floors pass as for any stat
/// (`skip_small_change?`). `dmesg.*`, `kmsg.*`, `last_state.*` and
/// `stderr.*` need no counterpart.
fn function_verdict(
    metric: &str,
    base: &[Sample],
    head: &[Sample],
    base_stats: &BTreeSet<String>,
) -> ZeroDayVerdict {
    let row = function_row(base, head);
    let not = |reason, ratio| ZeroDayVerdict {
        changed: false,
        reason,
        ratio,
        row,
    };
    if !shown_by_default(metric) {
        return not(ZeroDayReason::HiddenByDefault, 1.0);
    }
    if lacks_base_counterpart(metric, base_stats) {
        return not(ZeroDayReason::NoBaseCounterpart, 1.0);
    }
    let (b, a) = (trimmed(base, 0), trimmed(head, 0));
    if a.is_empty() || b.is_empty() {
        return not(ZeroDayReason::NoSamples, 1.0);
    }
    let (_, med_a, max_a) = min_med_max(&a);
    let (_, med_b, max_b) = min_med_max(&b);
    let (va, vb) = (med_a.value(), med_b.value());
    let (ratio, delta) = median_ratio(va, vb);
    let (max_a, max_b) = (max_a.value(), max_b.value());
    if max_a == max_b {
        return not(ZeroDayReason::SameMaximum, ratio);
    }
    if let Some(reason) = small_change(metric, ratio, max_a.max(max_b), delta) {
        return not(reason, ratio);
    }
    ZeroDayVerdict {
        changed: true,
        reason: ZeroDayReason::Changed,
        ratio,
        row,
    }
}

/// `skip_function_stat?`: a `.error`, `.warn` or `.fail` stat is compared
/// only when the base has `<stat>.pass`, a `.pass` stat only when the base
/// has `<stat>.error`, `.warn` or `.fail` ("only consider pass and fail").
fn lacks_base_counterpart(metric: &str, base_stats: &BTreeSet<String>) -> bool {
    const LOGS: &[&str] = &["dmesg", "kmsg", "last_state", "stderr"];
    if LOGS.contains(&metrics::prefix(metric)) && metric.contains('.') {
        return false;
    }
    let Some((stat, last)) = metric.rsplit_once('.') else {
        return false;
    };
    let has = |suffix: &str| base_stats.contains(&format!("{stat}.{suffix}"));
    match last {
        "error" | "warn" | "fail" => !has("pass"),
        "pass" => !["error", "warn", "fail"].iter().any(|s| has(s)),
        _ => false,
    }
}

/// `lkp compare`'s row for a function stat (`calc_failure_fail`,
/// `calc_failure_change`): how many runs of each side failed (or passed),
/// the sum of the samples, and the change of their share of the runs in
/// percentage points.
fn function_row(base: &[Sample], head: &[Sample]) -> ZeroDayRow {
    let sum = |v: &[Sample]| v.iter().map(|s| s.value()).sum::<f64>();
    let share = |v: &[Sample]| {
        if v.is_empty() {
            0.0
        } else {
            sum(v) / v.len() as f64
        }
    };
    ZeroDayRow {
        base_mean: sum(base),
        base_stddev_pct: 0.0,
        head_mean: sum(head),
        head_stddev_pct: 0.0,
        change: 100.0 * (share(head) - share(base)),
        function_runs: Some((base.len(), head.len())),
    }
}

/// `sort_remove_margin` with `sorted` (lib/statistics.rb): the margin is
/// `min(n >> 5, max_margin)` of the run count `n`; after sorting, `-1`
/// placeholders are dropped from the front only (a `-1` with a smaller
/// value before it stays), then the margin is cut from each end.
/// Upstream's `latency_stat?` answers false for every stat (its pattern
/// test is followed by a literal `false`), so latency stats are trimmed
/// like all others, and so is every stat here.
fn trimmed(values: &[Sample], max_margin: usize) -> Vec<Sample> {
    let margin = (values.len() >> MARGIN_SHIFT).min(max_margin);
    let mut v = values.to_vec();
    v.sort_by(|x, y| x.value().total_cmp(&y.value()));
    let placeholders = v.iter().take_while(|x| x.value() == -1.0).count();
    v.drain(..placeholders);
    if v.len() < 2 * margin {
        return Vec::new();
    }
    v[margin..v.len() - margin].to_vec()
}

/// 0-day's `min_mean_max`: the "mean" is the upper median `sorted[n/2]`.
fn min_med_max(sorted: &[Sample]) -> (Sample, Sample, Sample) {
    (
        sorted[0],
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1],
    )
}

/// Mean and `stddev %` of one side as `calc_avg_stddev` and
/// `show_perf_change` compute them.
fn mean_stddev_pct(samples: &[Sample]) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    let n = samples.len() as f64;
    let mean = samples.iter().map(|s| s.value()).sum::<f64>() / n;
    if samples.len() < 2 {
        return (mean, 0.0);
    }
    let var = samples
        .iter()
        .map(|s| (s.value() - mean).powi(2))
        .sum::<f64>()
        / n;
    let sd = var.sqrt();
    let pct = if mean != 0.0 { 100.0 * sd / mean } else { sd };
    (mean, pct)
}

fn table_row(metric: &str, base: &[Sample], head: &[Sample]) -> ZeroDayRow {
    let (base_mean, base_stddev_pct) = mean_stddev_pct(base);
    let (head_mean, head_stddev_pct) = mean_stddev_pct(head);
    let change = if metrics::shows_absolute_change(metric) {
        head_mean - base_mean
    } else if head_mean == base_mean {
        // lkp's 1e-100 stand-in for a zero base makes 0 -> 0 a -100% change.
        0.0
    } else {
        let b = if base_mean == 0.0 { 1e-100 } else { base_mean };
        100.0 * (head_mean - b) / b
    };
    ZeroDayRow {
        base_mean,
        base_stddev_pct,
        head_mean,
        head_stddev_pct,
        change,
        function_runs: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KPI: &str = "lmbench3.PIPE.bandwidth.MB/sec";

    #[test]
    fn zero_to_zero_is_no_change() {
        let samples = |v: &[f64]| v.iter().map(|x| Sample::Value(*x)).collect::<Vec<_>>();
        let row = table_row(
            "pipe.context_switches",
            &samples(&[0.0, 0.0]),
            &samples(&[0.0, 0.0]),
        );
        assert_eq!(row.change, 0.0, "{row:?}");
        let row = table_row(
            "pipe.context_switches",
            &samples(&[0.0, 0.0]),
            &samples(&[2.0, 2.0]),
        );
        assert!(row.change > 1e90, "{row:?}");
    }

    #[test]
    fn separated_kpi_changes() {
        let v = verdict(KPI, &[100.0, 101.0, 102.0], &[90.0, 91.0, 92.0], None);
        assert!(v.changed, "{v:?}");
    }

    #[test]
    fn median_inside_other_range_is_not_a_change() {
        // head median 97 > base min 96: fails the separation test.
        let v = verdict(KPI, &[96.0, 101.0, 102.0], &[90.0, 97.0, 101.5], None);
        assert_eq!(v.reason, ZeroDayReason::RangesOverlap);
    }

    #[test]
    fn ratio_floors() {
        let v = verdict(KPI, &[100.0, 100.1, 100.2], &[100.5, 100.6, 100.7], None);
        assert_eq!(v.reason, ZeroDayReason::BelowRatioFloor);
        // 3% is enough for a perf metric but not for an unknown prefix.
        let v = verdict(
            "foo.bar",
            &[100.0, 100.1, 100.2],
            &[103.0, 103.1, 103.2],
            None,
        );
        assert_eq!(v.reason, ZeroDayReason::BelowRatioFloor);
    }

    #[test]
    fn absolute_floor_and_run_count() {
        let v = verdict(
            "lmbench3.time.user_time",
            &[2.0, 2.1, 2.2],
            &[4.0, 4.1, 4.2],
            None,
        );
        assert_eq!(v.reason, ZeroDayReason::BelowAbsoluteFloor);
        let v = verdict(KPI, &[1.0, 1.0], &[2.0, 2.0], None);
        assert_eq!(v.reason, ZeroDayReason::TooFewRuns);
    }

    #[test]
    fn perf_profile_rule_follows_lkp_compare() {
        let m = "perf-profile.self.cycles-pp.pipe_write";
        // Without -p: the separation test alone, no ratio or floor filter
        // (1.00 -> 1.01 is a 1% ratio and under perf-profile.*'s floor of 1).
        let v = verdict(m, &[1.0, 1.0, 1.0], &[1.01, 1.01, 1.01], None);
        assert!(v.changed, "{v:?}");
        let v = verdict(m, &[1.0, 2.0, 3.0], &[2.5, 2.9, 4.0], None);
        assert_eq!(v.reason, ZeroDayReason::RangesOverlap);
        // With -p 5.0: either median above 5, whatever the overlap.
        let v = verdict(m, &[4.0, 4.1, 4.2], &[6.0, 6.1, 6.2], Some(5.0));
        assert!(v.changed, "{v:?}");
        let v = verdict(m, &[4.0, 5.5, 7.0], &[4.0, 5.4, 7.0], Some(5.0));
        assert!(v.changed, "overlapping, but a median is above 5: {v:?}");
        let v = verdict(m, &[1.0, 1.1, 1.2], &[3.0, 3.1, 3.2], Some(5.0));
        assert_eq!(v.reason, ZeroDayReason::BelowPerfProfileThreshold);
        // The threshold is for perf-profile only.
        let v = verdict(
            KPI,
            &[100.0, 100.1, 100.2],
            &[100.5, 100.6, 100.7],
            Some(5.0),
        );
        assert_eq!(v.reason, ZeroDayReason::BelowRatioFloor);
    }

    use Sample::{Missing, Value as V};

    /// The base's stat names, for stats whose rule does not look at them.
    fn no_stats() -> BTreeSet<String> {
        BTreeSet::new()
    }

    #[test]
    fn runs_are_counted_and_placeholders_dropped_as_lkp_does() {
        // Three runs a side, one a -1 placeholder each: lkp counts 3 runs
        // (its matrix columns), so the run-count test passes, and the
        // placeholders leave the samples before the separation test.
        let v = verdict(KPI, &[-1.0, 100.0, 101.0], &[-1.0, 90.0, 91.0], None);
        assert!(v.changed, "{v:?}");
        // -1 goes only from the front of the sorted samples.
        let t = trimmed(&[V(-1.0), V(-2.0), V(3.0)], 3);
        assert_eq!(t, [V(-2.0), V(-1.0), V(3.0)]);
        let t = trimmed(&[V(-1.0), V(2.0), V(-1.0)], 3);
        assert_eq!(t, [V(2.0)]);
        // The margin comes from the run count before the placeholders go:
        // 32 runs trim 32 >> 5 = 1 from each end of the 31 values left.
        let mut runs: Vec<Sample> = (0..31).map(|i| V(f64::from(i))).collect();
        runs.push(V(-1.0));
        let t = trimmed(&runs, 3);
        assert_eq!(t.len(), 29);
        assert_eq!((t[0], t[28]), (V(1.0), V(29.0)));
        // All placeholders: nothing to compare.
        let v = verdict(KPI, &[-1.0; 3], &[1.0, 2.0, 3.0], None);
        assert_eq!(v.reason, ZeroDayReason::NoSamples);
        // Fewer than 3 runs on both sides, whatever the values.
        let v = verdict_padded(
            KPI,
            &[V(1.0), Missing],
            &[V(9.0), V(9.0)],
            &no_stats(),
            None,
        );
        assert_eq!(v.reason, ZeroDayReason::TooFewRuns);
    }

    #[test]
    fn a_missing_sample_is_a_zero() {
        // The head's runs lost the stat: compared against zeros, a change.
        let base = [V(100.0), V(101.0), V(102.0)];
        let v = verdict_padded(KPI, &base, &[Missing; 3], &no_stats(), None);
        assert!(v.changed, "{v:?}");
        assert_eq!((v.ratio, v.row.head_mean, v.row.change), (5.0, 0.0, -100.0));
        // One head run lost it: its 0 is the head's minimum, the median
        // stays inside the base's range, and the row's mean counts the 0.
        let v = verdict_padded(
            KPI,
            &base,
            &[V(100.0), V(101.0), Missing],
            &no_stats(),
            None,
        );
        assert_eq!(v.reason, ZeroDayReason::RangesOverlap);
        assert!((v.row.head_mean - 67.0).abs() < 1e-9, "{:?}", v.row);
        assert!(v.row.head_stddev_pct > 2.0, "{:?}", v.row);
        // Complete samples give the plain means.
        let v = verdict(KPI, &[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0], None);
        assert_eq!((v.row.base_mean, v.row.head_mean), (2.0, 4.0));
        assert!((v.row.change - 100.0).abs() < 1e-9);
    }

    #[test]
    fn a_vanished_profile_symbol_takes_the_integer_threshold() {
        let m = "perf-profile.self.cycles-pp.pipe_write";
        let gone = [Missing; 3];
        // lkp compare's default threshold is the Integer 5, and the head's
        // median is the padded Integer 0: a median above 5 decides alone.
        let v = verdict_padded(m, &[V(3.0), V(3.1), V(3.2)], &gone, &no_stats(), None);
        assert_eq!(v.reason, ZeroDayReason::BelowPerfProfileThreshold);
        let v = verdict_padded(m, &[V(6.0), V(6.1), V(6.2)], &gone, &no_stats(), None);
        assert!(v.changed, "{v:?}");
        assert!((v.row.change + 6.1).abs() < 1e-9, "{:?}", v.row);
        // `-p 5.0` is a Float: not the padded median's class, so the
        // separation test decides.
        let v = verdict_padded(m, &[V(3.0), V(3.1), V(3.2)], &gone, &no_stats(), Some(5.0));
        assert!(v.changed, "{v:?}");
    }

    #[test]
    fn default_stat_filters() {
        let big = |x: f64| [x, x + 1.0, x + 2.0];
        let v = verdict(
            "interrupts.LOC:Local_timer_interrupts",
            &big(100_000.0),
            &big(200_000.0),
            None,
        );
        assert_eq!(v.reason, ZeroDayReason::HiddenByDefault);
        assert!(!shown_by_default("softirqs.NET_RX"));
        assert!(!shown_by_default("x.Modules_linked_in"));
        for shown in [
            "vmstat.system.cs",
            "proc-vmstat.pgfault",
            "perf-stat.ps.cpu-cycles",
            "perf-profile.self.cycles-pp.pipe_read",
            "lmbench3.time.user_time",
            "interrupts",
            "stress-ng.pipe.ops_per_sec",
        ] {
            assert!(shown_by_default(shown), "{shown}");
        }
        let v = verdict("vmstat.system.cs", &big(100_000.0), &big(200_000.0), None);
        assert!(v.changed, "{v:?}");
    }

    #[test]
    fn latency_stats_are_trimmed_like_any_other() {
        // 40 runs a side trim min(40 >> 5, 3) = 1 from each end, latency or
        // not: the one outlier on each side goes, and the rest separate.
        let mut base: Vec<f64> = (0..40).map(|i| 100.0 + f64::from(i) * 0.01).collect();
        let mut head: Vec<f64> = (0..40).map(|i| 120.0 + f64::from(i) * 0.01).collect();
        base[0] = 200.0;
        head[0] = 50.0;
        for m in ["lmbench3.PIPE.latency.us", KPI] {
            let v = verdict(m, &base, &head, None);
            assert!(v.changed, "{m}: {v:?}");
        }
    }

    fn stats(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_new_failure_is_a_change_on_any_run_count() {
        let fail = "stress-ng.pipe.fail";
        // The base passed in both its runs, the head failed in its one run:
        // function stats need no 3 runs, and the base's zeros (it never
        // printed the stat) are compared.
        let base_stats = stats(&["stress-ng.pipe.pass", "stress-ng.pipe.ops"]);
        let v = verdict_padded(fail, &[Missing, Missing], &[V(1.0)], &base_stats, None);
        assert!(v.changed, "{v:?}");
        assert_eq!(v.ratio, 5.0);
        // lkp compare's row: fails of each side, the runs, and the change
        // of the failing share in points.
        assert_eq!(
            (v.row.base_mean, v.row.head_mean, v.row.change),
            (0.0, 1.0, 100.0)
        );
        assert_eq!(v.row.function_runs, Some((2, 1)));
        // One of three head runs failed: the head's largest value is 1.
        let v = verdict_padded(
            fail,
            &[Missing; 3],
            &[Missing, V(1.0), Missing],
            &base_stats,
            None,
        );
        assert!(v.changed, "{v:?}");
        assert!((v.row.change - 100.0 / 3.0).abs() < 1e-9, "{:?}", v.row);
    }

    #[test]
    fn function_stats_need_their_counterpart_in_the_base() {
        // A `.fail` whose base never passed (never printed `.pass`), and a
        // `.pass` whose base never failed: skip_function_stat? skips both.
        let v = verdict_padded(
            "stress-ng.pipe.fail",
            &[Missing; 3],
            &[V(1.0); 3],
            &stats(&["stress-ng.pipe.ops"]),
            None,
        );
        assert_eq!(v.reason, ZeroDayReason::NoBaseCounterpart);
        let v = verdict_padded(
            "stress-ng.pipe.pass",
            &[V(1.0); 3],
            &[Missing; 3],
            &stats(&["stress-ng.pipe.pass"]),
            None,
        );
        assert_eq!(v.reason, ZeroDayReason::NoBaseCounterpart);
        // With a failure in the base, a lost `.pass` is a change.
        let v = verdict_padded(
            "stress-ng.pipe.pass",
            &[V(1.0), V(1.0), Missing],
            &[Missing; 3],
            &stats(&["stress-ng.pipe.pass", "stress-ng.pipe.fail"]),
            None,
        );
        assert!(v.changed, "{v:?}");
        // `verdict` knows no other stat of the base.
        let v = verdict("stress-ng.pipe.fail", &[0.0; 3], &[1.0; 3], None);
        assert_eq!(v.reason, ZeroDayReason::NoBaseCounterpart);
    }

    #[test]
    fn function_stats_change_only_with_their_maximum() {
        let base_stats = stats(&["stress-ng.pipe.pass", "stress-ng.pipe.fail"]);
        // Both sides failed at least once: the largest values are equal,
        // however the share moved (upstream prints the row, calls no change).
        let v = verdict_padded(
            "stress-ng.pipe.fail",
            &[V(1.0), Missing, Missing, Missing],
            &[V(1.0); 4],
            &base_stats,
            None,
        );
        assert_eq!(v.reason, ZeroDayReason::SameMaximum);
        assert_eq!(v.row.change, 75.0);
        // Every run of both sides passing is no change either.
        let v = verdict_padded(
            "stress-ng.pipe.pass",
            &[V(1.0); 3],
            &[V(1.0); 3],
            &base_stats,
            None,
        );
        assert_eq!(v.reason, ZeroDayReason::SameMaximum);
    }
}
