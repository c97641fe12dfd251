//! Group-sequential significance levels for the adaptive looks.
//!
//! kbot tests a pair again after each batch of extra runs. Testing every
//! look at the full α inflates the false-alarm rate (Armitage, McPherson &
//! Rowe, JRSS A 1969); splitting α evenly (Bonferroni) keeps it but leaves
//! every look weak, so a 5-run pair could never be decided. Instead α is
//! *spent* along the looks with the power family `α·t^ρ` of Kim & DeMets
//! (Biometrika 1987; ρ = 1 is close to Pocock's boundary, ρ = 3 to
//! O'Brien & Fleming's), and each look's nominal level is the exact one for
//! that spending under the usual Brownian-motion model of accumulating runs
//! (Jennison & Turnbull, *Group Sequential Methods*, 2000, ch. 7 and 19):
//! the looks' test statistics are strongly correlated, so the later looks
//! get nearly all of α back.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::special::normal_sf;

/// Grid points across the continuation region of one look; the densities
/// are smooth, so Simpson's rule on 161 points is accurate to ~1e-7.
const GRID: usize = 161;
/// Bisection steps for a boundary: the bracket [0, 40] shrinks below 1e-10.
const BISECT_STEPS: usize = 60;

/// Cumulative α spent by information fraction `t` ∈ [0, 1].
pub fn spent(alpha: f64, rho: f64, t: f64) -> f64 {
    alpha * t.clamp(0.0, 1.0).powf(rho)
}

/// Nominal two-sided p-value levels, one per look at the given information
/// fractions (increasing, the last normally 1), for the spending function
/// `α·t^ρ`. A look whose increment is nothing gets level 0.
pub fn nominal_levels(fractions: &[f64], alpha: f64, rho: f64) -> Vec<f64> {
    let mut levels = Vec::with_capacity(fractions.len());
    let mut prev: Option<(Vec<f64>, Vec<f64>, f64)> = None; // grid, density, t
    let mut spent_so_far = 0.0;
    for &t in fractions {
        let increment = (spent(alpha, rho, t) - spent_so_far).max(0.0);
        let b = match &prev {
            None => z_two_sided(increment) * t.sqrt(),
            Some((grid, dens, t0)) => boundary(grid, dens, t - t0, increment),
        };
        let level = if b.is_finite() {
            2.0 * normal_sf(b / t.sqrt())
        } else {
            0.0
        };
        levels.push(level);
        let next = continuation_density(prev.as_ref(), t, b.min(40.0 * t.sqrt()));
        spent_so_far += crossing(prev.as_ref(), t, b);
        prev = Some((next.0, next.1, t));
    }
    levels
}

/// The nominal levels of `fractions`, remembered: every verdict of a
/// comparison asks for the same few designs.
pub fn nominal_levels_cached(fractions: &[f64], alpha: f64, rho: f64) -> Vec<f64> {
    type Key = (Vec<u64>, u64, u64);
    static CACHE: OnceLock<Mutex<HashMap<Key, Vec<f64>>>> = OnceLock::new();
    let key: Key = (
        fractions.iter().map(|f| f.to_bits()).collect(),
        alpha.to_bits(),
        rho.to_bits(),
    );
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Ok(map) = cache.lock() {
        if let Some(v) = map.get(&key) {
            return v.clone();
        }
    }
    let levels = nominal_levels(fractions, alpha, rho);
    if let Ok(mut map) = cache.lock() {
        // Bounded: configs are few, but a caller looping over random ones
        // must not grow it forever.
        if map.len() > 1024 {
            map.clear();
        }
        map.insert(key, levels.clone());
    }
    levels
}

/// z with two-sided tail `p` (∞ for p = 0), by bisection on `normal_sf`.
fn z_two_sided(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::INFINITY;
    }
    let (mut lo, mut hi) = (0.0f64, 40.0f64);
    for _ in 0..BISECT_STEPS {
        let mid = 0.5 * (lo + hi);
        if 2.0 * normal_sf(mid) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

fn phi(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The score-scale boundary `b` (|S_t| ≥ b stops) whose first-crossing
/// probability from the previous look's sub-density is `increment`.
fn boundary(grid: &[f64], dens: &[f64], dt: f64, increment: f64) -> f64 {
    if increment <= 0.0 {
        return f64::INFINITY;
    }
    let sd = dt.sqrt();
    let cross = |b: f64| -> f64 {
        grid.iter()
            .zip(dens)
            .map(|(u, f)| f * (normal_sf((b - u) / sd) + normal_sf((b + u) / sd)))
            .sum()
    };
    let (mut lo, mut hi) = (0.0f64, 40.0f64);
    for _ in 0..BISECT_STEPS {
        let mid = 0.5 * (lo + hi);
        if cross(mid) > increment {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Probability of crossing `b` at time `t` without having stopped before.
fn crossing(prev: Option<&(Vec<f64>, Vec<f64>, f64)>, t: f64, b: f64) -> f64 {
    if !b.is_finite() {
        return 0.0;
    }
    match prev {
        None => 2.0 * normal_sf(b / t.sqrt()),
        Some((grid, dens, t0)) => {
            let sd = (t - t0).sqrt();
            grid.iter()
                .zip(dens)
                .map(|(u, f)| f * (normal_sf((b - u) / sd) + normal_sf((b + u) / sd)))
                .sum()
        }
    }
}

/// Grid on (−b, b) and the sub-density of S_t there (not stopped yet),
/// each value pre-multiplied by its Simpson weight so later sums are plain.
fn continuation_density(
    prev: Option<&(Vec<f64>, Vec<f64>, f64)>,
    t: f64,
    b: f64,
) -> (Vec<f64>, Vec<f64>) {
    let h = 2.0 * b / (GRID - 1) as f64;
    let grid: Vec<f64> = (0..GRID).map(|i| -b + i as f64 * h).collect();
    let weighted = grid
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let density = match prev {
                None => phi(s / t.sqrt()) / t.sqrt(),
                Some((g, d, t0)) => {
                    let sd = (t - t0).sqrt();
                    g.iter()
                        .zip(d)
                        .map(|(u, f)| f * phi((s - u) / sd) / sd)
                        .sum()
                }
            };
            density * simpson_weight(i, h)
        })
        .collect();
    (grid, weighted)
}

fn simpson_weight(i: usize, h: f64) -> f64 {
    let w = if i == 0 || i == GRID - 1 {
        1.0
    } else if i % 2 == 1 {
        4.0
    } else {
        2.0
    };
    w * h / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_look_gets_all_of_alpha() {
        let l = nominal_levels(&[1.0], 0.01, 2.0);
        assert!((l[0] - 0.01).abs() < 1e-6, "{l:?}");
    }

    #[test]
    fn pocock_two_looks_matches_the_table() {
        // Pocock, two equally spaced looks, α = 0.05: nominal 0.0294 each
        // (Jennison & Turnbull Table 2.1: C_P = 2.178). The power family
        // with ρ = 1 is close but not equal; the exact Pocock spending of
        // the first look is 2·Φ̄(2.178) = 0.0294, so check the recursion
        // with that increment instead: the second look's level must
        // come out at the same 0.0294.
        let alpha = 0.05;
        let first = 2.0 * normal_sf(2.178);
        let rho = (first / alpha).ln() / 0.5f64.ln();
        let l = nominal_levels(&[0.5, 1.0], alpha, rho);
        assert!((l[0] - 0.0294).abs() < 2e-4, "{l:?}");
        assert!((l[1] - 0.0294).abs() < 5e-4, "{l:?}");
    }

    #[test]
    fn correlated_looks_get_more_than_bonferroni() {
        let l = nominal_levels(&[0.3, 0.5, 0.7, 0.9, 1.0], 0.01, 3.0);
        let sum: f64 = l.iter().sum();
        assert!(sum > 0.01, "{l:?}");
        assert!(l.windows(2).all(|w| w[0] < w[1]), "{l:?}");
        assert!(l[4] > 0.006 && l[4] < 0.01, "{l:?}");
    }
}
