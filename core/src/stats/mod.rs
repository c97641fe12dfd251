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
//!
//! [`StatsConfig`], the tunables, lives in `config`; `compare` builds a
//! [`Comparison`] from per-run metric maps. This file holds the
//! comparison's types and how many more runs a comparison asks for.

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

mod compare;
mod config;

use serde::{Deserialize, Serialize};

use crate::metrics::{Direction, Impact};
pub use compare::{compare_job_runs, compare_metric, compare_metric_with, compare_runs};
pub use config::StatsConfig;
pub use describe::Summary;
pub use family::KpiProcedure;
pub use verdict::{KbotVerdict, Outcome, Step};
pub use zeroday::{Sample, ZeroDayReason, ZeroDayRow, ZeroDayVerdict};

/// Both verdicts and the displayed numbers for one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricComparison {
    pub metric: String,
    pub direction: Direction,
    /// One of the job's KPIs: those its job file names (`kpi:`), else
    /// every benchmark KPI ([`metrics::is_kpi`](crate::metrics::is_kpi):
    /// not `<test>.time.*`, not a monitor).
    pub kpi: bool,
    /// The job's primary KPI (the first of `kpi:`, else
    /// [`metrics::primary_kpi`](crate::metrics::primary_kpi)): its verdict
    /// decides whether to run more, and it holds the largest share of the
    /// job's α ([`family`]).
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
    use std::collections::BTreeMap;

    use super::*;

    pub(super) fn runs(values: &[(&str, &[f64])]) -> Vec<BTreeMap<String, f64>> {
        let n = values[0].1.len();
        (0..n)
            .map(|i| values.iter().map(|(k, v)| (k.to_string(), v[i])).collect())
            .collect()
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
}
