//! The comparison's tunables ([`StatsConfig`]) and the levels they give
//! each look of the adaptive schedule: the α- and `same`-spending over the
//! looks, kept apart from the comparison that reads them.

use serde::{Deserialize, Serialize};

use super::{sequential, KpiProcedure};
use crate::{Error, Result};

/// Tunables of the comparison. `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatsConfig {
    /// Family-wise false-positive budget of one A/B comparison, adaptive
    /// extra runs included (Pinpoint's low threshold, 0.01). It is spent
    /// over the looks by [`StatsConfig::look_alpha`].
    pub alpha: f64,
    /// The job's `same` margin, a relative change: `same` rules out changes
    /// beyond `max(metric floor, same_margin)`. Stated before the data are
    /// seen, so `same` means the same thing at any noise: where the runs
    /// cannot rule out a change this big, the pair ends `unknown`. 3% is
    /// the smallest margin an unchanged pair at 2% CV can reach within a
    /// few runs (BENCHMARKS.md, "Statistics").
    pub same_margin: f64,
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
    /// Error rate of the `same` equivalence test (TOST; 0.05 is the usual
    /// bioequivalence level), spent over the looks by
    /// [`StatsConfig::look_same_beta`]: a change at the margin ends `same`
    /// in at most this share of pairs, whatever look it ends at.
    pub same_alpha: f64,
    /// Exponent of the spending of `same_alpha` over the looks,
    /// `same_alpha·(n/max_runs)^ρ`: 1 spends it in proportion to the runs.
    pub same_spending_rho: f64,
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
    /// How `alpha` is shared among a job's KPIs ([`family`](super::family)): the primary
    /// 0.7 of it and the others the rest, by default.
    pub kpi_procedure: KpiProcedure,
}

impl Default for StatsConfig {
    fn default() -> Self {
        Self {
            alpha: 0.01,
            same_margin: 0.03,
            min_runs: 4,
            batch_runs: 2,
            max_runs: 10,
            spending_rho: 3.0,
            same_alpha: 0.05,
            same_spending_rho: 1.0,
            bootstrap_resamples: 1000,
            ci_level: 0.95,
            perf_profile_threshold: None,
            seed: 0,
            kpi_procedure: KpiProcedure::default(),
        }
    }
}

/// Share of `alpha` the group-sequential boundaries are designed for; the
/// rest absorbs what their normal model misses (see `look_alpha`).
const DESIGN_SHARE: f64 = 0.9;
/// The same for `same_alpha` ([`StatsConfig::look_same_beta`]).
const SAME_DESIGN_SHARE: f64 = 0.8;

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
        self.look_alpha_share(n, 1.0)
    }

    /// [`StatsConfig::look_alpha`] for a test that holds `share` of
    /// `alpha` (a KPI of a job, [`family`](super::family)): the levels of the spending
    /// function `share·alpha·t^ρ` over the same looks.
    pub fn look_alpha_share(&self, n: usize, share: f64) -> f64 {
        if share <= 0.0 {
            return 0.0;
        }
        let schedule = self.look_schedule();
        let Some(k) = schedule.iter().rposition(|&look| look <= n) else {
            return 0.0;
        };
        let cap = self.max_runs.max(1) as f64;
        let fractions: Vec<f64> = schedule.iter().map(|&r| r as f64 / cap).collect();
        let design_alpha = DESIGN_SHARE * self.alpha * share.min(1.0);
        let levels = sequential::nominal_levels_cached(&fractions, design_alpha, self.spending_rho);
        levels.get(k).copied().unwrap_or(0.0)
    }

    /// The one-sided level of each test of the `same` equivalence test at
    /// a look with `n` runs on the smaller side, 0 below `min_runs`.
    /// `same_alpha` is spent over the looks as `same_alpha·t^ρ` (t = runs /
    /// `max_runs`) with the same group-sequential levels as α
    /// ([`sequential`]): at a change exactly at the margin, the one-sided
    /// test that must reject for `same` is a random walk against one
    /// boundary, which a two-sided design at `2·same_alpha` crosses on that
    /// side with probability `same_alpha` (Jennison & Turnbull ch. 6, two
    /// one-sided tests in sequence). Designed, like α, for a share of
    /// `same_alpha`, the rest left for the small-sample
    /// tests (`SAME_DESIGN_SHARE`). A pair that ends `different` first
    /// only lowers the rate.
    pub fn look_same_beta(&self, n: usize) -> f64 {
        let schedule = self.look_schedule();
        let Some(k) = schedule.iter().rposition(|&look| look <= n) else {
            return 0.0;
        };
        let cap = self.max_runs.max(1) as f64;
        let fractions: Vec<f64> = schedule.iter().map(|&r| r as f64 / cap).collect();
        let design = 2.0 * SAME_DESIGN_SHARE * self.same_alpha;
        let levels = sequential::nominal_levels_cached(&fractions, design, self.same_spending_rho);
        levels.get(k).copied().unwrap_or(0.0) / 2.0
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
        if !(self.same_margin > 0.0 && self.same_margin < 1.0) {
            return bad("same_margin must be in (0, 1)");
        }
        if !(self.same_spending_rho > 0.0 && self.same_spending_rho <= 10.0) {
            return bad("same_spending_rho must be in (0, 10]");
        }
        if !(self.spending_rho > 0.0 && self.spending_rho <= 10.0) {
            return bad("spending_rho must be in (0, 10]");
        }
        if let KpiProcedure::PrimaryFirst { primary_share } = self.kpi_procedure {
            if !(primary_share > 0.0 && primary_share <= 1.0) {
                return bad("kpi_procedure's primary_share must be in (0, 1]");
            }
        }
        if self.batch_runs == 0 || self.max_runs < self.min_runs || self.min_runs < 2 {
            return bad("need batch_runs ≥ 1 and 2 ≤ min_runs ≤ max_runs");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_spends_its_error_over_the_looks() {
        let cfg = StatsConfig::default();
        let betas: Vec<f64> = cfg
            .look_schedule()
            .iter()
            .map(|&n| cfg.look_same_beta(n))
            .collect();
        // Every look is below the total, and their sum exceeds it only by
        // what the looks' correlation gives back (group-sequential levels).
        assert!(
            betas.iter().all(|&b| b > 0.0 && b < cfg.same_alpha),
            "{betas:?}"
        );
        assert!(
            betas.iter().sum::<f64>() < 2.0 * cfg.same_alpha,
            "{betas:?}"
        );
        assert_eq!(cfg.look_same_beta(3), 0.0);
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
