//! The trend plot: one metric over the commits of a branch, oldest left.
//! Each commit shows its runs (small ○), their min–max range and their
//! median (●, joined by a line); change points are dashed verticals with
//! a ▲ and their step; a commit with a regression report or bisection
//! carries a ◆ that links to it.

use super::axis::{label, Scale};
use super::svg::{Anchor, Paint, Shape, Svg};

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 940.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 270.0;
/// At most this many commit labels on the x axis; the rest are skipped.
const MAX_X_LABELS: usize = 40;

const MEDIAN_COLOUR: &str = "#1f5fa8";
const CHANGE_COLOUR: &str = "#a11";
const LINK_COLOUR: &str = "#6a1b9a";
const GREY: &str = "#999";

/// One commit of the series.
pub struct TrendPoint<'a> {
    /// Short sha, the x label.
    pub label: &'a str,
    pub subject: &'a str,
    pub values: &'a [f64],
    /// The point's median (from `kbot_core::stats::describe`).
    pub median: f64,
    /// Where its ◆ leads (a report or bisection) and what that is.
    pub link: Option<(String, String)>,
}

/// A change point: the first commit of the new level.
pub struct TrendStep {
    pub index: usize,
    pub change_pct: f64,
    pub p_value: f64,
}

pub struct TrendPlot<'a> {
    pub id: &'a str,
    pub metric: &'a str,
    pub unit: Option<&'a str>,
    pub points: &'a [TrendPoint<'a>],
    pub steps: &'a [TrendStep],
}

/// The SVG of `plot`.
pub fn render(plot: &TrendPlot) -> String {
    let title = format!(
        "{} over {} commits, oldest left; {} change points",
        plot.metric,
        plot.points.len(),
        plot.steps.len()
    );
    let mut svg = Svg::new(plot.id, WIDTH, HEIGHT, &title);
    let count = plot.points.len().max(1);
    let gap = (RIGHT - LEFT) / count as f64;
    let x = |i: usize| LEFT + gap * (i as f64 + 0.5);
    let y = Scale::covering(
        plot.points.iter().flat_map(|p| p.values.iter().copied()),
        BOTTOM,
        TOP,
    );
    axes(&mut svg, &y, plot.unit);
    for step in plot.steps {
        change_point(&mut svg, x(step.index) - gap / 2.0, step);
    }
    median_line(&mut svg, plot.points, &x, &y);
    for (i, p) in plot.points.iter().enumerate() {
        commit(&mut svg, x(i), &y, p, plot.unit);
    }
    x_labels(&mut svg, plot.points, &x);
    svg.finish()
}

fn axes(svg: &mut Svg, y: &Scale, unit: Option<&str>) {
    svg.line(LEFT, BOTTOM, RIGHT, BOTTOM, Paint::line("#222", 1.0));
    svg.line(LEFT, TOP, LEFT, BOTTOM, Paint::line("#222", 1.0));
    for t in y.ticks(6) {
        svg.line(LEFT - 5.0, y.px(t), LEFT, y.px(t), Paint::line("#222", 1.0));
        svg.line(LEFT, y.px(t), RIGHT, y.px(t), Paint::line("#eee", 1.0));
        svg.text(LEFT - 8.0, y.px(t) + 4.0, Anchor::End, &label(t));
    }
    let title = match unit {
        Some(u) => format!("value ({u})"),
        None => String::from("value"),
    };
    svg.vertical_text(18.0, (TOP + BOTTOM) / 2.0, &title);
    svg.text(
        (LEFT + RIGHT) / 2.0,
        HEIGHT - 6.0,
        Anchor::Middle,
        "commits, oldest left",
    );
}

fn change_point(svg: &mut Svg, at: f64, step: &TrendStep) {
    let paint = Paint::line(CHANGE_COLOUR, 1.5);
    svg.dashed(at, TOP - 8.0, at, BOTTOM, paint);
    let tip = format!(
        "change point: {:+.1}% (p = {:.1e})",
        step.change_pct, step.p_value
    );
    svg.marker(
        Shape::Triangle,
        (at, TOP - 14.0),
        5.0,
        Paint::filled(CHANGE_COLOUR),
        "changepoint",
        &tip,
    );
    svg.text(
        at + 6.0,
        TOP - 10.0,
        Anchor::Start,
        &format!("{:+.1}%", step.change_pct),
    );
}

/// The medians joined left to right: the level a reader follows.
fn median_line(svg: &mut Svg, points: &[TrendPoint], x: &impl Fn(usize) -> f64, y: &Scale) {
    for (i, pair) in points.windows(2).enumerate() {
        svg.line(
            x(i),
            y.px(pair[0].median),
            x(i + 1),
            y.px(pair[1].median),
            Paint::line(MEDIAN_COLOUR, 1.0),
        );
    }
}

fn commit(svg: &mut Svg, cx: f64, y: &Scale, p: &TrendPoint, unit: Option<&str>) {
    let unit = unit.map(|u| format!(" {u}")).unwrap_or_default();
    let (lo, hi) = p
        .values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
    if lo.is_finite() {
        svg.line(cx, y.px(lo), cx, y.px(hi), Paint::line(GREY, 1.0));
    }
    for v in p.values {
        let tip = format!("{} run: {}{unit}", p.label, label(*v));
        svg.marker(
            Shape::Circle,
            (cx, y.px(*v)),
            2.0,
            Paint::hollow(GREY),
            "run",
            &tip,
        );
    }
    let tip = format!(
        "{} {}: median {}{unit} of {} runs (range {}–{})",
        p.label,
        p.subject,
        label(p.median),
        p.values.len(),
        label(lo),
        label(hi)
    );
    svg.marker(
        Shape::Circle,
        (cx, y.px(p.median)),
        3.5,
        Paint::filled(MEDIAN_COLOUR),
        "median",
        &tip,
    );
    if let Some((href, what)) = &p.link {
        svg.open_link(href);
        svg.marker(
            Shape::Diamond,
            (cx, y.px(hi) - 12.0),
            5.0,
            Paint::filled(LINK_COLOUR),
            "linked",
            &format!("{}: {what}", p.label),
        );
        svg.close_link();
    }
}

fn x_labels(svg: &mut Svg, points: &[TrendPoint], x: &impl Fn(usize) -> f64) {
    let every = points.len().div_ceil(MAX_X_LABELS).max(1);
    for (i, p) in points.iter().enumerate().step_by(every) {
        svg.line(x(i), BOTTOM, x(i), BOTTOM + 4.0, Paint::line("#222", 1.0));
        let (lx, ly) = (x(i), BOTTOM + 12.0);
        svg.rotated_text(lx, ly, p.label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_steps_and_links() {
        let values: Vec<Vec<f64>> = (0..12)
            .map(|i| {
                let level = if i < 6 { 100.0 } else { 80.0 };
                vec![level - 1.0, level, level + 1.0]
            })
            .collect();
        let labels: Vec<String> = (0..12).map(|i| format!("c{i:02}")).collect();
        let points: Vec<TrendPoint> = values
            .iter()
            .zip(&labels)
            .enumerate()
            .map(|(i, (v, l))| TrendPoint {
                label: l,
                subject: "<b>subject</b>",
                values: v,
                median: v[1],
                link: (i == 6).then(|| ("/bisections/1".to_owned(), "bisection 1".to_owned())),
            })
            .collect();
        let steps = [TrendStep {
            index: 6,
            change_pct: -20.0,
            p_value: 1e-6,
        }];
        let svg = render(&TrendPlot {
            id: "trend",
            metric: "bw_pipe.bandwidth.MB/sec",
            unit: Some("MB/s"),
            points: &points,
            steps: &steps,
        });
        assert_eq!(svg.matches("class=\"median\"").count(), 12);
        assert_eq!(svg.matches("class=\"run\"").count(), 36);
        assert_eq!(svg.matches("class=\"changepoint\"").count(), 1);
        assert_eq!(svg.matches("<a href=\"/bisections/1\">").count(), 1);
        assert!(
            svg.contains("-20.0%") && svg.contains("value (MB/s)"),
            "{svg}"
        );
        assert!(!svg.contains("<b>"), "{svg}");
    }
}
