//! Two-sample rank tests: Mann-Whitney U (exact up to 50 runs a side without
//! ties, up to 25 with them, the normal approximation with tie and
//! continuity correction beyond) and Kolmogorov-Smirnov (exact up to n·m = 5·10⁷, the
//! Kolmogorov limit beyond), and Cliff's delta.
//!
//! Pinpoint takes the smaller p-value of the two because they cover each
//! other's blind spots: MWU sees location shifts, KS sees changes of shape
//! (Catapult's Pinpoint, `pinpoint/models/compare/compare.py`).

/// Largest side for the exact MWU distribution; beyond it the normal
/// approximation is accurate to well under 1e-3 (Mann & Whitney 1947 show
/// convergence from n ≈ 8; scipy switches at 8 with ties).
const MWU_EXACT_MAX: usize = 50;
/// Largest side for the exact distribution under ties (the permutation
/// distribution of the midrank sum). At 4-10 runs a side the normal
/// approximation with tie correction gave p-values up to 2.5 times too
/// small; the exact count costs O(groups · n · N²) and stays well under a
/// millisecond at this size.
const MWU_EXACT_TIES_MAX: usize = 25;
/// Largest `n·m` for the exact KS computation (O(n·m) steps, a few tenths
/// of a second at the cap); beyond it the Kolmogorov limit, whose error at
/// such sizes is far below any decision threshold.
const KS_EXACT_MAX_CELLS: usize = 50_000_000;

/// Two-sided Mann-Whitney U p-value. Exact at small sizes: without ties by
/// Gaussian-binomial counting, with ties by the permutation distribution of
/// the midrank sum given the tie pattern (the conditional test, as scipy's
/// `mannwhitneyu(method="exact")` would be were it defined with ties);
/// beyond, the normal approximation with tie and continuity correction (as
/// scipy's `method="asymptotic"`).
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 {
        return 1.0;
    }
    let (u, ties) = u_statistic(a, b);
    if !ties && n.max(m) <= MWU_EXACT_MAX {
        let u_low = u.min((n * m) as f64 - u).floor() as usize;
        return (2.0 * exact_u_cdf(n, m, u_low)).min(1.0);
    }
    if n.max(m) <= MWU_EXACT_TIES_MAX {
        return exact_tied_p(a, b);
    }
    let (nf, mf) = (n as f64, m as f64);
    let mu = nf * mf / 2.0;
    let tie_term = tie_correction(a, b);
    let total = nf + mf;
    let var = nf * mf / 12.0 * ((total + 1.0) - tie_term / (total * (total - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mu).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * super::special::normal_sf(z)).min(1.0)
}

/// Exact two-sided p of the rank-sum of `a` given the pooled sample's tie
/// groups: every choice of `a.len()` of the pooled values is equally likely
/// under H0, so the distribution of the doubled midrank sum (an integer) is
/// counted group by group (choose j of a group of t: C(t, j) ways, adding
/// j times its doubled midrank). p = 2·min(P(S ≤ s), P(S ≥ s)), capped at 1.
fn exact_tied_p(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len();
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&y| (y, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    // (size, doubled midrank) of each tie group, and the observed doubled sum.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut observed = 0usize;
    let mut i = 0;
    while i < pooled.len() {
        let j = i + pooled[i..]
            .iter()
            .take_while(|v| v.0 == pooled[i].0)
            .count();
        // Ranks i+1..=j: their doubled mean is i + 1 + j.
        let rank2 = i + 1 + j;
        observed += rank2 * pooled[i..j].iter().filter(|v| v.1).count();
        groups.push((j - i, rank2));
        i = j;
    }
    let max_sum = 2 * pooled.len() * n;
    // ways[k][s]: choices of k values so far whose doubled rank sum is s.
    let mut ways = vec![vec![0.0f64; max_sum + 1]; n + 1];
    ways[0][0] = 1.0;
    for &(t, rank2) in &groups {
        let mut next = vec![vec![0.0f64; max_sum + 1]; n + 1];
        for (k, row) in ways.iter().enumerate() {
            for (s, &w) in row.iter().enumerate().filter(|(_, w)| **w != 0.0) {
                for j in 0..=t.min(n - k) {
                    next[k + j][s + j * rank2] += w * binomial(t, j);
                }
            }
        }
        ways = next;
    }
    let dist = &ways[n];
    let total: f64 = dist.iter().sum();
    let below: f64 = dist[..=observed].iter().sum();
    let above: f64 = dist[observed..].iter().sum();
    (2.0 * below.min(above) / total).min(1.0)
}

/// `U` of `a` (count of pairs with a > b, ties counting ½) and whether any
/// tie between or within the samples exists.
fn u_statistic(a: &[f64], b: &[f64]) -> (f64, bool) {
    let mut u = 0.0;
    let mut ties = false;
    for x in a {
        for y in b {
            if x > y {
                u += 1.0;
            } else if x == y {
                u += 0.5;
                ties = true;
            }
        }
    }
    let mut all: Vec<f64> = a.iter().chain(b).copied().collect();
    all.sort_by(f64::total_cmp);
    ties |= all.windows(2).any(|w| w[0] == w[1]);
    (u, ties)
}

/// Σ (t³ − t) over tie groups of the pooled sample.
fn tie_correction(a: &[f64], b: &[f64]) -> f64 {
    let mut all: Vec<f64> = a.iter().chain(b).copied().collect();
    all.sort_by(f64::total_cmp);
    let mut sum = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j < all.len() && all[j] == all[i] {
            j += 1;
        }
        let t = (j - i) as f64;
        sum += t * t * t - t;
        i = j;
    }
    sum
}

/// `P(U ≤ k)` under H0 without ties: the coefficients of the Gaussian
/// binomial `[n+m choose n]_q = Π_{i=1..n} (1 − q^{m+i}) / (1 − q^i)`,
/// truncated at degree k, divided by C(n+m, n).
fn exact_u_cdf(n: usize, m: usize, k: usize) -> f64 {
    exact_u_cdf_table(n, m, k)[k]
}

/// `P(U ≤ j)` for every j in 0..=k, from one polynomial product.
fn exact_u_cdf_table(n: usize, m: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0.0f64; k + 1];
    c[0] = 1.0;
    for i in 1..=n {
        // Multiply by (1 − q^{m+i}).
        let s = m + i;
        for d in (s..=k).rev() {
            c[d] -= c[d - s];
        }
        // Divide by (1 − q^i): a running sum with stride i.
        for d in i..=k {
            c[d] += c[d - i];
        }
    }
    let total = binomial(n + m, n);
    let mut acc = 0.0;
    c.iter()
        .map(|x| {
            acc += x;
            acc / total
        })
        .collect()
}

/// Distribution-free confidence interval for the shift of `b` over `a`
/// (Moses 1953, the interval that inverts Mann-Whitney): the order
/// statistics of the n·m differences `b_j − a_i` cut at the exact
/// lower-β critical value of U, so each side misses with probability ≤ β.
/// `None` when the samples are too small for any interval at that β.
pub fn shift_ci(a: &[f64], b: &[f64], beta: f64) -> Option<(f64, f64)> {
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 || n.max(m) > MWU_EXACT_MAX {
        return None;
    }
    let nm = n * m;
    let cdf = exact_u_cdf_table(n, m, nm / 2);
    let c = cdf.iter().take_while(|&&p| p <= beta).count();
    if c == 0 {
        return None;
    }
    let mut diffs: Vec<f64> = b
        .iter()
        .flat_map(|y| a.iter().map(move |x| y - x))
        .collect();
    diffs.sort_by(f64::total_cmp);
    // U ≤ c − 1 has probability ≤ β: drop c − 1 differences on each side.
    Some((diffs[c - 1], diffs[nm - c]))
}

fn binomial(n: usize, k: usize) -> f64 {
    let k = k.min(n - k);
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Two-sided two-sample Kolmogorov-Smirnov p-value, exact up to
/// `n·m` = 5·10⁷ (e.g. 7000 runs a side): the probability that a random
/// merge order of the two samples reaches |i·m − j·n| ≥ D·n·m, summed over
/// the first step that does so (`prob_outside`), so small p-values keep
/// their relative precision. Beyond that size, the Kolmogorov limit with
/// Stephens' small-sample correction.
pub fn kolmogorov_smirnov_p(a: &[f64], b: &[f64]) -> f64 {
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 {
        return 1.0;
    }
    let d = ks_statistic_scaled(a, b);
    if n.saturating_mul(m) <= KS_EXACT_MAX_CELLS {
        return prob_outside(n, m, d).clamp(0.0, 1.0);
    }
    let en = (n * m) as f64 / (n + m) as f64;
    let dn = d as f64 / (n * m) as f64;
    let lambda = (en.sqrt() + 0.12 + 0.11 / en.sqrt()) * dn;
    super::special::kolmogorov_sf(lambda)
}

/// `D·n·m`: the largest |i·m − j·n| over the merged order, stepping past
/// equal values together so ties never create a spurious jump.
fn ks_statistic_scaled(a: &[f64], b: &[f64]) -> i64 {
    let (a, b) = (super::describe::sorted(a), super::describe::sorted(b));
    let (n, m) = (a.len() as i64, b.len() as i64);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0i64);
    while i < a.len() || j < b.len() {
        let x = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => break,
        };
        while i < a.len() && a[i] == x {
            i += 1;
        }
        while j < b.len() && b[j] == x {
            j += 1;
        }
        d = d.max((i as i64 * m - j as i64 * n).abs());
    }
    d
}

/// P(a uniformly random lattice path (0,0)→(n,m) touches |i·m − j·n| ≥ d):
/// the probability of staying inside is carried forward step by step (a
/// step from (i,j) goes to i+1 with probability (n−i)/(n+m−i−j)), and each
/// step that leaves adds its mass to the result. Only positive terms are
/// summed, so unlike 1 − P(inside) a tiny p-value is not lost to
/// cancellation, and no binomial coefficient is formed, so nothing
/// overflows at any size.
fn prob_outside(n: usize, m: usize, d: i64) -> f64 {
    if d <= 0 {
        return 1.0;
    }
    let (ni, mi) = (n as i64, m as i64);
    let inside = |i: usize, j: usize| (i as i64 * mi - j as i64 * ni).abs() < d;
    let mut out = 0.0f64;
    let mut cur = vec![0.0f64; m + 1];
    cur[0] = 1.0;
    for i in 0..=n {
        let mut next = vec![0.0f64; m + 1];
        for j in 0..=m {
            let p = cur[j];
            if p == 0.0 {
                continue;
            }
            let left = (n + m - i - j) as f64;
            if i < n {
                let q = p * (n - i) as f64 / left;
                if inside(i + 1, j) {
                    next[j] += q;
                } else {
                    out += q;
                }
            }
            if j < m {
                let q = p * (m - j) as f64 / left;
                if inside(i, j + 1) {
                    cur[j + 1] += q;
                } else {
                    out += q;
                }
            }
        }
        cur = next;
    }
    out
}

/// Cliff's delta of `b` over `a`: P(b > a) − P(b < a), in [-1, 1].
pub fn cliffs_delta(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let mut s = 0i64;
    for y in b {
        for x in a {
            s += i64::from(y > x) - i64::from(y < x);
        }
    }
    s as f64 / (a.len() * b.len()) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_mwu_complete_separation() {
        // 5 vs 5, fully separated: p = 2/C(10,5) = 2/252.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        assert!((mann_whitney_p(&a, &b) - 2.0 / 252.0).abs() < 1e-12);
        assert!((mann_whitney_p(&b, &a) - 2.0 / 252.0).abs() < 1e-12);
    }

    #[test]
    fn exact_mwu_matches_scipy() {
        // U = 8; enumerating all C(11,5) splits gives 2·P(U ≤ 8) = 0.24675…
        let a = [1.0, 2.0, 4.0, 7.0, 9.0];
        let b = [3.0, 5.0, 6.0, 8.0, 10.0, 11.0];
        assert!((mann_whitney_p(&a, &b) - 0.246_753_246_753_246_8).abs() < 1e-9);
    }

    #[test]
    fn exact_mwu_with_ties_counts_every_split() {
        // Brute force over all C(8,4) = 70 splits of the pooled values:
        // midrank sums as likely as the observed one or further out.
        let a = [1.0, 2.0, 2.0, 3.0];
        let b = [2.0, 3.0, 3.0, 4.0];
        let pooled: Vec<f64> = a.iter().chain(&b).copied().collect();
        let midrank = |x: f64| {
            let below = pooled.iter().filter(|&&y| y < x).count() as f64;
            let equal = pooled.iter().filter(|&&y| y == x).count() as f64;
            below + (equal + 1.0) / 2.0
        };
        let sum_of = |idx: &[usize]| idx.iter().map(|&i| midrank(pooled[i])).sum::<f64>();
        let observed = sum_of(&[0, 1, 2, 3]);
        let (mut le, mut ge, mut all) = (0.0, 0.0, 0.0);
        for mask in 0u32..256 {
            if mask.count_ones() != 4 {
                continue;
            }
            let idx: Vec<usize> = (0..8).filter(|i| mask & (1 << i) != 0).collect();
            let s = sum_of(&idx);
            all += 1.0;
            le += f64::from(u8::from(s <= observed + 1e-9));
            ge += f64::from(u8::from(s >= observed - 1e-9));
        }
        let want = (2.0 * f64::min(le, ge) / all).min(1.0);
        assert!((mann_whitney_p(&a, &b) - want).abs() < 1e-12);
        // The normal approximation was about 2.5 times too small on a
        // fully separated tied pair: 4 v 4 with each side one value.
        let p = mann_whitney_p(&[50.0; 4], &[51.0; 4]);
        assert!((p - 2.0 / 70.0).abs() < 1e-12, "{p}");
        // Without ties the exact count is unchanged.
        assert!((mann_whitney_p(&[1.0, 2.0], &[3.0, 4.0]) - 2.0 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn ks_exact_small() {
        // Complete separation 5 vs 5: D = 1, p = 2/252.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        assert!((kolmogorov_smirnov_p(&a, &b) - 2.0 / 252.0).abs() < 1e-12);
        // Identical samples: D = 0, p = 1.
        assert_eq!(kolmogorov_smirnov_p(&a, &a), 1.0);
    }

    #[test]
    fn ks_large_samples_match_an_exact_reference() {
        // References: the same merge-order statistic and an exact big-integer
        // count of the lattice paths that stay inside, (C(n+m,n) − inside) /
        // C(n+m,n) as a fraction, in Python. a = 0, 1, ..., n−1 and
        // b = shift + step·j.
        let cases = [
            (300, 300, 1.0, 30.0, 0.099_562_519_661_289_48),
            (250, 400, 0.5, 20.0, 0.021_803_861_708_540_98),
            (500, 500, 1.0, 150.0, 2.978_529_992_974_402e-20),
            (1000, 800, 1.25, -40.0, 0.432_604_935_655_110_4),
            (450, 50, 1.0, 200.0, 1.494_240_966_835_92e-8),
        ];
        for (n, m, step, shift, want) in cases {
            let a: Vec<f64> = (0..n).map(f64::from).collect();
            let b: Vec<f64> = (0..m).map(|j| f64::from(j) * step + shift).collect();
            let got = kolmogorov_smirnov_p(&a, &b);
            assert!(
                ((got - want) / want).abs() < 1e-6,
                "n={n} m={m}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn moses_interval() {
        // 5 vs 5: P(U ≤ 4) = 0.0476 ≤ 0.05 < P(U ≤ 5), so the 90% interval
        // drops 4 of the 25 differences on each side.
        let a = [0.0, 1.0, 2.0, 3.0, 4.0];
        let b = [10.0, 11.0, 12.0, 13.0, 14.0];
        let (lo, hi) = shift_ci(&a, &b, 0.05).expect("ci");
        assert!(lo > 7.0 && hi < 13.0 && lo < 10.0 && hi > 10.0, "{lo} {hi}");
        // 2 vs 2: P(U = 0) = 1/6 > 0.05, no interval.
        assert_eq!(shift_ci(&[1.0, 2.0], &[3.0, 4.0], 0.05), None);
    }

    #[test]
    fn cliffs_delta_extremes() {
        assert_eq!(cliffs_delta(&[1.0, 2.0], &[3.0, 4.0]), 1.0);
        assert_eq!(cliffs_delta(&[3.0, 4.0], &[1.0, 2.0]), -1.0);
        assert_eq!(cliffs_delta(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
    }
}
