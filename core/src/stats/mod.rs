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
pub mod family;
pub mod nonparametric;
pub mod parametric;
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
pub use family::KpiProcedure;
pub use verdict::{KbotVerdict, Outcome, Step};
pub use zeroday::{Sample, ZeroDayReason, ZeroDayRow, ZeroDayVerdict};

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
    /// How `alpha` is shared among a job's KPIs ([`family`]): the primary
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
    /// `alpha` (a KPI of a job, [`family`]): the levels of the spending
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

/// Both verdicts and the displayed numbers for one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricComparison {
    pub metric: String,
    pub direction: Direction,
    /// One of the job's KPIs: those its job file names (`kpi:`), else
    /// every benchmark KPI ([`metrics::is_kpi`]: not `<test>.time.*`, not a
    /// monitor).
    pub kpi: bool,
    /// The job's primary KPI (the first of `kpi:`, else
    /// [`metrics::primary_kpi`]): its verdict decides whether to run more,
    /// and it holds the largest share of the job's α ([`family`]).
    #[serde(default)]
    pub primary: bool,
    /// The job acts on this KPI's `different` (a report, a bisection): it
    /// survived the job's multiple-testing procedure ([`family`]).
    #[serde(default)]
    pub acts: bool,
    /// For a KPI, the level its p had to beat under that procedure at this
    /// look (`kbot.alpha` is the level of a test alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family_alpha: Option<f64>,
    pub base: Summary,
    pub head: Summary,
    /// kbot's estimate of the change ([`KbotVerdict::change`]): in percent,
    /// or in the metric's units when `change_is_absolute` (perf-profile,
    /// `%` stats). 0-day's table shows its own mean change
    /// (`zero_day.row`).
    pub change: f64,
    pub change_is_absolute: bool,
    /// Regression / improvement / undefined, from direction and `change`:
    /// the same estimator as the decision, so a KPI whose centre fell is
    /// never an improvement because one run was far out.
    pub impact: Impact,
    pub zero_day: ZeroDayVerdict,
    pub kbot: KbotVerdict,
}

/// Which side's runs have a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Base,
    Head,
}

/// A metric only one side's runs have. kbot's verdict needs samples on both
/// sides; 0-day's rule, as `lkp compare` applies it, pads the other side
/// with zeros and judges it like any other stat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneSidedMetric {
    pub metric: String,
    /// The side whose runs have it.
    pub present_in: Side,
    pub kpi: bool,
    pub change_is_absolute: bool,
    pub zero_day: ZeroDayVerdict,
    /// kbot's verdict where a missing value is known to be 0: a
    /// `perf-profile.*` symbol that profiled runs of the other side did not
    /// sample above the profile's floor (`profile_symbol_verdict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kbot: Option<KbotVerdict>,
}

/// The comparison of two commits' runs, KPIs first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub base_runs: usize,
    pub head_runs: usize,
    /// Metrics some run of each side has: both verdicts.
    pub metrics: Vec<MetricComparison>,
    /// Metrics of one side only that 0-day compares: every metric of the
    /// base (it vanished from the head), a head-only function stat
    /// (`metrics::is_function_stat`: a new `.fail`), and a head-only
    /// `perf-profile.*` or `lock_stat.*` metric when the base ran that
    /// monitor (`StatCompare#process`). Other head-only metrics are new and
    /// not compared, as upstream.
    #[serde(default)]
    pub one_sided: Vec<OneSidedMetric>,
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
/// per metric present in at least one run of each side: kbot's verdict
/// takes the runs that have the metric; 0-day's takes every run, a run
/// without the metric as a 0 (lkp-tests pads its matrices so). Metrics of
/// one side only go to [`Comparison::one_sided`] when 0-day compares them.
/// Errors on non-finite values and invalid configs. The job's KPIs are
/// the default choice; [`compare_job_runs`] takes a job file's `kpi:`.
pub fn compare_runs(
    base: &[BTreeMap<String, f64>],
    head: &[BTreeMap<String, f64>],
    cfg: &StatsConfig,
) -> Result<Comparison> {
    compare_job_runs(base, head, &[], cfg)
}

/// [`compare_runs`] for a job whose file names its KPIs (`kpi:`, the first
/// the primary; empty: every benchmark KPI, the primary by
/// [`metrics::primary_kpi`]). The KPIs are tested as one family
/// ([`family`]): [`MetricComparison::acts`] says which the job acts on.
pub fn compare_job_runs(
    base: &[BTreeMap<String, f64>],
    head: &[BTreeMap<String, f64>],
    kpis: &[String],
    cfg: &StatsConfig,
) -> Result<Comparison> {
    cfg.validate()?;
    let names = |runs: &[BTreeMap<String, f64>]| -> BTreeSet<String> {
        runs.iter().flat_map(|r| r.keys().cloned()).collect()
    };
    let (nb, nh) = (names(base), names(head));
    let mut metrics: Vec<MetricComparison> = Vec::new();
    for (i, name) in nb.intersection(&nh).enumerate() {
        let b = padded(base, name)?;
        let h = padded(head, name)?;
        let step = step_in_runs(name, base, head);
        metrics.push(compare_padded(name, &b, &h, &nb, step, cfg, i as u64));
    }
    let mut one_sided = Vec::new();
    for name in nb.symmetric_difference(&nh) {
        let present_in = if nb.contains(name) {
            Side::Base
        } else if monitored_by(&nb, name) || metrics::is_function_stat(name) {
            Side::Head
        } else {
            continue;
        };
        let b = padded(base, name)?;
        let h = padded(head, name)?;
        one_sided.push(OneSidedMetric {
            metric: name.clone(),
            present_in,
            kpi: if kpis.is_empty() {
                metrics::is_kpi(name)
            } else {
                kpis.contains(name)
            },
            change_is_absolute: metrics::shows_absolute_change(name),
            zero_day: zeroday::verdict_padded(name, &b, &h, &nb, cfg.perf_profile_threshold),
            kbot: profile_symbol_verdict(name, base, head, cfg),
        });
    }
    mark_family(&mut metrics, kpis, cfg);
    let rank = |m: &str| (metrics::report_rank(m), m.to_owned());
    metrics.sort_by_key(|m| rank(&m.metric));
    one_sided.sort_by_key(|m| rank(&m.metric));
    Ok(Comparison {
        base_runs: base.len(),
        head_runs: head.len(),
        metrics,
        one_sided,
    })
}

/// Marks the job's KPIs (`kpis`, else every benchmark KPI), its primary,
/// and which KPIs the job acts on: the family's graph ([`family::Graph`])
/// run on this look's verdicts, each KPI's share of α turned into its
/// look's level by [`StatsConfig::look_alpha_share`] on its own run count.
fn mark_family(metrics: &mut [MetricComparison], kpis: &[String], cfg: &StatsConfig) {
    let primary = if kpis.is_empty() {
        metrics::primary_kpi(metrics.iter().map(|m| m.metric.as_str())).map(str::to_owned)
    } else {
        kpis.iter()
            .find(|k| metrics.iter().any(|m| &m.metric == *k))
            .cloned()
    };
    for m in metrics.iter_mut() {
        m.primary = primary.as_deref() == Some(m.metric.as_str());
        if !kpis.is_empty() {
            m.kpi = kpis.contains(&m.metric);
        }
    }
    // The primary first: the graph's hypothesis 0.
    let mut family: Vec<usize> = (0..metrics.len()).filter(|&i| metrics[i].kpi).collect();
    family.sort_by_key(|&i| !metrics[i].primary);
    let graph = family::Graph::for_config(cfg, family.len());
    let level =
        |m: &MetricComparison, share: f64| cfg.look_alpha_share(m.base.n.min(m.head.n), share);
    let decisions = graph.run(|j, share| {
        let m = &metrics[family[j]];
        m.kbot.outcome == Outcome::Different
            && (m.kbot.deterministic || m.kbot.p_value < level(m, share))
    });
    for (&i, d) in family.iter().zip(decisions) {
        let m = &mut metrics[i];
        m.acts = d.rejected;
        m.family_alpha = Some(level(m, d.share));
    }
}

/// The step a metric's values were read at, from the metric table and,
/// for a figure computed from a clock, the smallest reading of that clock
/// in any run of either side ([`metrics::Quantum::Clock`]).
fn step_in_runs(
    name: &str,
    base: &[BTreeMap<String, f64>],
    head: &[BTreeMap<String, f64>],
) -> Step {
    let Some(metrics::Quantum::Clock { clock, step }) = metrics::quantum(name) else {
        return Step::of(name);
    };
    let clock = format!("{}.{clock}", metrics::prefix(name));
    base.iter()
        .chain(head)
        .filter_map(|r| r.get(&clock).copied())
        .filter(|t| t.is_finite() && *t > 0.0)
        .min_by(f64::total_cmp)
        .map_or(Step::Unresolved, |t| Step::Relative(step / t))
}

/// `StatCompare#monitored_by_b?`: a head-only `perf-profile.*` or
/// `lock_stat.*` stat is compared when the base has some stat of that monitor.
fn monitored_by(base_names: &BTreeSet<String>, name: &str) -> bool {
    let monitor = metrics::prefix(name);
    matches!(monitor, "perf-profile" | "lock_stat")
        && base_names.iter().any(|b| metrics::prefix(b) == monitor)
}

/// kbot's verdict on a `perf-profile.*` symbol one side never sampled
/// above the profile's floor: each profiled run (one with any perf-profile
/// row) that lacks it counts as 0. A profile lists every symbol at or above
/// its floor, so its absence is a measurement, not a missing one; without
/// it, a function a change brought in (the zeroing of a planted slowdown)
/// would have no verdict at all. `None` for other metrics, or when a side
/// has no profiled run.
fn profile_symbol_verdict(
    name: &str,
    base: &[BTreeMap<String, f64>],
    head: &[BTreeMap<String, f64>],
    cfg: &StatsConfig,
) -> Option<KbotVerdict> {
    if !metrics::is_perf_profile(name) {
        return None;
    }
    let values = |runs: &[BTreeMap<String, f64>]| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.keys().any(|k| metrics::is_perf_profile(k)))
            .map(|r| r.get(name).copied().unwrap_or(0.0))
            .collect()
    };
    let (b, h) = (values(base), values(head));
    if b.is_empty() || h.is_empty() || b.iter().chain(&h).any(|v| !v.is_finite()) {
        return None;
    }
    let mut v = verdict::verdict(name, &b, &h, cfg, 0);
    // Each side one share on every boot (the instruction-counted guest):
    // the exact-clock rule of `verdict`, which a side at exactly 0 cannot
    // pass (its floor is relative), decided on the absolute change.
    let flat = |s: &[f64]| s.len() >= 2 && s.iter().all(|x| *x == s[0]);
    if v.outcome != Outcome::Different
        && flat(&b)
        && flat(&h)
        && (h[0] - b[0]).abs() >= PROFILE_SYMBOL_MIN_POINTS
    {
        v.outcome = Outcome::Different;
        v.deterministic = true;
    }
    Some(v)
}

/// The smallest change of a symbol's share, in points, that counts when
/// one side never sampled it: lkp-tests' floor for perf-profile stats.
const PROFILE_SYMBOL_MIN_POINTS: f64 = 1.0;

/// One sample per run, [`Sample::Missing`] where the run lacks `name`.
fn padded(runs: &[BTreeMap<String, f64>], name: &str) -> Result<Vec<Sample>> {
    runs.iter()
        .map(|r| match r.get(name) {
            Some(v) if !v.is_finite() => Err(Error::NonFiniteMetric {
                name: name.to_string(),
            }),
            Some(v) => Ok(Sample::Value(*v)),
            None => Ok(Sample::Missing),
        })
        .collect()
}

/// [`compare_metric`] on per-run samples: kbot's verdict and summaries over
/// the runs that have the metric, 0-day's over all of them (`base_stats`:
/// the names the base's runs have, for its rule on function stats).
fn compare_padded(
    name: &str,
    base: &[Sample],
    head: &[Sample],
    base_stats: &BTreeSet<String>,
    step: Step,
    cfg: &StatsConfig,
    salt: u64,
) -> MetricComparison {
    let present = |v: &[Sample]| -> Vec<f64> {
        v.iter()
            .filter_map(|s| match s {
                Sample::Value(x) => Some(*x),
                Sample::Missing => None,
            })
            .collect()
    };
    let mut m = compare_metric_with(name, &present(base), &present(head), step, cfg, salt);
    m.zero_day = zeroday::verdict_padded(name, base, head, base_stats, cfg.perf_profile_threshold);
    m
}

/// Compare the samples of one metric (both non-empty and finite), the step
/// of its values from the metric table ([`Step::of`]).
pub fn compare_metric(
    name: &str,
    base: &[f64],
    head: &[f64],
    cfg: &StatsConfig,
    salt: u64,
) -> MetricComparison {
    compare_metric_with(name, base, head, Step::of(name), cfg, salt)
}

/// [`compare_metric`] with the step the values were read at.
pub fn compare_metric_with(
    name: &str,
    base: &[f64],
    head: &[f64],
    step: Step,
    cfg: &StatsConfig,
    salt: u64,
) -> MetricComparison {
    let (bs, hs) = (Summary::of(base), Summary::of(head));
    let change_is_absolute = metrics::shows_absolute_change(name);
    let direction = metrics::direction(name);
    let kbot = verdict::verdict_with(name, base, head, step, cfg, salt);
    MetricComparison {
        metric: name.to_string(),
        direction,
        kpi: metrics::is_kpi(name),
        primary: false,
        acts: false,
        family_alpha: None,
        impact: Impact::of(direction, kbot.change),
        zero_day: zeroday::verdict(name, base, head, cfg.perf_profile_threshold),
        change: kbot.change,
        kbot,
        base: bs,
        head: hs,
        change_is_absolute,
    }
}

impl Comparison {
    /// The job's primary KPI, when it has KPIs.
    pub fn primary(&self) -> Option<&MetricComparison> {
        self.metrics.iter().find(|m| m.primary)
    }

    /// The KPIs the job acts on: `different`, and still so under the job's
    /// multiple-testing procedure ([`family`]: one α for all its KPIs,
    /// whatever their number and correlation). Every metric's own verdict
    /// (its test alone) is still shown. A comparison without KPIs acts on
    /// nothing.
    pub fn acting(&self) -> impl Iterator<Item = &MetricComparison> {
        self.metrics.iter().filter(|m| m.acts)
    }

    /// The metrics whose verdict decides whether to run more: the primary
    /// KPI, or every metric when there is no KPI.
    fn deciding(&self) -> impl Iterator<Item = &MetricComparison> {
        let any_primary = self.metrics.iter().any(|m| m.primary);
        self.metrics
            .iter()
            .filter(move |m| m.primary || !any_primary)
    }

    /// Every metric that decides the pair was decided by exact values
    /// ([`KbotVerdict::deterministic`]).
    pub fn exact(&self) -> bool {
        let mut deciding = self.deciding().peekable();
        deciding.peek().is_some() && deciding.all(|m| m.kbot.deterministic)
    }

    /// KPIs `different` on their own test that the job does not act on
    /// yet: their share of the job's α asks for more evidence than this
    /// look has ([`family`]). Only KPIs the family procedure ran on
    /// (`family_alpha` set by [`compare_job_runs`]) are held back.
    fn held_back(&self) -> impl Iterator<Item = &MetricComparison> {
        self.metrics.iter().filter(|m| {
            m.kpi && m.family_alpha.is_some() && m.kbot.outcome == Outcome::Different && !m.acts
        })
    }

    /// KPIs other than the primary that look changed but are undecided:
    /// `unknown`, with an estimate beyond the change `same` rules out.
    /// Without more runs for them, a KPI that moved on its own would be
    /// left `unknown` whenever the primary settles early (`same` at the
    /// first look). An unchanged KPI seldom looks so, so unchanged jobs pay
    /// little for it; stopping for any reason is allowed by the
    /// group-sequential levels, which bound a crossing at any look.
    fn looks_changed(&self) -> impl Iterator<Item = &MetricComparison> {
        self.metrics.iter().filter(|m| {
            m.kpi
                && !m.primary
                && m.family_alpha.is_some()
                && m.kbot.outcome == Outcome::Unknown
                && !m.change_is_absolute
                && m.change.abs() / 100.0 > m.kbot.same_margin
        })
    }

    /// How many more runs per side to request: none when every deciding
    /// metric is decided by exact values ([`KbotVerdict::deterministic`]:
    /// an instruction-counted guest repeats itself to the last digit, so 2
    /// runs a side decide); else up to `min_runs` first, then `batch_runs`
    /// more while a deciding metric is `unknown`, a KPI is held back
    /// (`different` alone, not yet within its share of the job's α) or
    /// another KPI looks changed but is undecided, never beyond `max_runs`
    /// (pass a per-job cap through `cfg`). The smaller side is brought up
    /// first, as Pinpoint adds attempts to the side with fewer.
    pub fn runs_wanted(&self, cfg: &StatsConfig) -> RunsWanted {
        let (b, h) = (self.base_runs, self.head_runs);
        let target = if self.exact() {
            0
        } else if b < cfg.min_runs || h < cfg.min_runs {
            cfg.min_runs
        } else if self.deciding().any(|m| m.kbot.outcome == Outcome::Unknown)
            || self.held_back().next().is_some()
            || self.looks_changed().next().is_some()
        {
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
    fn missing_metrics_are_zeros_for_zero_day_only() {
        let mut base = runs(&[
            ("x.ops", &[100.0, 101.0, 102.0]),
            ("gone.ops", &[50.0, 51.0, 52.0]),
            ("perf-profile.self.cycles-pp.a", &[7.0, 7.1, 7.2]),
        ]);
        let mut head = runs(&[
            ("x.ops", &[90.0, 91.0, 92.0]),
            ("new.ops", &[1.0, 1.0, 1.0]),
            ("perf-profile.self.cycles-pp.b", &[8.0, 8.1, 8.2]),
        ]);
        // One head run lost x.ops: kbot's verdict uses the two that have
        // it, 0-day's counts the third as 0.
        head[2].remove("x.ops");
        base[0].insert("partial.ops".into(), 10.0);
        head[0].insert("partial.ops".into(), 10.0);
        let c = compare_runs(&base, &head, &StatsConfig::default()).expect("compare");
        let x = c
            .metrics
            .iter()
            .find(|m| m.metric == "x.ops")
            .expect("x.ops");
        assert_eq!((x.base.n, x.head.n), (3, 2));
        assert!((x.zero_day.row.head_mean - 181.0 / 3.0).abs() < 1e-9);
        // partial.ops: one run a side has it, the other two are zeros.
        let p = c
            .metrics
            .iter()
            .find(|m| m.metric == "partial.ops")
            .expect("partial");
        assert_eq!(p.zero_day.reason, ZeroDayReason::RangesOverlap);
        let one_sided: Vec<(&str, Side, bool)> = c
            .one_sided
            .iter()
            .map(|m| (m.metric.as_str(), m.present_in, m.zero_day.changed))
            .collect();
        // gone.ops vanished from the head: compared against zeros, changed.
        // The base's symbol `a` that the head lost: the head's median is a
        // padded Integer 0, so the default Integer threshold decides (7.1 >
        // 5). The head's new symbol `b` is compared because the base ran
        // perf-profile; its head median is a Float, so the separation test
        // decides (8.0..8.2 against the base's zeros). new.ops is new and
        // not compared.
        assert_eq!(
            one_sided,
            [
                ("gone.ops", Side::Base, true),
                ("perf-profile.self.cycles-pp.a", Side::Base, true),
                ("perf-profile.self.cycles-pp.b", Side::Head, true),
            ]
        );
        assert_eq!(c.one_sided[0].zero_day.row.head_mean, 0.0);
        // kbot's verdict on the profile symbols counts a profiled run
        // without the symbol as 0; gone.ops is not a profile symbol.
        assert!(c.one_sided[0].kbot.is_none());
        assert!(c.one_sided[1].kbot.is_some() && c.one_sided[2].kbot.is_some());
    }

    /// A symbol a change brings in (sampled in every head run, below the
    /// floor in every base run) is `different` for kbot with two runs a
    /// side, where 0-day's rule wants three.
    #[test]
    fn a_new_profile_symbol_gets_kbots_verdict() {
        let base = runs(&[
            ("k.ops", &[100.0, 100.0]),
            ("perf-profile.self.cpu-clock.pipe_read", &[30.0, 30.0]),
        ]);
        let head = runs(&[
            ("k.ops", &[20.0, 20.0]),
            ("perf-profile.self.cpu-clock.pipe_read", &[5.0, 5.0]),
            ("perf-profile.self.cpu-clock.clear_page_rep", &[44.8, 44.8]),
        ]);
        let c = compare_runs(&base, &head, &StatsConfig::default()).expect("compare");
        let new = &c.one_sided[0];
        assert_eq!(new.metric, "perf-profile.self.cpu-clock.clear_page_rep");
        assert!(!new.zero_day.changed, "0-day skips it: {:?}", new.zero_day);
        let kbot = new.kbot.as_ref().expect("kbot's verdict");
        assert_eq!(kbot.outcome, Outcome::Different, "{kbot:?}");
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
    fn a_secondary_kpi_acts_on_its_own() {
        let bw = "lmbench3.PIPE.bandwidth.MB/sec";
        let lat = "lmbench3.PIPE.latency.us";
        let flat = [1000.0, 1004.0, 996.0, 1002.0, 998.0, 1001.0, 999.0, 1003.0];
        let slower: Vec<f64> = flat.iter().map(|x| x * 0.012).collect();
        let faster: Vec<f64> = flat.iter().map(|x| x * 0.010).collect();
        let base = runs(&[(bw, &flat), (lat, &faster)]);
        // Only the latency (a secondary KPI) moved, 20%: its share of α
        // (0.3 of it) is enough, and the job acts on it.
        let head = runs(&[(bw, &flat), (lat, &slower)]);
        let c = compare_runs(&base, &head, &StatsConfig::default()).expect("compare");
        assert_eq!(c.primary().map(|m| m.metric.as_str()), Some(bw));
        let latency = c.metrics.iter().find(|m| m.metric == lat).expect("lat");
        assert_eq!(latency.kbot.outcome, Outcome::Different);
        assert_eq!(latency.impact, Impact::Regression);
        let acting: Vec<&str> = c.acting().map(|m| m.metric.as_str()).collect();
        assert_eq!(acting, [lat]);
        // Its level is the group-sequential level of 0.3·α at 8 runs.
        let cfg = StatsConfig::default();
        let level = latency.family_alpha.expect("a KPI has a family level");
        let share = 1.0 - family::PRIMARY_SHARE;
        assert!((level - cfg.look_alpha_share(8, share)).abs() < 1e-15);
        assert!(level < latency.kbot.alpha);
        // The bandwidth fell too: both act.
        let dropped: Vec<f64> = flat.iter().map(|x| x * 0.8).collect();
        let head = runs(&[(bw, &dropped), (lat, &slower)]);
        let c = compare_runs(&base, &head, &StatsConfig::default()).expect("compare");
        assert_eq!(c.acting().count(), 2);
    }

    /// A KPI `different` on its own test may still fail its share of the
    /// job's budget: it is shown, and the job does not act on it.
    #[test]
    fn a_kpi_different_alone_may_not_act() {
        let bw = "lmbench3.PIPE.bandwidth.MB/sec";
        let lat = "lmbench3.PIPE.latency.us";
        let cfg = StatsConfig::default();
        let base_lat = [10.0, 10.1, 9.9, 10.05, 9.95, 10.02];
        // Find a shift whose p falls between the secondary's share and
        // the full α at 6 runs: `different` alone, not acted on.
        let secondary = 1.0 - family::PRIMARY_SHARE;
        let (full, share) = (cfg.look_alpha(6), cfg.look_alpha_share(6, secondary));
        let base_bw = [1000.0, 1004.0, 996.0, 1002.0, 998.0, 1001.0];
        let found = (1..400).map(|k| 1.0 + k as f64 * 0.0005).find_map(|f| {
            let head_lat: Vec<f64> = base_lat.iter().map(|x| x * f).collect();
            let c = compare_runs(
                &runs(&[(bw, &base_bw), (lat, &base_lat)]),
                &runs(&[(bw, &base_bw), (lat, &head_lat)]),
                &cfg,
            )
            .expect("compare");
            let m = c.metrics.iter().find(|m| m.metric == lat)?.clone();
            (m.kbot.p_value < full && m.kbot.p_value >= share).then_some((c, m))
        });
        let (c, m) = found.expect("some shift lands between the two levels");
        assert_eq!(m.kbot.outcome, Outcome::Different);
        assert!(!m.acts);
        assert_eq!(c.acting().count(), 0);
    }

    #[test]
    fn a_job_file_names_its_kpis() {
        let bw = "lmbench3.PIPE.bandwidth.MB/sec";
        let lat = "lmbench3.PIPE.latency.us";
        let flat = [1000.0, 1004.0, 996.0, 1002.0, 998.0, 1001.0, 999.0, 1003.0];
        let faster: Vec<f64> = flat.iter().map(|x| x * 0.010).collect();
        let slower: Vec<f64> = flat.iter().map(|x| x * 0.012).collect();
        let base = runs(&[(bw, &flat), (lat, &faster)]);
        let head = runs(&[(bw, &flat), (lat, &slower)]);
        let cfg = StatsConfig::default();
        // `kpi: [latency]`: the latency is the primary, the bandwidth no KPI.
        let c = compare_job_runs(&base, &head, &[lat.to_string()], &cfg).expect("compare");
        assert_eq!(c.primary().map(|m| m.metric.as_str()), Some(lat));
        let bw_row = c.metrics.iter().find(|m| m.metric == bw).expect("bw");
        assert!(!bw_row.kpi && !bw_row.acts && bw_row.family_alpha.is_none());
        let acting: Vec<&str> = c.acting().map(|m| m.metric.as_str()).collect();
        assert_eq!(acting, [lat]);
        // The primary decides the runs: decided, so no more.
        assert!(c.runs_wanted(&cfg).none());
        // `kpi: [bandwidth]`: the latency's change is shown, not acted on.
        let c = compare_job_runs(&base, &head, &[bw.to_string()], &cfg).expect("compare");
        assert_eq!(c.acting().count(), 0);
        // A named KPI the runs lack: the next named one is the primary.
        let c = compare_job_runs(
            &base,
            &head,
            &["lmbench3.gone".to_string(), lat.to_string()],
            &cfg,
        )
        .expect("compare");
        assert_eq!(c.primary().map(|m| m.metric.as_str()), Some(lat));
    }

    /// hackbench's throughput from a time printed in ms: identical runs a
    /// side, one clock step apart, are no exact clock; the time in the
    /// same runs gives the step.
    #[test]
    fn a_rounded_clock_needs_more_runs() {
        let cfg = StatsConfig::default();
        let run = |t: f64| -> BTreeMap<String, f64> {
            BTreeMap::from([
                ("hackbench.throughput".to_string(), 4000.0 / t),
                ("hackbench.time_sec".to_string(), t),
            ])
        };
        let c = compare_runs(&[run(0.100), run(0.100)], &[run(0.099), run(0.099)], &cfg)
            .expect("compare");
        let t = c
            .metrics
            .iter()
            .find(|m| m.metric == "hackbench.throughput")
            .expect("throughput");
        assert!(!t.kbot.deterministic, "{:?}", t.kbot);
        assert!(!c.exact());
        assert_eq!(c.runs_wanted(&cfg), RunsWanted { base: 2, head: 2 });
        // 20 s iterations: a millisecond is far below the floor.
        let c =
            compare_runs(&[run(20.0), run(20.0)], &[run(19.0), run(19.0)], &cfg).expect("compare");
        assert!(c.exact() && c.runs_wanted(&cfg).none());
        assert_eq!(c.acting().count(), 2, "throughput up, time down");
    }

    #[test]
    fn exact_sides_decide_on_two_runs() {
        let cfg = StatsConfig::default();
        let kpi = "lmbench3.PIPE.bandwidth.MB/sec";
        let c = compare_runs(
            &runs(&[(kpi, &[1708.35, 1708.35])]),
            &runs(&[(kpi, &[1474.56, 1474.56])]),
            &cfg,
        )
        .expect("c");
        assert!(c.exact() && c.runs_wanted(&cfg).none());
        assert_eq!(c.metrics[0].kbot.outcome, Outcome::Different);
        // Integer-rounded values that happen to repeat, of a metric whose
        // printing is not known, are not exact: the pair goes on to the
        // first look.
        let score = "unixbench.score";
        let c = compare_runs(
            &runs(&[(score, &[50.0, 50.0])]),
            &runs(&[(score, &[51.0, 51.0])]),
            &cfg,
        )
        .expect("c");
        assert!(!c.exact());
        assert_eq!(c.runs_wanted(&cfg), RunsWanted { base: 2, head: 2 });
    }

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
