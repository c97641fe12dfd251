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
    /// The relative change `same` rules out: ±`same_margin` on the ratio
    /// scale, the metric's floor or the job's margin
    /// ([`StatsConfig::same_margin`]), whichever is wider. It does not
    /// depend on the data.
    #[serde(default)]
    pub same_margin: f64,
    /// The share of [`StatsConfig::same_alpha`] this look's equivalence test
    /// spends ([`StatsConfig::look_same_beta`]).
    #[serde(default)]
    pub same_beta: f64,
    /// The equivalence test's `1 − 2·same_beta` interval of the head/base
    /// ratio (Welch on logs, or Moses' rank interval); `same` needs it
    /// inside `1 ± same_margin`.
    #[serde(default)]
    pub equivalence_ci: Option<(f64, f64)>,
    /// The change as the deciding test sees it: head over base on the
    /// estimator of [`KbotVerdict::estimator`], in percent (or in the
    /// metric's own units where the metric shows absolute changes). Its
    /// sign is the direction of the change; the mean change of 0-day's
    /// table can point the other way when one run is far out.
    #[serde(default)]
    pub change: f64,
    /// Which estimator `change` comes from.
    #[serde(default)]
    pub estimator: Estimator,
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
    /// guest) on at least 2 runs a side, and the values are not quantised
    /// coarsely ([`resolution`]): the outcome is decided by the values
    /// alone, `different` when they differ above the metric's floor.
    #[serde(default)]
    pub deterministic: bool,
}

/// The estimate of the change that goes with the test that decided.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Estimator {
    /// Welch's t on the logs decided: the ratio of geometric means.
    #[default]
    LogMeans,
    /// Welch's t on the raw values (some value ≤ 0): the difference of means.
    Means,
    /// The rank tests decided: the Hodges-Lehmann shift (the median of all
    /// head − base differences), on the logs when every value is positive.
    HodgesLehmann,
    /// Each side read one value: their difference.
    Values,
}

/// The IQR of a normal distribution in standard deviations (2·Φ⁻¹(0.75)).
const IQR_IN_SIGMA: f64 = 1.348_979_5;
/// z of the 99th percentile: Pinpoint's high thresholds bound the false
/// negative rate at 1% (`thresholds_performance.py`, `P_VALUE = 0.01`).
const Z_FALSE_NEGATIVE: f64 = 2.326_347_9;

/// Fewest runs per side on which Welch's t may decide `different`: as many
/// as the bimodality check needs (`effect::BIMODAL_MIN_N`). Below it, two
/// sides that each landed wholly in one mode of a bimodal benchmark look
/// like a clean shift and no gate can tell (at 5 runs Welch's own level was
/// 7 times nominal on 70/30 modes). The default looks are at 4, 6, 8 and 10
/// runs, so this costs them nothing; a job of 5 runs waits for its 6th.
const WELCH_MIN_RUNS: usize = super::effect::BIMODAL_MIN_N;

/// The step the values of a comparison were read at, for the
/// identical-values rule: each side repeating one value is an exact clock
/// only when that step is fine next to the metric's floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Unknown: the coarsest power of ten the values are multiples of
    /// ([`resolution`]).
    Inferred,
    /// In the metric's units (a tool's known printing).
    Absolute(f64),
    /// A share of the value itself: a figure computed from a clock read at
    /// a known step, `step / reading`.
    Relative(f64),
    /// Computed from a coarse clock whose reading is not at hand: identical
    /// values never show an exact clock.
    Unresolved,
}

impl Step {
    /// The step of `metric` from the metric table ([`metrics::quantum`]),
    /// without the runs' clock readings.
    pub fn of(metric: &str) -> Step {
        match metrics::quantum(metric) {
            Some(metrics::Quantum::Printed(step)) => Step::Absolute(step),
            Some(metrics::Quantum::Clock { .. }) => Step::Unresolved,
            None => Step::Inferred,
        }
    }
}

/// Judge one metric. `salt` varies the bootstrap stream between metrics.
/// The step of its values is the metric table's ([`Step::of`]).
pub fn verdict(
    metric: &str,
    base: &[f64],
    head: &[f64],
    cfg: &StatsConfig,
    salt: u64,
) -> KbotVerdict {
    verdict_with(metric, base, head, Step::of(metric), cfg, salt)
}

/// [`verdict`] with the step the values were read at.
pub fn verdict_with(
    metric: &str,
    base: &[f64],
    head: &[f64],
    step: Step,
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
    let welch_decides = welch_decides(welch.as_ref(), &sb, &sh);
    let p_value = match (welch_decides, p_welch) {
        (true, Some(p)) => p,
        _ => p_mann_whitney.min(p_kolmogorov_smirnov),
    };
    let (mb, mh) = (median_sorted(&sb), median_sorted(&sh));
    let median_ratio = if mb != 0.0 { mh / mb } else { f64::NAN };
    let deterministic = deterministic(metric, &sb, &sh, step);
    let estimate = if deterministic {
        Estimate::values(mb, mh)
    } else {
        Estimate::of(welch.as_ref().filter(|_| welch_decides), &sb, &sh)
    };
    let above_floor = above_floor(metric, &sb, &sh, &estimate);
    let alpha = cfg.look_alpha(sb.len().min(sh.len()));
    let same_beta = cfg.look_same_beta(sb.len().min(sh.len()));
    let margin = same_margin(metric, cfg);
    let equivalence = equivalence(&sb, &sh, welch.as_ref(), margin, same_beta);
    let outcome = match deterministic {
        // Every run of each side read the same value: there is no noise to
        // test against, and a difference above the floor is the change.
        true if mb != mh && above_floor => Outcome::Different,
        true => Outcome::Same,
        false => decide(alpha, p_value, above_floor, equivalence),
    };
    KbotVerdict {
        outcome,
        alpha,
        p_value,
        p_mann_whitney,
        p_kolmogorov_smirnov,
        p_welch,
        same_threshold: same_threshold(sb.len(), sh.len(), same_magnitude(&sb, &sh, mb, margin)),
        same_margin: margin,
        same_beta,
        equivalence_ci: equivalence.map(|e| (e.lo.exp(), e.hi.exp())),
        change: estimate.change(metrics::shows_absolute_change(metric)),
        estimator: estimate.estimator,
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

/// The change on the deciding test's own scale: `ln(head/base)` when the
/// values were logged, else a shift in the metric's units from `centre`.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    estimator: Estimator,
    /// `Some(ln ratio)` on the log scale.
    log_ratio: Option<f64>,
    /// The raw shift, when not on the log scale.
    shift: f64,
    /// The base's centre on the same estimator (geometric mean, mean or
    /// median), to turn one form into the other.
    centre: f64,
}

impl Estimate {
    fn values(mb: f64, mh: f64) -> Estimate {
        Estimate {
            estimator: Estimator::Values,
            log_ratio: (mb > 0.0 && mh > 0.0).then(|| (mh / mb).ln()),
            shift: mh - mb,
            centre: mb,
        }
    }

    /// Welch's difference when Welch decided, else the Hodges-Lehmann shift.
    fn of(welch: Option<&Welch>, sb: &[f64], sh: &[f64]) -> Estimate {
        if let Some(w) = welch {
            let centre = if w.logs {
                (sb.iter().map(|x| x.ln()).sum::<f64>() / sb.len() as f64).exp()
            } else {
                sb.iter().sum::<f64>() / sb.len() as f64
            };
            return Estimate {
                estimator: if w.logs {
                    Estimator::LogMeans
                } else {
                    Estimator::Means
                },
                log_ratio: w.logs.then_some(w.diff),
                shift: w.diff,
                centre,
            };
        }
        let logs = sb.iter().chain(sh).all(|&x| x > 0.0);
        let scale = |v: &[f64]| -> Vec<f64> {
            if logs {
                v.iter().map(|x| x.ln()).collect()
            } else {
                v.to_vec()
            }
        };
        let shift = hodges_lehmann(&scale(sb), &scale(sh));
        Estimate {
            estimator: Estimator::HodgesLehmann,
            log_ratio: logs.then_some(shift),
            shift,
            centre: median_sorted(sb),
        }
    }

    /// head / base on this estimator (NaN when the base centre is 0).
    fn ratio(&self) -> f64 {
        match self.log_ratio {
            Some(l) => l.exp(),
            None if self.centre != 0.0 => 1.0 + self.shift / self.centre.abs(),
            None => f64::NAN,
        }
    }

    /// The change in the metric's units.
    fn absolute(&self) -> f64 {
        match self.log_ratio {
            Some(l) => self.centre * (l.exp() - 1.0),
            None => self.shift,
        }
    }

    /// Percent, or the metric's units for metrics shown as absolute changes.
    fn change(&self, absolute: bool) -> f64 {
        if absolute {
            self.absolute()
        } else {
            100.0 * (self.ratio() - 1.0)
        }
    }
}

/// Fewest runs (boots) per side whose identical values make a measurement
/// deterministic: an instruction-counted guest (QEMU `-icount`) reads the
/// same value on every boot of a kernel, where one repeated value could
/// still be chance.
const DETERMINISTIC_MIN_RUNS: usize = 2;

/// Both sides have at least [`DETERMINISTIC_MIN_RUNS`] runs, each side all
/// one value (the samples are sorted), and the values are read finely
/// enough that identical readings mean an exact clock, not rounding: the
/// step is at most a tenth of the smallest change the metric's floor lets
/// count. Rounded values of a noisy benchmark repeat too, and their runs
/// can agree by chance at a few runs a side, each side on its own step.
/// The step is the tool's where it is known ([`Step`]): an exact clock
/// that happens to print round numbers (1000 against 990 from a tool that
/// prints two decimals) is still exact, and a throughput computed from a
/// time printed in milliseconds moves in steps of one millisecond of that
/// time, however many decimals the division leaves.
fn deterministic(metric: &str, sb: &[f64], sh: &[f64], step: Step) -> bool {
    let flat = |s: &[f64]| s.len() >= DETERMINISTIC_MIN_RUNS && s.first() == s.last();
    if !(flat(sb) && flat(sh)) {
        return false;
    }
    let smallest = sb[0].abs().min(sh[0].abs());
    let largest = sb[0].abs().max(sh[0].abs());
    let step = match step {
        Step::Inferred => resolution(sb.iter().chain(sh).copied()),
        Step::Absolute(q) => q,
        // A relative step is largest on the largest value.
        Step::Relative(r) => r * largest,
        Step::Unresolved => return false,
    };
    step <= (ratio_floor(metric) - 1.0) * smallest / 10.0
}

/// The coarsest power of ten every value is a whole multiple of (10⁻⁹ at
/// the finest): the resolution the tool printed the values at. 0 for all
/// zeros.
pub fn resolution(values: impl Iterator<Item = f64> + Clone) -> f64 {
    if values.clone().all(|x| x == 0.0) {
        return 0.0;
    }
    (-9..=15)
        .rev()
        .map(|k| 10f64.powi(k))
        .find(|q| {
            values.clone().all(|x| {
                let r = x / q;
                (r - r.round()).abs() <= 1e-6 && (x == 0.0 || r.round() != 0.0)
            })
        })
        .unwrap_or(1e-9)
}

/// Welch's p decides when it passed its gate and both sides have
/// [`WELCH_MIN_RUNS`]; else the rank tests' does. One family per
/// comparison: taking the smallest of all three was measured to raise the
/// A/A rate about 1.5x at a look.
fn welch_decides(welch: Option<&Welch>, sb: &[f64], sh: &[f64]) -> bool {
    welch.is_some() && sb.len().min(sh.len()) >= WELCH_MIN_RUNS
}

/// The Hodges-Lehmann estimate of the shift of `b` over `a`: the median of
/// the n·m differences `b_j − a_i`, the estimate that goes with
/// Mann-Whitney's test and Moses' interval.
fn hodges_lehmann(a: &[f64], b: &[f64]) -> f64 {
    let mut diffs: Vec<f64> = b
        .iter()
        .flat_map(|y| a.iter().map(move |x| y - x))
        .collect();
    diffs.sort_by(f64::total_cmp);
    median_sorted(&diffs)
}

/// `different` when p beats this look's α and the change clears the
/// floor; `same` only when the equivalence test rules out a change beyond
/// the margin (a significant change below the floor is `same` by that test
/// alone, not by its p); else `unknown`.
fn decide(alpha: f64, p: f64, above_floor: bool, equivalence: Option<Equivalence>) -> Outcome {
    if alpha <= 0.0 {
        Outcome::Unknown
    } else if p < alpha && above_floor {
        Outcome::Different
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
/// on the logs. The margin is stated before the data are seen (the
/// metric's floor or the job's margin, [`same_margin`]) and β is this
/// look's share of `same_alpha`, so a change at the margin ends `same` in
/// at most `same_alpha` of pairs over all the looks. `None` when values are
/// not all positive or the samples are too small for an interval at β.
fn equivalence(
    sb: &[f64],
    sh: &[f64],
    welch: Option<&Welch>,
    margin: f64,
    beta: f64,
) -> Option<Equivalence> {
    if beta <= 0.0 {
        return None;
    }
    let margin = margin.ln_1p();
    if let Some(w) = welch.filter(|w| w.logs) {
        let half = t_quantile_two_sided(2.0 * beta, w.df) * w.se;
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
    let (lo, hi) = shift_ci(&lb, &lh, beta)?;
    Some(Equivalence { lo, hi, margin })
}

/// The relative change `same` rules out: the metric's floor or the job's
/// margin, whichever is wider.
pub fn same_margin(metric: &str, cfg: &StatsConfig) -> f64 {
    (ratio_floor(metric) - 1.0).max(cfg.same_margin)
}

/// The metric's floor, 0-day's: a ratio above 1.01 (1.05 for stats that are
/// not perf metrics; none for perf-profile) and the absolute floors of
/// `etc/perf-metrics-threshold.yaml`, both taken on the deciding
/// estimator's change.
fn above_floor(metric: &str, sb: &[f64], sh: &[f64], estimate: &Estimate) -> bool {
    let max = sb
        .last()
        .copied()
        .unwrap_or(0.0)
        .max(sh.last().copied().unwrap_or(0.0));
    let absolute_ok = metrics::passes_absolute_floor(metric, max, estimate.absolute().abs());
    if metrics::is_perf_profile(metric) {
        return absolute_ok;
    }
    let r = estimate.ratio();
    let ratio = if r > 0.0 {
        r.max(1.0 / r)
    } else {
        f64::INFINITY
    };
    ratio > ratio_floor(metric) && absolute_ok
}

fn ratio_floor(metric: &str) -> f64 {
    if metrics::is_perf_metric(metric) {
        1.01
    } else {
        1.05
    }
}

/// The margin in IQR units of the observed spread, for the informational
/// Pinpoint threshold.
fn same_magnitude(sb: &[f64], sh: &[f64], mb: f64, margin: f64) -> f64 {
    let iqr = 0.5 * (iqr_sorted(sb) + iqr_sorted(sh));
    if iqr > 0.0 {
        margin * mb.abs() / iqr
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
        // Integer-rounded values repeat by chance: a step of 1 in values
        // near 50 of a metric whose printing is not known is no exact
        // clock, so the tests decide (here: not yet, and a 4% step is
        // beyond the 3% margin `same` could rule out).
        let score = "unixbench.score";
        assert_eq!(Step::of(score), Step::Inferred);
        let v = verdict(score, &[50.0; 4], &[52.0; 4], &cfg, 0);
        assert!(!v.deterministic);
        assert_eq!(v.outcome, Outcome::Unknown);
        // Counts near a million are resolved finely enough.
        assert!(verdict(score, &[1_000_003.0; 2], &[900_001.0; 2], &cfg, 0).deterministic);
        // Below the metric's floor a deterministic change is still `same`.
        let v = verdict(kpi, &[1000.0; 3], &[1000.1; 3], &cfg, 0);
        assert_eq!(v.outcome, Outcome::Same);
    }

    #[test]
    fn an_exact_clock_that_prints_round_numbers_is_exact() {
        // lmbench prints MB/sec with two decimals: 1000.00 and 990.00 are
        // read at 0.01, not at the 10 their trailing zeros suggest.
        let cfg = StatsConfig::default();
        let kpi = "lmbench3.PIPE.bandwidth.MB/sec";
        assert_eq!(Step::of(kpi), Step::Absolute(0.01));
        let v = verdict(kpi, &[1000.0; 2], &[990.0; 2], &cfg, 0);
        assert!(v.deterministic, "{v:?}");
        assert_eq!(v.outcome, Outcome::Different);
        // Judged by the values' own resolution (the rule before), the
        // same readings were no exact clock.
        let v = verdict_with(kpi, &[1000.0; 2], &[990.0; 2], Step::Inferred, &cfg, 0);
        assert!(!v.deterministic);
    }

    #[test]
    fn a_figure_from_a_rounded_clock_is_not_exact() {
        // hackbench's throughput is kb / Time:, Time: printed in ms. Two
        // runs a side of 0.100 s against 0.099 s give throughputs with a
        // long decimal tail, one clock step (1%) apart.
        let cfg = StatsConfig::default();
        let kpi = "hackbench.throughput";
        let (b, h) = (4000.0 / 0.100, 4000.0 / 0.099);
        let inferred = verdict_with(kpi, &[b; 2], &[h; 2], Step::Inferred, &cfg, 0);
        assert!(inferred.deterministic, "the values alone look exact");
        assert_eq!(inferred.outcome, Outcome::Different);
        // With the clock's step (1 ms of 0.099 s) they are not exact, and
        // two runs a side decide nothing.
        let v = verdict_with(
            kpi,
            &[b; 2],
            &[h; 2],
            Step::Relative(0.001 / 0.099),
            &cfg,
            0,
        );
        assert!(!v.deterministic);
        assert_eq!(v.outcome, Outcome::Unknown);
        // Without the clock's reading the figure is never exact.
        assert_eq!(Step::of(kpi), Step::Unresolved);
        assert!(!verdict(kpi, &[b; 2], &[h; 2], &cfg, 0).deterministic);
        // Iterations of 20 s: one millisecond is 0.005%, exact enough.
        let (b, h) = (4000.0 / 20.0, 4000.0 / 19.0);
        let v = verdict_with(kpi, &[b; 2], &[h; 2], Step::Relative(0.001 / 19.0), &cfg, 0);
        assert!(v.deterministic);
        assert_eq!(v.outcome, Outcome::Different);
    }

    #[test]
    fn resolution_is_the_printed_step() {
        assert_eq!(resolution([1708.35, 1474.56].into_iter()), 0.01);
        assert_eq!(resolution([50.0, 51.0].into_iter()), 1.0);
        assert_eq!(resolution([1200.0, 3400.0].into_iter()), 100.0);
        assert_eq!(resolution([0.0, 0.0].into_iter()), 0.0);
    }

    #[test]
    fn direction_follows_the_deciding_estimator() {
        // A clean 10% drop of a higher-is-better KPI with one head run at
        // ×3: the mean rose 8.8%, but the Grubbs gate hands the decision
        // to the rank tests, whose Hodges-Lehmann shift is the drop.
        let cfg = StatsConfig::default();
        let kpi = "lmbench3.PIPE.bandwidth.MB/sec";
        let base = [
            1000.0, 1004.0, 996.0, 1002.0, 998.0, 1001.0, 999.0, 1003.0, 997.0, 1000.5,
        ];
        let mut head: Vec<f64> = base.iter().map(|x| 0.9 * x).collect();
        head[4] *= 3.0;
        let v = verdict(kpi, &base, &head, &cfg, 0);
        assert_eq!(v.p_welch, None, "{v:?}");
        assert_eq!(v.estimator, Estimator::HodgesLehmann);
        assert_eq!(v.outcome, Outcome::Different, "{v:?}");
        assert!((v.change + 10.0).abs() < 0.5, "{v:?}");
        let m = super::super::compare_metric(kpi, &base, &head, &cfg, 0);
        assert_eq!(m.impact, metrics::Impact::Regression);
        assert!(m.zero_day.row.head_mean > m.zero_day.row.base_mean);
    }

    #[test]
    fn significant_but_wide_is_not_same() {
        // p below α yet the interval reaches past the margin: a change below
        // the floor is `same` only when the equivalence test says so.
        let cfg = StatsConfig::default();
        let v = verdict(
            "lmbench3.PIPE.bandwidth.MB/sec",
            &[100.0, 100.01, 100.02, 100.03, 100.04, 100.05],
            &[100.2, 100.21, 100.22, 100.23, 100.24, 100.25],
            &cfg,
            0,
        );
        assert_eq!(v.outcome, Outcome::Same);
        let (lo, hi) = v.equivalence_ci.expect("interval");
        assert!(lo > 1.0 - v.same_margin && hi < 1.0 + v.same_margin);
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
        let v = verdict("lmbench3.PIPE.bandwidth.MB/sec", &base, &head, &cfg, 0);
        assert_eq!(v.outcome, Outcome::Different);
        assert!(v.cliffs_delta == -1.0 && (v.median_ratio - 0.9).abs() < 0.01);
    }

    #[test]
    fn tiny_significant_shift_is_same() {
        let cfg = StatsConfig::default();
        let base = [100.0, 100.01, 100.02, 100.03, 100.04, 100.05];
        let head = [100.2, 100.21, 100.22, 100.23, 100.24, 100.25];
        let v = verdict("lmbench3.PIPE.bandwidth.MB/sec", &base, &head, &cfg, 0);
        assert!(v.p_value < 0.01 && !v.above_floor);
        assert_eq!(v.outcome, Outcome::Same);
    }
}
