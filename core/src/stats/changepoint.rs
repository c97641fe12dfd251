//! Change points over a commit-by-commit history: E-divisive means
//! (Matteson & James, JASA 2014) with Hunter's changes (Fleming et al.,
//! ICPE 2023; Apache Otava `analysis.py`): a Student t-test instead of the
//! permutation test (deterministic), sliding windows, and a second pass that
//! drops the weakest change point until every one passes `max_pvalue` and
//! `min_magnitude`. Each step is a *candidate* pair for bisection; the caller
//! re-verifies it with a fresh A/B run before reporting.

use serde::{Deserialize, Serialize};

use super::describe::{mean, sample_variance};
use super::special::student_t_two_sided;
use crate::{Error, Result};

/// Otava's CLI defaults (apache/otava): the
/// maintainers moved to p = 0.001 and magnitude 0 after one big outlier
/// produced false change points at p = 0.05 (apache/otava PR #126).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChangePointConfig {
    pub max_pvalue: f64,
    /// Smallest relative change |after/before − 1| kept (0 keeps all).
    pub min_magnitude: f64,
    /// Points per analysis window and per side of each final test.
    pub window: usize,
}

impl Default for ChangePointConfig {
    fn default() -> Self {
        Self {
            max_pvalue: 0.001,
            min_magnitude: 0.0,
            window: 50,
        }
    }
}

/// One step in the series: the first point of the new level is `index`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangePoint {
    pub index: usize,
    pub p_value: f64,
    pub mean_before: f64,
    pub mean_after: f64,
    /// `100·(mean_after − mean_before)/mean_before`.
    pub change_pct: f64,
}

/// Fewest points on each side of a split: the t-test needs a variance on
/// both sides, and 3 keeps a single outlier from forming its own segment.
const MIN_SEGMENT: usize = 3;
/// Otava relaxes the first pass 10× when the target p is below 0.05.
const RELAX_FACTOR: f64 = 10.0;
const RELAX_LIMIT: f64 = 0.05;

/// Find the change points of `series` (oldest first).
pub fn detect(series: &[f64], cfg: &ChangePointConfig) -> Result<Vec<ChangePoint>> {
    if series.iter().any(|x| !x.is_finite()) {
        return Err(Error::NonFiniteMetric {
            name: "change-point series".into(),
        });
    }
    if !(cfg.max_pvalue > 0.0 && cfg.max_pvalue < 1.0) || cfg.window < 2 * MIN_SEGMENT {
        return Err(Error::InvalidStatsConfig(
            "need 0 < max_pvalue < 1 and window ≥ 6".into(),
        ));
    }
    let relaxed = if cfg.max_pvalue < RELAX_LIMIT {
        (cfg.max_pvalue * RELAX_FACTOR).min(RELAX_LIMIT)
    } else {
        cfg.max_pvalue
    };
    let mut candidates = Vec::new();
    let step = (cfg.window / 2).max(1);
    let mut start = 0;
    while start < series.len() {
        let end = (start + cfg.window).min(series.len());
        split(series, start, end, relaxed, &mut candidates);
        if end == series.len() {
            break;
        }
        start += step;
    }
    candidates.sort_unstable();
    candidates.dedup();
    Ok(prune(series, candidates, cfg))
}

/// Recursive E-divisive split of `series[lo..hi]`, keeping splits whose
/// t-test passes `p_max`.
fn split(series: &[f64], lo: usize, hi: usize, p_max: f64, out: &mut Vec<usize>) {
    if hi - lo < 2 * MIN_SEGMENT {
        return;
    }
    let Some(tau) = best_split(&series[lo..hi]).map(|t| lo + t) else {
        return;
    };
    if t_test(&series[lo..tau], &series[tau..hi]) < p_max {
        out.push(tau);
        split(series, lo, tau, p_max, out);
        split(series, tau, hi, p_max, out);
    }
}

/// The τ maximising the energy statistic Q̂(τ) = m·k/(m+k) · Ê with α = 1.
fn best_split(x: &[f64]) -> Option<usize> {
    let n = x.len();
    let mut best: Option<(usize, f64)> = None;
    for tau in MIN_SEGMENT..=n - MIN_SEGMENT {
        let (a, b) = x.split_at(tau);
        let (m, k) = (a.len() as f64, b.len() as f64);
        let between: f64 = a
            .iter()
            .map(|p| b.iter().map(|q| (p - q).abs()).sum::<f64>())
            .sum();
        let e = 2.0 * between / (m * k) - within(a) - within(b);
        let q = m * k / (m + k) * e;
        if best.is_none_or(|(_, bq)| q > bq) {
            best = Some((tau, q));
        }
    }
    best.map(|(t, _)| t)
}

/// Mean absolute difference over the unordered pairs of `v`.
fn within(v: &[f64]) -> f64 {
    let n = v.len();
    if n < 2 {
        return 0.0;
    }
    let mut s = 0.0;
    for i in 0..n {
        for j in i + 1..n {
            s += (v[i] - v[j]).abs();
        }
    }
    s / (n * (n - 1) / 2) as f64
}

/// Two-sided Student t-test (pooled variance, as Hunter's scipy `ttest_ind`).
fn t_test(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let df = n1 + n2 - 2.0;
    if df < 1.0 {
        return 1.0;
    }
    let diff = mean(a) - mean(b);
    let pooled = ((n1 - 1.0) * sample_variance(a) + (n2 - 1.0) * sample_variance(b)) / df;
    let se = (pooled * (1.0 / n1 + 1.0 / n2)).sqrt();
    if se == 0.0 {
        return if diff == 0.0 { 1.0 } else { 0.0 };
    }
    student_t_two_sided(diff / se, df)
}

/// Second pass: re-test each candidate against its neighbours (at most
/// `window` points per side) and drop the weakest failing one until all pass.
fn prune(series: &[f64], mut cps: Vec<usize>, cfg: &ChangePointConfig) -> Vec<ChangePoint> {
    loop {
        let tested: Vec<ChangePoint> = (0..cps.len())
            .map(|i| evaluate(series, &cps, i, cfg.window))
            .collect();
        let failing = |c: &ChangePoint| {
            c.p_value > cfg.max_pvalue
                || (c.mean_after / c.mean_before - 1.0).abs() < cfg.min_magnitude
        };
        let weakest = tested
            .iter()
            .enumerate()
            .filter(|(_, c)| failing(c))
            .max_by(|(_, x), (_, y)| x.p_value.total_cmp(&y.p_value))
            .map(|(i, _)| i);
        match weakest {
            Some(i) => {
                cps.remove(i);
            }
            None => return tested,
        }
    }
}

fn evaluate(series: &[f64], cps: &[usize], i: usize, window: usize) -> ChangePoint {
    let cp = cps[i];
    let prev = if i > 0 { cps[i - 1] } else { 0 };
    let next = cps.get(i + 1).copied().unwrap_or(series.len());
    let before = &series[prev.max(cp.saturating_sub(window))..cp];
    let after = &series[cp..next.min(cp + window)];
    let (mb, ma) = (mean(before), mean(after));
    ChangePoint {
        index: cp,
        p_value: t_test(before, after),
        mean_before: mb,
        mean_after: ma,
        change_pct: if mb != 0.0 {
            100.0 * (ma - mb) / mb.abs()
        } else {
            f64::NAN
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::rng::SplitMix64;
    use super::*;

    /// Normal noise by Box-Muller from the deterministic generator.
    fn noise(rng: &mut SplitMix64) -> f64 {
        let (u1, u2) = (rng.next_f64().max(1e-300), rng.next_f64());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    #[test]
    fn finds_one_step() {
        let mut rng = SplitMix64::new(42);
        let s: Vec<f64> = (0..120)
            .map(|i| if i < 70 { 100.0 } else { 90.0 } + noise(&mut rng))
            .collect();
        let cps = detect(&s, &ChangePointConfig::default()).expect("detect");
        assert_eq!(cps.len(), 1, "{cps:?}");
        assert!((69..=71).contains(&cps[0].index));
        assert!((cps[0].change_pct + 10.0).abs() < 1.0);
    }

    #[test]
    fn flat_noise_has_no_step() {
        let mut rng = SplitMix64::new(7);
        let s: Vec<f64> = (0..200).map(|_| 100.0 + noise(&mut rng)).collect();
        assert!(detect(&s, &ChangePointConfig::default())
            .expect("detect")
            .is_empty());
    }

    #[test]
    fn two_nearby_steps() {
        let mut rng = SplitMix64::new(3);
        let s: Vec<f64> = (0..90)
            .map(|i| match i {
                0..30 => 100.0,
                30..45 => 110.0,
                _ => 95.0,
            } + 0.5 * noise(&mut rng))
            .collect();
        let idx: Vec<usize> = detect(&s, &ChangePointConfig::default())
            .expect("detect")
            .iter()
            .map(|c| c.index)
            .collect();
        assert_eq!(idx, [30, 45]);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(detect(&[1.0, f64::NAN], &ChangePointConfig::default()).is_err());
        let bad = ChangePointConfig {
            window: 2,
            ..Default::default()
        };
        assert!(detect(&[1.0; 10], &bad).is_err());
    }
}
