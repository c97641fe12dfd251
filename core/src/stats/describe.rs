//! Descriptive statistics of one side's samples.

use serde::{Deserialize, Serialize};

/// What the report shows about one side of one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of runs.
    pub n: usize,
    /// Arithmetic mean (what 0-day's table shows).
    pub mean: f64,
    /// Population standard deviation (1/N, `lib/statistics.rb`).
    pub stddev: f64,
    /// `100·σ/mean`; 0 when the mean is 0.
    pub stddev_pct: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Summary of a non-empty, finite sample (callers check both).
    pub fn of(values: &[f64]) -> Summary {
        let sorted = sorted(values);
        let n = sorted.len();
        let mean = mean(&sorted);
        let stddev = pop_stddev(&sorted, mean);
        let stddev_pct = if mean != 0.0 {
            100.0 * stddev / mean.abs()
        } else {
            0.0
        };
        Summary {
            n,
            mean,
            stddev,
            stddev_pct,
            median: median_sorted(&sorted),
            min: sorted.first().copied().unwrap_or(f64::NAN),
            max: sorted.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// A sorted copy (total order; inputs are finite).
pub fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

pub fn pop_stddev(values: &[f64], mean: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / values.len() as f64).sqrt()
}

/// Sample variance (1/(N-1)), for the t-tests.
pub fn sample_variance(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 2 {
        return 0.0;
    }
    let m = mean(values);
    values.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64
}

/// The usual median (mean of the two middle values for even N).
pub fn median_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]),
    }
}

/// Interquartile range with linear interpolation (numpy's default), used to
/// express effect sizes in IQR units as Pinpoint does.
pub fn iqr_sorted(sorted: &[f64]) -> f64 {
    quantile_sorted(sorted, 0.75) - quantile_sorted(sorted, 0.25)
}

pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    let pos = q * (n - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_uses_population_stddev() {
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.mean, 5.0);
        assert_eq!(s.stddev, 2.0);
        assert_eq!(s.stddev_pct, 40.0);
        assert_eq!(s.median, 4.5);
        assert_eq!((s.min, s.max, s.n), (2.0, 9.0, 8));
    }

    #[test]
    fn iqr_interpolates() {
        assert_eq!(iqr_sorted(&[1.0, 2.0, 3.0, 4.0, 5.0]), 2.0);
    }
}
