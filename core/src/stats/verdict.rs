//! kbot's own verdict: different / same / unknown, after Pinpoint
//! (Catapult's `pinpoint/models/compare/compare.py` and `thresholds.py`).

use serde::{Deserialize, Serialize};

use super::describe::{iqr_sorted, median_sorted, sorted};
use super::effect::{looks_bimodal, median_ratio_ci};
use super::nonparametric::{cliffs_delta, kolmogorov_smirnov_p, mann_whitney_p, shift_ci};
use super::parametric::{t_quantile_two_sided, welch_if_well_behaved, Welch};
use super::special::normal_sf;
use super::StatsConfig;
use crate::metrics;

/// The three outcomes of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// p below the look's `alpha` and the change above the metric's floor: report it.
    Different,
    /// The equivalence test rules out any change beyond the `same` margin,
    /// or the change is significant but below the metric's floor.
    Same,
    /// Neither: more runs are needed.
    Unknown,
}

impl Outcome {
    /// The outcome's name, as stored and shown (`different`, `same`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Different => "different",
            Outcome::Same => "same",
            Outcome::Unknown => "unknown",
        }
    }
}

/// kbot's verdict on one metric, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KbotVerdict {
    pub outcome: Outcome,
    /// The level p had to beat at this look ([`StatsConfig::look_alpha`]).
    pub alpha: f64,
    /// The p that decides: `p_welch` when the samples passed its gate and
    /// have at least 5 runs per side, else `min(p_mann_whitney, p_kolmogorov_smirnov)`.
    pub p_value: f64,
    pub p_mann_whitney: f64,
    pub p_kolmogorov_smirnov: f64,
    /// Welch's t on the logs, when both samples passed the outlier/levels gate.
    #[serde(default)]
    pub p_welch: Option<f64>,
    /// Pinpoint's "high threshold" for this sample size and margin
    /// (informational: `same` now comes from the equivalence test).
    pub same_threshold: f64,
    /// The relative change `same` rules out: ±`same_margin` on the ratio scale.
    #[serde(default)]
    pub same_margin: f64,
    /// The equivalence test's `1 − 2·same_alpha` interval of the head/base
    /// ratio (Welch on logs, or Moses' rank interval); `same` needs it
    /// inside `1 ± same_margin`.
    #[serde(default)]
    pub equivalence_ci: Option<(f64, f64)>,
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
    /// Every run of each side read one value (an instruction-counted
    /// guest): the outcome is decided by the values alone, `different` when
    /// they differ above the metric's floor.
    #[serde(default)]
    pub deterministic: bool,
}

/// The IQR of a normal distribution in standard deviations (2·Φ⁻¹(0.75)).
const IQR_IN_SIGMA: f64 = 1.348_979_5;
/// z of the 99th percentile: Pinpoint's high thresholds bound the false
/// negative rate at 1% (`thresholds_performance.py`, `P_VALUE = 0.01`).
const Z_FALSE_NEGATIVE: f64 = 2.326_347_9;

/// Fewest runs per side on which Welch's t may decide `different`. With 4,
/// two sides that each landed wholly in one mode of a bimodal benchmark
/// (70/30 modes: 0.4% of A/A pairs) look like a clean shift and no gate can
/// tell; with 5 that falls to 0.08%, and the rank tests cannot decide below
/// 5 anyway (the exact Mann-Whitney p is at least 2/C(8,4) = 0.029 on 4 v 4).
const WELCH_MIN_RUNS: usize = 5;

/// Judge one metric. `salt` varies the bootstrap stream between metrics.
pub fn verdict(
    metric: &str,
    base: &[f64],
    head: &[f64],
    cfg: &StatsConfig,
    salt: u64,
) -> KbotVerdict {
    let (sb, sh) = (sorted(base), sorted(head));
    let (base_bimodal, head_bimodal) = (looks_bimodal(&sb), looks_bimodal(&sh));
    let p_mann_whitney = mann_whitney_p(&sb, &sh);
    let p_kolmogorov_smirnov = kolmogorov_smirnov_p(&sb, &sh);
    // A mixture of modes is exactly where a t-test's normal model fails.
    let welch = if base_bimodal || head_bimodal {
        None
    } else {
        welch_if_well_behaved(&sb, &sh)
    };
    let p_welch = welch.map(|w| w.p);
    let p_value = deciding_p(p_welch, p_mann_whitney.min(p_kolmogorov_smirnov), &sb, &sh);
    let (mb, mh) = (median_sorted(&sb), median_sorted(&sh));
    let median_ratio = if mb != 0.0 { mh / mb } else { f64::NAN };
    let above_floor = above_floor(metric, &sb, &sh, mb, mh);
    let alpha = cfg.look_alpha(sb.len().min(sh.len()));
    let equivalence = equivalence(metric, &sb, &sh, welch.as_ref(), cfg);
    let deterministic = deterministic(&sb, &sh);
    let outcome = match deterministic {
        // Every run of each side read the same value: there is no noise to
        // test against, and a difference above the floor is the change.
        true if mb != mh && above_floor => Outcome::Different,
        true => Outcome::Same,
        false => decide(alpha, p_value, above_floor, equivalence),
    };
    let magnitude = same_magnitude(metric, &sb, &sh, mb, cfg);
    KbotVerdict {
        outcome,
        alpha,
        p_value,
        p_mann_whitney,
        p_kolmogorov_smirnov,
        p_welch,
        same_threshold: same_threshold(sb.len(), sh.len(), magnitude),
        same_margin: equivalence.map_or(f64::NAN, |e| e.margin.exp() - 1.0),
        equivalence_ci: equivalence.map(|e| (e.lo.exp(), e.hi.exp())),
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
        base_bimodal,
        head_bimodal,
        deterministic,
    }
}

/// Fewest runs (boots) per side whose identical values make a measurement
/// deterministic: an instruction-counted guest (QEMU `-icount`) reads the
/// same value on every boot of a kernel, where one repeated value could
/// still be chance.
const DETERMINISTIC_MIN_RUNS: usize = 2;

/// Both sides have at least [`DETERMINISTIC_MIN_RUNS`] runs, each side all
/// one value (the samples are sorted).
fn deterministic(sb: &[f64], sh: &[f64]) -> bool {
    let flat = |s: &[f64]| s.len() >= DETERMINISTIC_MIN_RUNS && s.first() == s.last();
    flat(sb) && flat(sh)
}

/// One family per comparison, chosen by the gate: Welch's p when it may
/// decide, else the rank tests'. Taking the smallest of all three was
/// measured to raise the A/A rate about 1.5x at a look.
fn deciding_p(p_welch: Option<f64>, rank_p: f64, sb: &[f64], sh: &[f64]) -> f64 {
    match p_welch {
        Some(p) if sb.len().min(sh.len()) >= WELCH_MIN_RUNS => p,
        _ => rank_p,
    }
}

fn decide(alpha: f64, p: f64, above_floor: bool, equivalence: Option<Equivalence>) -> Outcome {
    if alpha <= 0.0 {
        Outcome::Unknown
    } else if p < alpha {
        if above_floor {
            Outcome::Different
        } else {
            Outcome::Same
        }
    } else if equivalence.is_some_and(|e| e.holds()) {
        Outcome::Same
    } else {
        Outcome::Unknown
    }
}

/// The equivalence test on the log scale: an interval for ln(head/base)
/// and the margin it must lie within.
#[derive(Debug, Clone, Copy)]
struct Equivalence {
    lo: f64,
    hi: f64,
    margin: f64,
}

impl Equivalence {
    fn holds(&self) -> bool {
        -self.margin < self.lo && self.hi < self.margin
    }
}

/// Two one-sided tests (Schuirmann 1987) as one `1 − 2β` interval: Welch's
/// on the logs when the samples passed its gate, else Moses' rank interval
/// on the logs. The margin is the metric's floor or `same_magnitude_iqr`
/// spreads, whichever is wider: a change the robot could not tell from the
/// noise at these run counts is not one `same` claims to rule out, and the
/// power target (2.5σ) lies beyond it. `None` when values are not all
/// positive or the samples are too small for an interval.
fn equivalence(
    metric: &str,
    sb: &[f64],
    sh: &[f64],
    welch: Option<&Welch>,
    cfg: &StatsConfig,
) -> Option<Equivalence> {
    let floor = ratio_floor(metric).ln();
    if let Some(w) = welch.filter(|w| w.logs) {
        let half = t_quantile_two_sided(2.0 * cfg.same_alpha, w.df) * w.se;
        let margin = floor.max(cfg.same_magnitude_iqr * IQR_IN_SIGMA * w.sd);
        return Some(Equivalence {
            lo: w.diff - half,
            hi: w.diff + half,
            margin,
        });
    }
    if sb.iter().chain(sh).any(|&x| x <= 0.0) {
        return None;
    }
    let (lb, lh): (Vec<f64>, Vec<f64>) = (
        sb.iter().map(|x| x.ln()).collect(),
        sh.iter().map(|x| x.ln()).collect(),
    );
    let (lo, hi) = shift_ci(&lb, &lh, cfg.same_alpha)?;
    let spread = 0.5 * (iqr_sorted(&lb) + iqr_sorted(&lh));
    Some(Equivalence {
        lo,
        hi,
        margin: floor.max(cfg.same_magnitude_iqr * spread),
    })
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
/// (Lehmann 1975 §2.3: E\[U\] = nm·θ, θ = Φ(δ/√2)), using the null variance,
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
    fn identical_boots_of_each_side_decide_at_once() {
        let cfg = StatsConfig::default();
        let kpi = "lmbench3.PIPE.bandwidth.MB/sec";
        let v = verdict(kpi, &[1708.35; 2], &[1474.56; 2], &cfg, 0);
        assert!(v.deterministic);
        assert_eq!(v.outcome, Outcome::Different);
        let v = verdict(kpi, &[1708.35; 3], &[1708.35; 2], &cfg, 0);
        assert_eq!(v.outcome, Outcome::Same);
        // One run per side, or a side with spread, is no evidence of determinism.
        assert!(!verdict(kpi, &[1708.35], &[1474.56], &cfg, 0).deterministic);
        assert!(!verdict(kpi, &[1708.0, 1709.0], &[1474.56; 2], &cfg, 0).deterministic);
        // Below the metric's floor a deterministic change is still `same`.
        let v = verdict(kpi, &[1000.0; 3], &[1000.1; 3], &cfg, 0);
        assert_eq!(v.outcome, Outcome::Same);
    }

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
