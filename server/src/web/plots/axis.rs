//! Linear scales with "nice" ticks (1, 2, 5 × 10^k) and their labels.

/// A linear map from a value range to a pixel range.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub lo: f64,
    pub hi: f64,
    pub px_lo: f64,
    pub px_hi: f64,
}

impl Scale {
    /// A scale covering `values` with a little room on both sides; a single
    /// value (or none) gets a range around it so it is not on the edge.
    pub fn covering(values: impl IntoIterator<Item = f64>, px_lo: f64, px_hi: f64) -> Scale {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.into_iter().filter(|v| v.is_finite()) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        let span = hi - lo;
        let pad = if span > 0.0 {
            span * 0.08
        } else {
            (lo.abs() * 0.05).max(1e-9)
        };
        Scale {
            lo: lo - pad,
            hi: hi + pad,
            px_lo,
            px_hi,
        }
    }

    /// The pixel of `v`.
    pub fn px(&self, v: f64) -> f64 {
        let span = self.hi - self.lo;
        if span == 0.0 {
            return (self.px_lo + self.px_hi) / 2.0;
        }
        self.px_lo + (v - self.lo) / span * (self.px_hi - self.px_lo)
    }

    /// About `count` tick values inside the range, at a 1/2/5 step.
    pub fn ticks(&self, count: usize) -> Vec<f64> {
        let span = self.hi - self.lo;
        if span.is_nan() || span <= 0.0 || count == 0 {
            return vec![self.lo];
        }
        let raw = span / count as f64;
        let magnitude = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * magnitude)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * magnitude);
        let first = (self.lo / step).ceil() * step;
        (0..)
            .map(|i| first + f64::from(i) * step)
            .take_while(|v| *v <= self.hi + step * 1e-9)
            .take(50)
            .collect()
    }
}

/// A tick or value label: at most 4 significant digits, SI-style suffixes
/// for large magnitudes, so a tick reads `2.35k`, not `2350.000000`.
pub fn label(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = scaled.abs();
    let digits = if s == 0.0 || s >= 100.0 {
        0
    } else if s >= 10.0 {
        1
    } else if s >= 1.0 {
        2
    } else {
        // Small values: enough decimals for 3 significant digits.
        (2 - s.log10().floor() as i32).clamp(2, 8) as usize
    };
    let text = format!("{scaled:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    };
    format!("{text}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_inside() {
        let s = Scale {
            lo: 0.3,
            hi: 9.7,
            px_lo: 0.0,
            px_hi: 100.0,
        };
        assert_eq!(s.ticks(5), [2.0, 4.0, 6.0, 8.0]);
        let s = Scale {
            lo: 2301.0,
            hi: 2389.0,
            px_lo: 0.0,
            px_hi: 100.0,
        };
        let t = s.ticks(4);
        assert!(t.iter().all(|v| (2301.0..=2389.0).contains(v)), "{t:?}");
        assert_eq!(t, [2350.0]);
    }

    #[test]
    fn scales_map_and_cover() {
        let s = Scale::covering([10.0, 20.0], 0.0, 100.0);
        assert!(s.px(10.0) > 0.0 && s.px(20.0) < 100.0);
        assert!((s.px(15.0) - 50.0).abs() < 1e-9);
        // Pixel ranges may run backwards (y grows down).
        let y = Scale::covering([0.0, 1.0], 100.0, 0.0);
        assert!(y.px(1.0) < y.px(0.0));
        let one = Scale::covering([5.0], 0.0, 10.0);
        assert!(one.lo < 5.0 && one.hi > 5.0);
        let none = Scale::covering([], 0.0, 10.0);
        assert_eq!((none.lo < 0.0, none.hi > 1.0), (true, true));
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(label(2348.45), "2348");
        assert_eq!(label(23484.5), "23.5k");
        assert_eq!(label(1.5e6), "1.5M");
        assert_eq!(label(0.0123), "0.0123");
        assert_eq!(label(12.34), "12.3");
        assert_eq!(label(0.0), "0");
        assert_eq!(label(-3.5), "-3.5");
    }
}
