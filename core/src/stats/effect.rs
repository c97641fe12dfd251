//! Effect sizes: the bootstrap confidence interval of the median ratio and
//! the bimodality flag.

use super::describe::{mean, median_sorted, pop_stddev, sorted};
use super::rng::{seed_from, SplitMix64};

/// Percentile-bootstrap CI of `median(head) / median(base)`: each resample
/// draws both sides with replacement. PerfCompare (Mozilla,
/// `treeherder/perf/stats.py`) uses the same percentile bootstrap of the
/// median with 1000 resamples. The generator is seeded from the data and
/// `salt`, so the interval is a pure function of its inputs.
/// Returns `None` when resampling is off, a side is empty or a base median
/// resample is 0.
pub fn median_ratio_ci(
    base: &[f64],
    head: &[f64],
    resamples: usize,
    level: f64,
    salt: u64,
) -> Option<(f64, f64)> {
    if resamples == 0 || base.is_empty() || head.is_empty() {
        return None;
    }
    let mut rng = SplitMix64::new(seed_from(&[base, head], salt));
    let mut ratios = Vec::with_capacity(resamples);
    let (mut rb, mut rh) = (vec![0.0; base.len()], vec![0.0; head.len()]);
    for _ in 0..resamples {
        resample(base, &mut rb, &mut rng);
        resample(head, &mut rh, &mut rng);
        let mb = median_sorted(&rb);
        if mb == 0.0 {
            return None;
        }
        ratios.push(median_sorted(&rh) / mb);
    }
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    let pick = |q: f64| ratios[((q * resamples as f64).floor() as usize).min(resamples - 1)];
    Some((pick(tail), pick(1.0 - tail)))
}

fn resample(src: &[f64], dst: &mut [f64], rng: &mut SplitMix64) {
    for d in dst.iter_mut() {
        *d = src[rng.below(src.len())];
    }
    dst.sort_by(f64::total_cmp);
}

/// Smallest sample on which a mode count means anything: with fewer runs a
/// KDE cannot separate two modes from noise.
pub(crate) const BIMODAL_MIN_N: usize = 6;
/// Grid points for the density; enough to resolve modes one bandwidth apart.
const KDE_GRID: usize = 128;
/// A local maximum counts as a mode when it reaches this share of the
/// highest peak (PerfCompare's KDE mode counting ignores tiny bumps the same way).
const MODE_MIN_SHARE: f64 = 0.1;

/// Bimodality flag by KDE mode counting, as PerfCompare does: a Gaussian KDE
/// with Scott's bandwidth `σ·n^(-1/5)` (scipy's `gaussian_kde` default, which
/// PerfCompare uses). The normal-reference bandwidth over-smooths
/// multi-modal data, so a second mode that survives it is real.
pub fn looks_bimodal(values: &[f64]) -> bool {
    if values.len() < BIMODAL_MIN_N {
        return false;
    }
    let s = sorted(values);
    let n = s.len() as f64;
    let sd = pop_stddev(&s, mean(&s)) * (n / (n - 1.0)).sqrt();
    if sd <= 0.0 {
        return false;
    }
    let h = sd * n.powf(-0.2);
    let (lo, hi) = (s[0] - 3.0 * h, s[s.len() - 1] + 3.0 * h);
    let step = (hi - lo) / (KDE_GRID - 1) as f64;
    let density: Vec<f64> = (0..KDE_GRID)
        .map(|g| {
            let x = lo + g as f64 * step;
            s.iter().map(|v| (-0.5 * ((x - v) / h).powi(2)).exp()).sum()
        })
        .collect();
    let peak = density.iter().copied().fold(0.0, f64::max);
    let modes = density
        .windows(3)
        .filter(|w| w[1] > w[0] && w[1] >= w[2] && w[1] >= MODE_MIN_SHARE * peak)
        .count();
    modes >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_brackets_the_true_ratio_and_is_reproducible() {
        let base: Vec<f64> = (0..10).map(|i| 100.0 + i as f64).collect();
        let head: Vec<f64> = base.iter().map(|x| x * 0.8).collect();
        let ci = median_ratio_ci(&base, &head, 1000, 0.95, 1).expect("ci");
        assert!(ci.0 <= 0.8 && 0.8 <= ci.1, "{ci:?}");
        assert_eq!(Some(ci), median_ratio_ci(&base, &head, 1000, 0.95, 1));
        assert_eq!(median_ratio_ci(&base, &head, 0, 0.95, 1), None);
    }

    #[test]
    fn bimodal_detection() {
        let two = [10.0, 10.1, 9.9, 10.05, 9.95, 20.0, 20.1, 19.9, 20.05, 19.95];
        assert!(looks_bimodal(&two));
        let one = [10.0, 10.1, 9.9, 10.05, 9.95, 10.2, 9.8, 10.02, 9.98, 10.0];
        assert!(!looks_bimodal(&one));
        assert!(!looks_bimodal(&[1.0, 100.0]));
    }
}
