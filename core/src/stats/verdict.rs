//! kbot's own verdict: different / same / unknown, after Pinpoint
//! (`pinpoint/models/compare/compare.py`, `thresholds.py`;
//! `shared/reference/peer-systems.md` §4).

use serde::{Deserialize, Serialize};

use super::describe::{iqr_sorted, median_sorted, sorted};
use super::effect::{looks_bimodal, median_ratio_ci};
use super::rank_tests::{cliffs_delta, kolmogorov_smirnov_p, mann_whitney_p};
use super::special::normal_sf;
use super::StatsConfig;
use crate::metrics;

/// The three outcomes of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// p below the per-look `alpha` and the change above the metric's floor: report it.
    Different,
    /// Either p is above the "same" threshold (an effect of the configured
    /// size would almost surely have shown), or the change is significant but
    /// below the metric's floor.
    Same,
    /// Neither: more runs are needed.
    Unknown,
}

/// kbot's verdict on one metric, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KbotVerdict {
    pub outcome: Outcome,
    /// The per-look significance level p had to beat ([`StatsConfig::look_alpha`]).
    pub alpha: f64,
    /// `min(p_mann_whitney, p_kolmogorov_smirnov)`.
    pub p_value: f64,
    pub p_mann_whitney: f64,
    pub p_kolmogorov_smirnov: f64,
    /// p above this (and above `alpha`) means `same`.
    pub same_threshold: f64,
    /// `median(head) / median(base)`; NaN when the base median is 0.
    pub median_ratio: f64,
    /// Bootstrap CI of `median_ratio` at `StatsConfig::ci_level`.
    pub median_ratio_ci: Option<(f64, f64)>,
    /// Cliff's delta of head over base, in [-1, 1].
    pub cliffs_delta: f64,
    /// The median change clears the metric's floors (ratio and absolute).
    pub above_floor: bool,
    pub base_bimodal: bool,
    pub head_bimodal: bool,
}

/// The IQR of a normal distribution in standard deviations (2·Φ⁻¹(0.75)).
const IQR_IN_SIGMA: f64 = 1.348_979_5;
/// z of the 99th percentile: Pinpoint's high thresholds bound the false
/// negative rate at 1% (`thresholds_performance.py`, `P_VALUE = 0.01`).
const Z_FALSE_NEGATIVE: f64 = 2.326_347_9;

/// Judge one metric. `salt` varies the bootstrap stream between metrics.
pub fn verdict(
    metric: &str,
    base: &[f64],
    head: &[f64],
    cfg: &StatsConfig,
    salt: u64,
) -> KbotVerdict {
    let (sb, sh) = (sorted(base), sorted(head));
    let p_mann_whitney = mann_whitney_p(&sb, &sh);
    let p_kolmogorov_smirnov = kolmogorov_smirnov_p(&sb, &sh);
    let p_value = p_mann_whitney.min(p_kolmogorov_smirnov);
    let (mb, mh) = (median_sorted(&sb), median_sorted(&sh));
    let median_ratio = if mb != 0.0 { mh / mb } else { f64::NAN };
    let above_floor = above_floor(metric, &sb, &sh, mb, mh);
    let magnitude = same_magnitude(metric, &sb, &sh, mb, cfg);
    let alpha = cfg.look_alpha();
    let same_threshold = same_threshold(sb.len(), sh.len(), magnitude).max(alpha);
    let enough = sb.len() >= 2 && sh.len() >= 2;
    let outcome = if !enough {
        Outcome::Unknown
    } else if p_value < alpha {
        if above_floor {
            Outcome::Different
        } else {
            Outcome::Same
        }
    } else if p_value > same_threshold {
        Outcome::Same
    } else {
        Outcome::Unknown
    };
    KbotVerdict {
        outcome,
        alpha,
        p_value,
        p_mann_whitney,
        p_kolmogorov_smirnov,
        same_threshold,
        median_ratio,
        median_ratio_ci: median_ratio_ci(
            &sb,
            &sh,
            cfg.bootstrap_resamples,
            cfg.ci_level,
            cfg.seed ^ salt,
        ),
        cliffs_delta: cliffs_delta(&sb, &sh),
        above_floor,
        base_bimodal: looks_bimodal(&sb),
        head_bimodal: looks_bimodal(&sh),
    }
}

/// The metric's floor, 0-day's: a median ratio above 1.01 (1.05 for stats
/// that are not perf metrics; none for perf-profile) and the absolute floors
/// of `etc/perf-metrics-threshold.yaml`.
fn above_floor(metric: &str, sb: &[f64], sh: &[f64], mb: f64, mh: f64) -> bool {
    let max = sb
        .last()
        .copied()
        .unwrap_or(0.0)
        .max(sh.last().copied().unwrap_or(0.0));
    let absolute_ok = metrics::passes_absolute_floor(metric, max, (mh - mb).abs());
    if metrics::is_perf_profile(metric) {
        return absolute_ok;
    }
    let (hi, lo) = (mb.abs().max(mh.abs()), mb.abs().min(mh.abs()));
    let ratio = if lo > 0.0 { hi / lo } else { f64::INFINITY };
    ratio > ratio_floor(metric) && absolute_ok
}

fn ratio_floor(metric: &str) -> f64 {
    if metrics::is_perf_metric(metric) {
        1.01
    } else {
        1.05
    }
}

/// The effect size, in IQR units, that a `same` verdict rules out: the
/// metric's floor expressed in the observed spread, never below
/// `cfg.same_magnitude_iqr` (Pinpoint clamps its magnitudes at 1 IQR too).
fn same_magnitude(metric: &str, sb: &[f64], sh: &[f64], mb: f64, cfg: &StatsConfig) -> f64 {
    let iqr = 0.5 * (iqr_sorted(sb) + iqr_sorted(sh));
    let floor_effect = (ratio_floor(metric) - 1.0) * mb.abs();
    if iqr > 0.0 {
        (floor_effect / iqr).max(cfg.same_magnitude_iqr)
    } else {
        f64::INFINITY
    }
}

/// Pinpoint-style "high threshold": the p-value that a true shift of
/// `magnitude` IQRs (normal noise) would exceed only 1% of the time with
/// these sample sizes. Pinpoint tabulates it by simulation; here it comes
/// from the normal approximation of U under the shift alternative
/// (Lehmann 1975 §2.3: E[U] = nm·θ, θ = Φ(δ/√2)), using the null variance,
/// which is larger than the alternative's, so the threshold is conservative
/// (it says `same` later than an exact table would). Returns 1 when the
/// samples are too small to ever rule the effect out.
pub fn same_threshold(n: usize, m: usize, magnitude: f64) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    if magnitude.is_infinite() {
        return 0.0;
    }
    let delta_sigma = magnitude * IQR_IN_SIGMA;
    let theta = 1.0 - normal_sf(delta_sigma / std::f64::consts::SQRT_2);
    let (nf, mf) = (n as f64, m as f64);
    let sd0 = (nf * mf * (nf + mf + 1.0) / 12.0).sqrt();
    let mu_z = (theta - 0.5) * nf * mf / sd0;
    let z = mu_z - Z_FALSE_NEGATIVE;
    if z <= 0.0 {
        1.0
    } else {
        (2.0 * normal_sf(z)).min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_falls_with_sample_size_and_effect() {
        let t5 = same_threshold(5, 5, 1.0);
        let t10 = same_threshold(10, 10, 1.0);
        let t20 = same_threshold(20, 20, 1.0);
        assert!(t5 >= t10 && t10 > t20, "{t5} {t10} {t20}");
        assert!(same_threshold(10, 10, 2.0) < t10);
        assert_eq!(same_threshold(2, 2, 1.0), 1.0);
    }

    #[test]
    fn clear_shift_is_different() {
        let cfg = StatsConfig::default();
        let base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2];
        let head = [90.0, 91.0, 89.0, 90.5, 89.5, 90.2];
        let v = verdict("pipen.MB/sec", &base, &head, &cfg, 0);
        assert_eq!(v.outcome, Outcome::Different);
        assert!(v.cliffs_delta == -1.0 && (v.median_ratio - 0.9).abs() < 0.01);
    }

    #[test]
    fn tiny_significant_shift_is_same() {
        let cfg = StatsConfig::default();
        let base = [100.0, 100.01, 100.02, 100.03, 100.04, 100.05];
        let head = [100.2, 100.21, 100.22, 100.23, 100.24, 100.25];
        let v = verdict("pipen.MB/sec", &base, &head, &cfg, 0);
        assert!(v.p_value < 0.01 && !v.above_floor);
        assert_eq!(v.outcome, Outcome::Same);
    }
}
