//! One bisection step: does a commit's sample sit on the good or on the bad
//! side of a regression?
//!
//! Pinpoint's way: the probe is compared with both ends of the range, each
//! with kbot's own verdict, so a step inherits the verdict's false-alarm
//! budget and its `unknown` (more runs wanted) instead of guessing from a
//! midpoint threshold.

use serde::{Deserialize, Serialize};

use super::{compare_metric, MetricComparison, Outcome, StatsConfig};
use crate::metrics::Impact;

/// Where a probe commit falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepClass {
    /// The regression is not in this commit yet.
    Good,
    /// The regression (or the first of several) is already there.
    Bad,
    /// Neither is shown yet: more runs of the probe may tell.
    Unknown,
}

/// A step's classification with both comparisons behind it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepVerdict {
    pub class: StepClass,
    /// Good end (base) against the probe (head).
    pub vs_good: MetricComparison,
    /// Probe (base) against the bad end (head).
    pub vs_bad: MetricComparison,
    /// Where the probe's median lies from the good end's (0) to the bad
    /// end's (1); NaN when the ends have equal medians.
    pub position: f64,
}

/// Classifies `probe` between the `good` and `bad` ends' samples of a metric
/// that regressed from good to bad. All three must be non-empty and finite.
///
/// - Bad: the probe is `different` from the good end in the regression's
///   direction. With two regressions in the range the probe between them is
///   bad, so the search converges on the first one.
/// - Good: the probe is `same` as the good end, or better than it, or
///   `different` from the bad end (better) while lying nearer the good end.
/// - Unknown otherwise.
pub fn classify(
    metric: &str,
    good: &[f64],
    probe: &[f64],
    bad: &[f64],
    cfg: &StatsConfig,
) -> StepVerdict {
    let vs_good = compare_metric(metric, good, probe, cfg, 0);
    let vs_bad = compare_metric(metric, probe, bad, cfg, 1);
    let position = position(good, probe, bad);
    let regressed_from_good =
        vs_good.kbot.outcome == Outcome::Different && vs_good.impact == Impact::Regression;
    let better_than_good =
        vs_good.kbot.outcome == Outcome::Different && vs_good.impact == Impact::Improvement;
    let better_than_bad =
        vs_bad.kbot.outcome == Outcome::Different && vs_bad.impact == Impact::Regression;
    let class = if regressed_from_good {
        StepClass::Bad
    } else if vs_good.kbot.outcome == Outcome::Same
        || better_than_good
        || (better_than_bad && position < 0.5)
    {
        StepClass::Good
    } else {
        StepClass::Unknown
    };
    StepVerdict {
        class,
        vs_good,
        vs_bad,
        position,
    }
}

fn position(good: &[f64], probe: &[f64], bad: &[f64]) -> f64 {
    let (g, p, b) = (median(good), median(probe), median(bad));
    if b == g {
        f64::NAN
    } else {
        (p - g) / (b - g)
    }
}

fn median(xs: &[f64]) -> f64 {
    super::Summary::of(xs).median
}

#[cfg(test)]
mod tests {
    use super::*;

    const KPI: &str = "lmbench3.PIPE.bandwidth.MB/sec";

    /// `n` values around `center` with a deterministic ±`spread` wobble.
    fn around(center: f64, spread: f64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| center * (1.0 + spread * (((i * 7919) % 13) as f64 / 6.0 - 1.0)))
            .collect()
    }

    fn cfg() -> StatsConfig {
        StatsConfig {
            bootstrap_resamples: 0,
            ..StatsConfig::default()
        }
    }

    #[test]
    fn a_probe_like_the_good_end_is_good_and_like_the_bad_end_is_bad() {
        let good = around(1000.0, 0.01, 8);
        let bad = around(800.0, 0.01, 8);
        let at_good = classify(KPI, &good, &around(1001.0, 0.01, 8), &bad, &cfg());
        assert_eq!(at_good.class, StepClass::Good, "{at_good:?}");
        let at_bad = classify(KPI, &good, &around(801.0, 0.01, 8), &bad, &cfg());
        assert_eq!(at_bad.class, StepClass::Bad);
        assert!((at_bad.position - 1.0).abs() < 0.05);
    }

    #[test]
    fn between_two_regressions_the_probe_is_bad() {
        let good = around(1000.0, 0.01, 8);
        let bad = around(640.0, 0.01, 8);
        let middle = classify(KPI, &good, &around(800.0, 0.01, 8), &bad, &cfg());
        assert_eq!(middle.class, StepClass::Bad);
    }

    #[test]
    fn a_probe_overlapping_both_ends_is_unknown() {
        let good = around(1000.0, 0.01, 6);
        let bad = around(960.0, 0.01, 6);
        let noisy = [900.0, 1100.0, 950.0];
        let v = classify(KPI, &good, &noisy, &bad, &cfg());
        assert_eq!(v.class, StepClass::Unknown, "{v:?}");
    }

    #[test]
    fn lower_is_better_metrics_regress_upwards() {
        let latency = "lmbench3.PIPE.latency.us";
        let good = around(10.0, 0.01, 8);
        let bad = around(13.0, 0.01, 8);
        assert_eq!(
            classify(latency, &good, &around(13.0, 0.01, 8), &bad, &cfg()).class,
            StepClass::Bad
        );
        assert_eq!(
            classify(latency, &good, &around(10.0, 0.01, 8), &bad, &cfg()).class,
            StepClass::Good
        );
    }

    #[test]
    fn zero_variance_samples_of_an_instruction_counted_guest_decide() {
        // QEMU's -icount makes every boot of a kernel read the same value.
        let good = [1708.35; 4];
        let bad = [1474.56; 4];
        assert_eq!(
            classify(KPI, &good, &[1474.56; 4], &bad, &cfg()).class,
            StepClass::Bad
        );
        assert_eq!(
            classify(KPI, &good, &[1708.35; 4], &bad, &cfg()).class,
            StepClass::Good
        );
    }
}
