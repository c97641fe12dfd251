//! Welch's t-test on log values, for samples that look well behaved.
//!
//! On normal or log-normal noise the rank tests waste power at kbot's sample
//! sizes: the exact Mann-Whitney p cannot go below 2/C(10,5) = 0.0079 on
//! five runs per side however far apart the samples are, while t measures
//! how far apart they are in units of the noise. Logs make a relative change
//! additive and log-normal noise normal. The t-test is only trusted when
//! neither side shows an outlier (Grubbs' test) or only two levels (a quantised counter),
//! the cases where its normal model is plainly wrong; the rank tests keep
//! covering heavy tails and mixtures either way.

use super::describe::{mean, sample_variance};
use super::special::student_t_two_sided;

/// Grubbs' test level for the outlier gate: a normal sample trips it 1% of
/// the time, which hands that comparison to the rank tests. At 5% the seed
/// report's base sample (one slow run 1.9 sample σ below the mean, ratio
/// to the 6-run critical value 1.003) lost the t-test and with it the
/// decision on 6 runs; a t-test only gets conservative with a mild outlier.
const GRUBBS_ALPHA: f64 = 0.01;

/// Fewest distinct values per side: a side of only two levels is a
/// quantised counter, not a measurement with noise a t-test can model. A
/// few ties (values rounded by the tool) are harmless.
const MIN_DISTINCT: usize = 3;

/// Welch's t on one metric's samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Welch {
    /// `mean(ln head) − mean(ln base)` (or of the raw values, see `logs`).
    pub diff: f64,
    pub se: f64,
    /// Degrees of freedom: Welch-Satterthwaite, or n_b + n_h − 2 for equal sizes.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// √((s²_base + s²_head)/2): the noise, for the `same` margin.
    pub sd: f64,
    /// Whether the values were logged (all positive).
    pub logs: bool,
}

/// Welch's test when both samples pass the gate; `None` otherwise.
pub fn welch_if_well_behaved(base: &[f64], head: &[f64]) -> Option<Welch> {
    let logs = base.iter().chain(head).all(|&x| x > 0.0);
    let tr = |v: &[f64]| -> Vec<f64> {
        if logs {
            v.iter().map(|x| x.ln()).collect()
        } else {
            v.to_vec()
        }
    };
    let (b, h) = (tr(base), tr(head));
    if !well_behaved(&b) || !well_behaved(&h) {
        return None;
    }
    welch(&b, &h, logs)
}

fn welch(b: &[f64], h: &[f64], logs: bool) -> Option<Welch> {
    let (nb, nh) = (b.len() as f64, h.len() as f64);
    let (vb, vh) = (sample_variance(b) / nb, sample_variance(h) / nh);
    let se = (vb + vh).sqrt();
    if se.is_nan() || se <= 0.0 {
        return None;
    }
    // With equal sizes the Welch and Student statistics coincide and the
    // t-test is robust to unequal variances (Scheffé 1959 §10.4), so keep
    // Student's n_b + n_h − 2 df: Welch's approximation only loses power.
    let df = if b.len() == h.len() {
        nb + nh - 2.0
    } else {
        (vb + vh).powi(2) / (vb * vb / (nb - 1.0) + vh * vh / (nh - 1.0))
    };
    let diff = mean(h) - mean(b);
    Some(Welch {
        diff,
        se,
        df,
        p: student_t_two_sided(diff / se, df),
        sd: (0.5 * (sample_variance(b) + sample_variance(h))).sqrt(),
        logs,
    })
}

/// At least 3 values, at least `MIN_DISTINCT` distinct ones, and no Grubbs
/// outlier at `GRUBBS_ALPHA`.
pub fn well_behaved(values: &[f64]) -> bool {
    let n = values.len();
    if n < 3 {
        return false;
    }
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    let distinct = 1 + s.windows(2).filter(|w| w[0] != w[1]).count();
    if distinct < MIN_DISTINCT {
        return false;
    }
    let (m, sd) = (mean(&s), sample_variance(&s).sqrt());
    let g = s.iter().map(|x| (x - m).abs()).fold(0.0, f64::max) / sd;
    g <= grubbs_critical(n, GRUBBS_ALPHA)
}

/// Two-sided Grubbs critical value: `(n−1)/√n · √(t²/(n−2+t²))` with t the
/// upper α/(2n) point of Student's t on n−2 df (Grubbs 1969).
pub fn grubbs_critical(n: usize, alpha: f64) -> f64 {
    let nf = n as f64;
    let max = (nf - 1.0) / nf.sqrt();
    if n < 3 {
        return max;
    }
    let t = t_quantile_two_sided(alpha / nf, nf - 2.0);
    max * (t * t / (nf - 2.0 + t * t)).sqrt()
}

/// t with two-sided tail `p` on `df` degrees of freedom (bisection).
pub fn t_quantile_two_sided(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1e4f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if student_t_two_sided(mid, df) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grubbs_table_values() {
        // Grubbs' two-sided 5% critical values: n = 5 → 1.715, n = 10 → 2.290.
        assert!((grubbs_critical(5, 0.05) - 1.715).abs() < 2e-3);
        assert!((grubbs_critical(10, 0.05) - 2.290).abs() < 2e-3);
    }

    #[test]
    fn outliers_and_ties_fail_the_gate() {
        assert!(well_behaved(&[100.0, 101.0, 99.0, 100.5, 99.7]));
        assert!(!well_behaved(&[
            100.0, 101.0, 99.0, 100.5, 99.7, 100.2, 99.9, 140.0
        ]));
        assert!(!well_behaved(&[1.0, 2.0, 2.0, 1.0, 2.0]));
        assert!(well_behaved(&[1.0, 2.0, 2.0, 3.0]));
        assert!(!well_behaved(&[1.0, 2.0]));
    }

    #[test]
    fn welch_sees_a_separated_shift() {
        // The e2e pair of issue 12: base 483-615 MB/s, head 302-359 MB/s.
        let base = [483.0, 530.0, 566.0, 598.0, 615.0];
        let head = [302.0, 318.0, 331.0, 347.0, 359.0];
        let w = welch_if_well_behaved(&base, &head).expect("well behaved");
        assert!(w.logs && w.diff < 0.0 && w.p < 1e-4, "{w:?}");
    }
}
