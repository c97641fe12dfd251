//! The comparison plot of one metric: every run of the base and the head as
//! a dot on the metric's axis (base ○, head ▲), each side's median, quartile
//! box and min–max whiskers, and below them the head/base median ratio with
//! its bootstrap confidence interval against the line of no change.
//!
//! The numbers come from `kbot_core::stats` (the stored verdict's ratio and
//! CI, `describe`'s quantiles); this module and `strip` only draw them.

use super::axis::Scale;
use super::strip::{self, Row};
use super::svg::{Anchor, Paint, Shape, Svg};

const WIDTH: f64 = 680.0;
const HEIGHT: f64 = 230.0;
const LEFT: f64 = 96.0;
const RIGHT: f64 = 660.0;
const BASE_Y: f64 = 38.0;
const HEAD_Y: f64 = 86.0;
const AXIS_Y: f64 = 116.0;
const RATIO_Y: f64 = 196.0;

/// Colours as well as shapes and labels tell the sides apart.
const BASE_COLOUR: &str = "#1f5fa8";
const HEAD_COLOUR: &str = "#b35900";

/// What one metric's plot shows.
pub struct SamplesPlot<'a> {
    /// Element id (unique on the page).
    pub id: &'a str,
    pub metric: &'a str,
    /// The metric's unit, if its name says.
    pub unit: Option<&'a str>,
    pub base: &'a [f64],
    pub head: &'a [f64],
    /// `median(head) / median(base)` and its bootstrap CI at `ci_level`.
    pub ratio: Option<f64>,
    pub ratio_ci: Option<(f64, f64)>,
    pub ci_level: f64,
}

/// The SVG of `plot`.
pub fn render(plot: &SamplesPlot) -> String {
    let title = format!(
        "{}: {} base and {} head runs, one mark per run",
        plot.metric,
        plot.base.len(),
        plot.head.len()
    );
    let mut svg = Svg::new(plot.id, WIDTH, HEIGHT, &title);
    let x = Scale::covering(plot.base.iter().chain(plot.head).copied(), LEFT, RIGHT);
    let unit = plot.unit.map(|u| format!(" {u}")).unwrap_or_default();
    for (name, values, y, shape, colour) in [
        ("base", plot.base, BASE_Y, Shape::Circle, BASE_COLOUR),
        ("head", plot.head, HEAD_Y, Shape::Triangle, HEAD_COLOUR),
    ] {
        let note = format!("{} runs", values.len());
        let row = Row {
            name,
            note: &note,
            kind: name,
            y,
            shape,
            colour,
        };
        strip::row(&mut svg, &x, &row, values, &unit);
    }
    strip::value_axis(&mut svg, &x, AXIS_Y, plot.unit);
    ratio_panel(&mut svg, plot);
    svg.finish()
}

/// The ratio of the medians with its CI on a ratio axis, 1 marked.
fn ratio_panel(svg: &mut Svg, plot: &SamplesPlot) {
    let Some(ratio) = plot.ratio.filter(|r| r.is_finite()) else {
        svg.text(
            LEFT,
            RATIO_Y,
            Anchor::Start,
            "head/base median ratio: undefined (base median is 0)",
        );
        return;
    };
    let ci = plot
        .ratio_ci
        .filter(|(a, b)| a.is_finite() && b.is_finite());
    let mut span = vec![1.0, ratio];
    if let Some((a, b)) = ci {
        span.extend([a, b]);
    }
    let r = Scale::covering(span, LEFT + 250.0, RIGHT);
    let ci_text = match ci {
        Some((a, b)) => format!(
            "{:.0}% CI {}–{}",
            plot.ci_level * 100.0,
            ratio_label(a),
            ratio_label(b)
        ),
        None => String::from("no CI"),
    };
    svg.styled_text(
        LEFT - 86.0,
        RATIO_Y - 14.0,
        Anchor::Start,
        "font-weight=\"bold\"",
        "head/base median",
    );
    svg.text(
        LEFT - 86.0,
        RATIO_Y + 2.0,
        Anchor::Start,
        &format!("{} ({ci_text})", ratio_label(ratio)),
    );
    svg.line(
        r.px_lo,
        RATIO_Y + 12.0,
        r.px_hi,
        RATIO_Y + 12.0,
        Paint::line("#222", 1.0),
    );
    for t in r.ticks(4) {
        svg.line(
            r.px(t),
            RATIO_Y + 12.0,
            r.px(t),
            RATIO_Y + 16.0,
            Paint::line("#222", 1.0),
        );
        svg.text(r.px(t), RATIO_Y + 28.0, Anchor::Middle, &ratio_label(t));
    }
    svg.dashed(
        r.px(1.0),
        RATIO_Y - 20.0,
        r.px(1.0),
        RATIO_Y + 12.0,
        Paint::line("#222", 1.0),
    );
    svg.text(r.px(1.0) + 3.0, RATIO_Y - 12.0, Anchor::Start, "no change");
    if let Some((a, b)) = ci {
        svg.line(r.px(a), RATIO_Y, r.px(b), RATIO_Y, Paint::line("#222", 3.0));
        for end in [a, b] {
            svg.line(
                r.px(end),
                RATIO_Y - 6.0,
                r.px(end),
                RATIO_Y + 6.0,
                Paint::line("#222", 2.0),
            );
        }
    }
    svg.marker(
        Shape::Diamond,
        (r.px(ratio), RATIO_Y),
        5.0,
        Paint::filled("#222"),
        "ratio",
        &format!("head/base median ratio {} ({ci_text})", ratio_label(ratio)),
    );
}

/// A ratio with enough digits to tell 1.000 from 1.004.
fn ratio_label(r: f64) -> String {
    format!("{r:.3}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_mark_per_run_and_the_ratio() {
        let base = [100.0, 101.0, 99.0, 100.5];
        let head = [80.0, 81.0, 79.5, 80.2, 80.9];
        let svg = render(&SamplesPlot {
            id: "m0",
            metric: "bw_pipe.bandwidth.MB/sec",
            unit: Some("MB/s"),
            base: &base,
            head: &head,
            ratio: Some(0.8),
            ratio_ci: Some((0.79, 0.81)),
            ci_level: 0.95,
        });
        assert_eq!(svg.matches("class=\"run base\"").count(), 4);
        assert_eq!(svg.matches("class=\"run head\"").count(), 5);
        assert_eq!(svg.matches("class=\"ratio\"").count(), 1);
        assert!(svg.contains("value per run (MB/s)"), "{svg}");
        assert!(svg.contains("0.800 (95% CI 0.790–0.810)"), "{svg}");
        assert!(svg.contains("base run 1: 100 MB/s"), "{svg}");
    }

    #[test]
    fn an_undefined_ratio_says_so() {
        let svg = render(&SamplesPlot {
            id: "z",
            metric: "x.count",
            unit: None,
            base: &[0.0, 0.0],
            head: &[1.0],
            ratio: Some(f64::NAN),
            ratio_ci: None,
            ci_level: 0.95,
        });
        assert!(svg.contains("undefined"), "{svg}");
        assert!(!svg.contains("NaN"), "{svg}");
    }
}
