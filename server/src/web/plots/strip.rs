//! A strip of runs: one row per group of runs on a shared value axis, each
//! row with its min–max whiskers, quartile box, median tick and one mark per
//! run. The comparison plot (base and head) and the bisection plot (the
//! range's ends and each tested commit) are made of these rows.

use kbot_core::stats::describe::{quantile_sorted, sorted};

use super::axis::{label, Scale};
use super::svg::{Anchor, Paint, Shape, Svg};

const GREY: &str = "#888";

/// How one row is drawn and named.
pub struct Row<'a> {
    /// The bold label left of the row; tooltips start with it.
    pub name: &'a str,
    /// The line under the name.
    pub note: &'a str,
    /// The marks' class (`run <kind>`), which pages and tests count.
    pub kind: &'a str,
    pub y: f64,
    pub shape: Shape,
    pub colour: &'static str,
}

/// One row at `row.y`; labels end just left of the scale's pixel range.
pub fn row(svg: &mut Svg, x: &Scale, row: &Row, values: &[f64], unit: &str) {
    let (name, y, colour) = (row.name, row.y, row.colour);
    let left = x.px_lo;
    svg.styled_text(
        left - 10.0,
        y - 4.0,
        Anchor::End,
        "font-weight=\"bold\"",
        name,
    );
    svg.text(left - 10.0, y + 11.0, Anchor::End, row.note);
    if values.is_empty() {
        svg.text(left + 4.0, y + 4.0, Anchor::Start, "no finished run");
        return;
    }
    let s = sorted(values);
    let (q1, median, q3) = (
        quantile_sorted(&s, 0.25),
        quantile_sorted(&s, 0.5),
        quantile_sorted(&s, 0.75),
    );
    let (lo, hi) = (s[0], s[s.len() - 1]);
    svg.line(x.px(lo), y, x.px(hi), y, Paint::line(GREY, 1.0));
    for end in [lo, hi] {
        svg.line(
            x.px(end),
            y - 6.0,
            x.px(end),
            y + 6.0,
            Paint::line(GREY, 1.0),
        );
    }
    let boxed = Paint {
        fill: colour,
        stroke: colour,
        stroke_width: 1.0,
    };
    svg.rect(x.px(q1), y - 9.0, x.px(q3) - x.px(q1), 18.0, boxed, 0.12);
    let tip = format!("{name} median {}{unit}", label(median));
    let at = x.px(median);
    svg.labelled_line(
        (at, y - 13.0),
        (at, y + 13.0),
        Paint::line(colour, 3.0),
        "median",
        &tip,
    );
    let paint = match row.shape {
        Shape::Circle => Paint::hollow(colour),
        _ => Paint::filled(colour),
    };
    for (i, v) in values.iter().enumerate() {
        // Runs with close values spread over the row instead of hiding
        // behind each other; the offset depends only on the run's index.
        let jitter = [0.0, -5.0, 5.0, -2.5, 2.5][i % 5];
        let tip = format!("{name} run {}: {}{unit}", i + 1, label(*v));
        svg.marker(
            row.shape,
            (x.px(*v), y + jitter),
            4.0,
            paint,
            &format!("run {}", row.kind),
            &tip,
        );
    }
}

/// The value axis at `y` with its ticks and title.
pub fn value_axis(svg: &mut Svg, x: &Scale, y: f64, unit: Option<&str>) {
    svg.line(x.px_lo, y, x.px_hi, y, Paint::line("#222", 1.0));
    for t in x.ticks(6) {
        svg.line(x.px(t), y, x.px(t), y + 5.0, Paint::line("#222", 1.0));
        svg.text(x.px(t), y + 18.0, Anchor::Middle, &label(t));
    }
    let title = match unit {
        Some(u) => format!("value per run ({u})"),
        None => String::from("value per run"),
    };
    svg.text((x.px_lo + x.px_hi) / 2.0, y + 34.0, Anchor::Middle, &title);
}
