//! Regression detection: compare the runs of a base and a head commit, decide
//! whether more runs are needed, and find change points in a history.
//!
//! Two verdicts are computed side by side for every metric:
//! - 0-day's (`zeroday`), byte-compatible with `lkp compare`, for the table
//!   and for people who know the robot;
//! - kbot's (`verdict`), which drives reports: rank tests, a three-way
//!   outcome, effect sizes.
//!
//! Everything is a pure function of the samples and the config.

pub mod bisect;
pub mod changepoint;
pub mod describe;
pub mod effect;
pub mod parametric;
pub mod rank_tests;
pub mod rng;
pub mod sequential;
pub mod special;
pub mod verdict;
pub mod zeroday;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::metrics::{self, Direction, Impact};
use crate::{Error, Result};
pub use describe::Summary;
pub use verdict::{KbotVerdict, Outcome};
pub use zeroday::{ZeroDayReason, ZeroDayVerdict};

/// Tunables of the comparison. `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatsConfig {
    /// Family-wise false-positive budget of one A/B comparison, adaptive
    /// extra runs included (Pinpoint's low threshold, 0.01). It is spent
    /// over the looks by [`StatsConfig::look_alpha`].
    pub alpha: f64,
    /// Half-width of the `same` equivalence margin in units of the observed
    /// spread (IQR; on the t path 1.349·σ, the IQR of a normal): `same`
    /// rules out changes beyond `max(metric floor, this × spread)`.
    /// 1.5 IQR ≈ 2σ, below the 2.5σ change the power target is set at.
    pub same_magnitude_iqr: f64,
    /// Runs per side before any verdict counts, and the first look of the
    /// adaptive schedule (a job's default 3 runs are brought up to it). The
    /// spending of `alpha` keeps early looks strict, so only a change far
    /// outside the noise is decided this early; 4 rather than 3 because on
    /// 3 runs a bimodal benchmark fakes clean shifts too often (see
    /// `verdict`), and the calibration measured 4 the cheapest first look
    /// that keeps both the power and the A/A targets.
    pub min_runs: usize,
    /// Runs added per side on `unknown` (a few at a time, so a clear result
    /// stops early; Pinpoint adds 10, which overshoots small run budgets).
    pub batch_runs: usize,
    /// Hard cap per side (the default 10; PTS shows why a cap matters).
    pub max_runs: usize,
    /// Exponent ρ of the α-spending function `α·(n/max_runs)^ρ` (Kim &
    /// DeMets): 1 spends evenly (Pocock-like), 3 keeps nearly all of α for
    /// the last looks (O'Brien-Fleming-like). Chosen by the calibration.
    pub spending_rho: f64,
    /// Error rate of each one-sided test of the `same` equivalence test
    /// (TOST; 0.05 is the usual bioequivalence level): a change at the
    /// margin is called `same` at most this often per look.
    pub same_alpha: f64,
    /// Bootstrap resamples for the median-ratio CI (PerfCompare uses 1000);
    /// 0 disables the CI (the verdict does not depend on it).
    pub bootstrap_resamples: usize,
    /// CI level (95%).
    pub ci_level: f64,
    /// `lkp compare -p X`: perf-profile stats change when either side's
    /// median is above X, with no separation test. `None` is what `lkp
    /// compare` does without `-p`: its built-in 5 is an integer, and the
    /// threshold rule only applies to a float like the medians, so
    /// perf-profile stats take the separation test like any other.
    pub perf_profile_threshold: Option<f64>,
    /// Mixed into the data-derived bootstrap seed.
    pub seed: u64,
}

impl Default for StatsConfig {
    fn default() -> Self {
        Self {
            alpha: 0.01,
            same_magnitude_iqr: 1.5,
            min_runs: 4,
            batch_runs: 2,
            max_runs: 10,
            spending_rho: 3.0,
            same_alpha: 0.05,
            bootstrap_resamples: 1000,
            ci_level: 0.95,
            perf_profile_threshold: None,
            seed: 0,
        }
    }
}

/// Share of `alpha` the group-sequential boundaries are designed for; the
/// rest absorbs what their normal model misses (see `look_alpha`).
const DESIGN_SHARE: f64 = 0.9;

impl StatsConfig {
    /// Runs per side at each look the adaptive schedule takes: `min_runs`,
    /// then every `batch_runs` more, and `max_runs` last.
    pub fn look_schedule(&self) -> Vec<usize> {
        let step = self.batch_runs.max(1);
        let mut looks: Vec<usize> = (self.min_runs..self.max_runs).step_by(step).collect();
        looks.push(self.max_runs);
        looks
    }

    /// Number of looks in [`StatsConfig::look_schedule`].
    pub fn looks(&self) -> usize {
        self.look_schedule().len()
    }

    /// The p-value a look with `n` runs on the smaller side must beat: the
    /// group-sequential nominal level of the schedule's look at or below
    /// `n` ([`sequential`]), 0 below `min_runs`. A job whose own run count
    /// falls between two looks takes the earlier look's level (levels rise
    /// along the schedule). The boundaries are designed for
    /// `DESIGN_SHARE · alpha`: the Brownian model behind them is exact for
    /// one z-statistic, and kbot's small-sample t and rank tests, and the
    /// gate that picks between them at each look, were measured to use up
    /// to a tenth more than it.
    pub fn look_alpha(&self, n: usize) -> f64 {
        let schedule = self.look_schedule();
        let Some(k) = schedule.iter().rposition(|&look| look <= n) else {
            return 0.0;
        };
        let cap = self.max_runs.max(1) as f64;
        let fractions: Vec<f64> = schedule.iter().map(|&r| r as f64 / cap).collect();
        let design_alpha = DESIGN_SHARE * self.alpha;
        let levels = sequential::nominal_levels_cached(&fractions, design_alpha, self.spending_rho);
        levels.get(k).copied().unwrap_or(0.0)
    }

    /// Reject configs that would make every verdict meaningless.
    pub fn validate(&self) -> Result<()> {
        let bad = |why: &str| Err(Error::InvalidStatsConfig(why.to_string()));
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return bad("alpha must be in (0, 1)");
        }
        if !(self.ci_level > 0.0 && self.ci_level < 1.0) {
            return bad("ci_level must be in (0, 1)");
        }
        if !(self.same_alpha > 0.0 && self.same_alpha < 0.5) {
            return bad("same_alpha must be in (0, 0.5)");
        }
        if self.same_magnitude_iqr.is_nan() || self.same_magnitude_iqr <= 0.0 {
            return bad("same_magnitude_iqr must be positive");
        }
        if !(self.spending_rho > 0.0 && self.spending_rho <= 10.0) {
            return bad("spending_rho must be in (0, 10]");
        }
        if self.batch_runs == 0 || self.max_runs < self.min_runs || self.min_runs < 2 {
            return bad("need batch_runs ≥ 1 and 2 ≤ min_runs ≤ max_runs");
        }
        Ok(())
    }
}

/// Both verdicts and the displayed numbers for one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricComparison {
    pub metric: String,
    pub direction: Direction,
    /// A benchmark KPI (not `<test>.time.*`, not a monitor).
    pub kpi: bool,
    pub base: Summary,
    pub head: Summary,
    /// `100·(mean_head − mean_base)/mean_base`, or the absolute difference of
    /// the means when `change_is_absolute` (perf-profile, `%` stats).
    pub change: f64,
    pub change_is_absolute: bool,
    /// Regression / improvement / undefined, from direction and `change`.
    pub impact: Impact,
    pub zero_day: ZeroDayVerdict,
    pub kbot: KbotVerdict,
}

/// The comparison of two commits' runs, KPIs first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub base_runs: usize,
    pub head_runs: usize,
    pub metrics: Vec<MetricComparison>,
}

/// How many more runs of each side to request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunsWanted {
    pub base: usize,
    pub head: usize,
}

impl RunsWanted {
    pub fn none(self) -> bool {
        self.base == 0 && self.head == 0
    }
}

/// Compare per-run metric maps of base and head. One [`MetricComparison`]
/// per metric present in at least one run of each side; a run that lacks a
/// metric simply contributes no sample to it. Errors on non-finite values
/// and invalid configs.
pub fn compare_runs(
    base: &[BTreeMap<String, f64>],
    head: &[BTreeMap<String, f64>],
    cfg: &StatsConfig,
) -> Result<Comparison> {
    cfg.validate()?;
    let names = |runs: &[BTreeMap<String, f64>]| -> BTreeSet<String> {
        runs.iter().flat_map(|r| r.keys().cloned()).collect()
    };
    let (nb, nh) = (names(base), names(head));
    let mut metrics: Vec<MetricComparison> = Vec::new();
    for (i, name) in nb.intersection(&nh).enumerate() {
        let b = samples(base, name)?;
        let h = samples(head, name)?;
        metrics.push(compare_metric(name, &b, &h, cfg, i as u64));
    }
    metrics.sort_by(|x, y| {
        (metrics::report_rank(&x.metric), &x.metric)
            .cmp(&(metrics::report_rank(&y.metric), &y.metric))
    });
    Ok(Comparison {
        base_runs: base.len(),
        head_runs: head.len(),
        metrics,
    })
}

fn samples(runs: &[BTreeMap<String, f64>], name: &str) -> Result<Vec<f64>> {
    let v: Vec<f64> = runs.iter().filter_map(|r| r.get(name).copied()).collect();
    if v.iter().any(|x| !x.is_finite()) {
        return Err(Error::NonFiniteMetric {
            name: name.to_string(),
        });
    }
    Ok(v)
}

/// Compare the samples of one metric (both non-empty and finite).
pub fn compare_metric(
    name: &str,
    base: &[f64],
    head: &[f64],
    cfg: &StatsConfig,
    salt: u64,
) -> MetricComparison {
    let (bs, hs) = (Summary::of(base), Summary::of(head));
    let change_is_absolute = metrics::shows_absolute_change(name);
    let change = if change_is_absolute {
        hs.mean - bs.mean
    } else if bs.mean != 0.0 {
        100.0 * (hs.mean - bs.mean) / bs.mean.abs()
    } else {
        f64::NAN
    };
    let direction = metrics::direction(name);
    MetricComparison {
        metric: name.to_string(),
        direction,
        kpi: metrics::is_kpi(name),
        impact: Impact::of(direction, change),
        zero_day: zeroday::verdict(name, base, head, cfg.perf_profile_threshold),
        kbot: verdict::verdict(name, base, head, cfg, salt),
        base: bs,
        head: hs,
        change,
        change_is_absolute,
    }
}

impl Comparison {
    /// The metrics whose verdict decides whether to run more: the KPIs, or
    /// every metric when there is no KPI.
    fn deciding(&self) -> impl Iterator<Item = &MetricComparison> {
        let any_kpi = self.metrics.iter().any(|m| m.kpi);
        self.metrics.iter().filter(move |m| m.kpi || !any_kpi)
    }

    /// How many more runs per side to request: up to `min_runs` first; then
    /// `batch_runs` more while a deciding metric is `unknown`, never beyond
    /// `max_runs` (pass a per-job cap through `cfg`). The smaller side is
    /// brought up first, as Pinpoint adds attempts to the side with fewer.
    pub fn runs_wanted(&self, cfg: &StatsConfig) -> RunsWanted {
        let (b, h) = (self.base_runs, self.head_runs);
        let target = if b < cfg.min_runs || h < cfg.min_runs {
            cfg.min_runs
        } else if self.deciding().any(|m| m.kbot.outcome == Outcome::Unknown) {
            b.min(h) + cfg.batch_runs
        } else {
            0
        }
        .min(cfg.max_runs);
        RunsWanted {
            base: target.saturating_sub(b),
            head: target.saturating_sub(h),
        }
    }

    /// Metrics kbot reports: `different` ones.
    pub fn different(&self) -> impl Iterator<Item = &MetricComparison> {
        self.metrics
            .iter()
            .filter(|m| m.kbot.outcome == Outcome::Different)
    }

    /// Metrics 0-day would call changed.
    pub fn zero_day_changed(&self) -> impl Iterator<Item = &MetricComparison> {
        self.metrics.iter().filter(|m| m.zero_day.changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(values: &[(&str, &[f64])]) -> Vec<BTreeMap<String, f64>> {
        let n = values[0].1.len();
        (0..n)
            .map(|i| values.iter().map(|(k, v)| (k.to_string(), v[i])).collect())
            .collect()
    }

    #[test]
    fn kpis_come_first_and_only_shared_metrics() {
        let base = runs(&[
            ("pipen.time.user_time", &[1.0, 2.0, 3.0]),
            ("pipen.MB/sec", &[1.0, 2.0, 3.0]),
        ]);
        let mut head = runs(&[
            ("pipen.time.user_time", &[1.0, 2.0, 3.0]),
            ("pipen.MB/sec", &[1.0, 2.0, 3.0]),
        ]);
        head[0].insert("only.head".into(), 1.0);
        let c = compare_runs(&base, &head, &StatsConfig::default()).expect("compare");
        let names: Vec<_> = c.metrics.iter().map(|m| m.metric.as_str()).collect();
        assert_eq!(names, ["pipen.MB/sec", "pipen.time.user_time"]);
    }

    #[test]
    fn non_finite_is_an_error() {
        let base = runs(&[("a.b", &[1.0, f64::NAN])]);
        let head = runs(&[("a.b", &[1.0, 2.0])]);
        assert!(matches!(
            compare_runs(&base, &head, &StatsConfig::default()),
            Err(Error::NonFiniteMetric { .. })
        ));
    }

    #[test]
    fn runs_wanted_schedule() {
        let cfg = StatsConfig::default();
        let (b2, h2) = ([100.0, 103.0], [101.0, 96.0]);
        let c = compare_runs(&runs(&[("x.ops", &b2)]), &runs(&[("x.ops", &h2)]), &cfg).expect("c");
        assert_eq!(c.runs_wanted(&cfg), RunsWanted { base: 2, head: 2 });
        // A 3.5% shift in 2.4% noise: neither significant on 4 runs nor
        // ruled out by the equivalence test.
        let noisy_b = [100.0, 103.0, 97.0, 101.0];
        let noisy_h = [103.0, 107.0, 100.0, 105.0];
        let c = compare_runs(
            &runs(&[("x.ops", &noisy_b)]),
            &runs(&[("x.ops", &noisy_h)]),
            &cfg,
        )
        .expect("c");
        assert_eq!(c.metrics[0].kbot.outcome, Outcome::Unknown);
        assert_eq!(c.runs_wanted(&cfg), RunsWanted { base: 2, head: 2 });
        let capped = StatsConfig { max_runs: 4, ..cfg };
        assert!(c.runs_wanted(&capped).none());
    }

    #[test]
    fn look_levels_spend_alpha_unevenly() {
        let cfg = StatsConfig::default();
        assert_eq!(cfg.look_schedule(), [4, 6, 8, 10]);
        let levels: Vec<f64> = cfg
            .look_schedule()
            .iter()
            .map(|&n| cfg.look_alpha(n))
            .collect();
        assert!(levels.windows(2).all(|w| w[0] < w[1]), "{levels:?}");
        assert!(
            levels[3] > 0.5 * cfg.alpha && levels[3] < cfg.alpha,
            "{levels:?}"
        );
        // Between looks, the earlier look's level; below min_runs, none.
        assert_eq!(cfg.look_alpha(5), levels[0]);
        assert_eq!(cfg.look_alpha(3), 0.0);
    }
}
