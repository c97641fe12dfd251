//! 0-day's changed-stat rule, exactly as `lib/stats.rb` (`StatCompare`) and
//! `lib/changed_stat.rb` apply it by default (`shared/reference/lkp-0day.md` §4).

use serde::{Deserialize, Serialize};

use crate::metrics;

/// Why 0-day calls a stat changed or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ZeroDayReason {
    /// Passed every test.
    Changed,
    /// Both sides have fewer than 3 runs (`skip_regular_stat?`).
    TooFewRuns,
    /// The min/median/max separation test failed.
    RangesOverlap,
    /// `ratio ≤ 1.01`, or `≤ 1.05` for a stat that is not a perf metric.
    BelowRatioFloor,
    /// `reasonable_perf_change?` rejected it (per-metric absolute floors).
    BelowAbsoluteFloor,
    /// perf-profile with `-p X`: neither median is above X.
    BelowPerfProfileThreshold,
}

/// 0-day's verdict on one stat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZeroDayVerdict {
    pub changed: bool,
    pub reason: ZeroDayReason,
    /// `med_hi / med_lo` of the trimmed samples, capped at 5.
    pub ratio: f64,
}

/// 0-day's default ratio cap (`skip_small_change?`).
const RATIO_CAP: f64 = 5.0;
/// "`time.elapsed_time` only has 0.01 s precision", so every stat needs > 1%.
const RATIO_FLOOR_ALL: f64 = 1.01;
/// Stats that are not perf metrics need > 5%.
const RATIO_FLOOR_NON_PERF: f64 = 1.05;
/// `skip_regular_stat?`: at least one side needs 3 runs.
const MIN_RUNS_ONE_SIDE: usize = 3;

/// Apply 0-day's rule to the base and head samples of `metric`.
pub fn verdict(
    metric: &str,
    base: &[f64],
    head: &[f64],
    perf_profile_threshold: Option<f64>,
) -> ZeroDayVerdict {
    let (b, a) = (trimmed(base, base.len()), trimmed(head, base.len()));
    let not = |reason, ratio| ZeroDayVerdict {
        changed: false,
        reason,
        ratio,
    };
    if (a.len() < MIN_RUNS_ONE_SIDE && b.len() < MIN_RUNS_ONE_SIDE) || a.is_empty() || b.is_empty()
    {
        return not(ZeroDayReason::TooFewRuns, 1.0);
    }
    let (min_a, med_a, max_a) = min_med_max(&a);
    let (min_b, med_b, max_b) = min_med_max(&b);
    let (hi, lo) = (med_a.max(med_b), med_a.min(med_b));
    let ratio = if lo > 0.0 {
        (hi / lo).min(RATIO_CAP)
    } else {
        RATIO_CAP
    };
    let changed = ZeroDayVerdict {
        changed: true,
        reason: ZeroDayReason::Changed,
        ratio,
    };
    let profile = metrics::is_perf_profile(metric);
    if let (true, Some(t)) = (profile, perf_profile_threshold) {
        // `-p X` replaces the separation test for perf-profile stats.
        return if med_a > t || med_b > t {
            changed
        } else {
            not(ZeroDayReason::BelowPerfProfileThreshold, ratio)
        };
    }
    let separated = (min_b > med_a && med_b > max_a) || (min_a > med_b && med_a > max_b);
    if !separated {
        return not(ZeroDayReason::RangesOverlap, ratio);
    }
    if profile {
        // lkp compare always passes a perf-profile option, so
        // skip_small_change? never filters perf-profile stats.
        return changed;
    }
    if ratio <= RATIO_FLOOR_ALL
        || (!metrics::is_perf_metric(metric) && ratio <= RATIO_FLOOR_NON_PERF)
    {
        return not(ZeroDayReason::BelowRatioFloor, ratio);
    }
    if !metrics::passes_absolute_floor(metric, max_a.max(max_b), hi - lo) {
        return not(ZeroDayReason::BelowAbsoluteFloor, ratio);
    }
    changed
}

/// Sort, drop `-1` placeholders, trim `min(n >> 5, max_margin)` from each end.
/// Upstream's `latency_stat?` answers false for every stat (its pattern test
/// is followed by a literal `false`), so latency stats are trimmed like all
/// others, and so is every stat here.
fn trimmed(values: &[f64], base_len: usize) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| *x != -1.0).collect();
    v.sort_by(f64::total_cmp);
    let max_margin = if base_len <= 3 { 1 } else { 3 };
    let m = (v.len() >> 5).min(max_margin);
    v[m..v.len() - m].to_vec()
}

/// 0-day's `min_mean_max`: the "mean" is the upper median `sorted[n/2]`.
fn min_med_max(sorted: &[f64]) -> (f64, f64, f64) {
    (
        sorted[0],
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const KPI: &str = "lmbench3.PIPE.bandwidth.MB/sec";

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
}
