//! Building a [`Comparison`] from the per-run metric maps of a base and a
//! head commit: which metrics are compared, both verdicts on each, and the
//! job's KPI family; the types it fills and their run schedule are the
//! parent module's.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    family, verdict, zeroday, Comparison, KbotVerdict, MetricComparison, OneSidedMetric, Outcome,
    Sample, Side, StatsConfig, Step, Summary,
};
use crate::metrics::{self, Impact};
use crate::{Error, Result};

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

#[cfg(test)]
mod tests {
    use super::super::tests::runs;
    use super::super::ZeroDayReason;
    use super::*;

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
}
