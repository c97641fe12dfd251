//! The bisection plot: the bisected metric at the good end, at each tested
//! commit in the order the robot tested them, and at the bad end, one row
//! each on a shared value axis. Dashed verticals mark the two ends' medians,
//! so a reader sees which end each step's runs sit next to (what its
//! verdict says) and how far apart the ends are against the noise.
//!
//! Verdicts are told apart by shape and by the row's label, not by colour
//! alone: good ○, bad ▲, anything else (skip, undecided, testing) ■.

use kbot_core::stats::describe::{quantile_sorted, sorted};

use super::axis::{label, Scale};
use super::strip::{self, Row};
use super::svg::{Anchor, Paint, Shape, Svg};

const WIDTH: f64 = 760.0;
const LEFT: f64 = 200.0;
const RIGHT: f64 = 740.0;
const TOP: f64 = 48.0;
const ROW_HEIGHT: f64 = 42.0;

const GOOD_COLOUR: &str = "#1f5fa8";
const BAD_COLOUR: &str = "#b35900";
const OTHER_COLOUR: &str = "#666";

/// One row: an end of the range or a tested commit.
pub struct PathRow<'a> {
    /// `good end`, `step 3`, `bad end`.
    pub name: String,
    pub sha: &'a str,
    /// `good`, `bad`, `skip`, `undecided`, `testing` or `cancelled`.
    pub verdict: &'a str,
    pub values: &'a [f64],
}

pub struct BisectionPlot<'a> {
    pub id: &'a str,
    pub metric: &'a str,
    pub unit: Option<&'a str>,
    /// The good end first, the tested commits, the bad end last.
    pub rows: &'a [PathRow<'a>],
}

/// The SVG of `plot`.
pub fn render(plot: &BisectionPlot) -> String {
    let runs: usize = plot.rows.iter().map(|r| r.values.len()).sum();
    let title = format!(
        "{}: {} runs at {} commits, the good end first and the bad end last",
        plot.metric,
        runs,
        plot.rows.len()
    );
    let axis_y = TOP + ROW_HEIGHT * plot.rows.len() as f64;
    let mut svg = Svg::new(plot.id, WIDTH, axis_y + 44.0, &title);
    let x = Scale::covering(
        plot.rows.iter().flat_map(|r| r.values.iter().copied()),
        LEFT,
        RIGHT,
    );
    let unit = plot.unit.map(|u| format!(" {u}")).unwrap_or_default();
    let ends = [
        (plot.rows.first(), "good", GOOD_COLOUR, 0.0),
        (plot.rows.last(), "bad", BAD_COLOUR, 14.0),
    ];
    for (end, verdict, colour, above) in ends {
        if let Some(m) = end.and_then(|r| median(r.values)) {
            end_median(&mut svg, &x, (verdict, colour), m, axis_y, above, &unit);
        }
    }
    for (i, r) in plot.rows.iter().enumerate() {
        let (shape, colour) = match r.verdict {
            "good" => (Shape::Circle, GOOD_COLOUR),
            "bad" => (Shape::Triangle, BAD_COLOUR),
            _ => (Shape::Square, OTHER_COLOUR),
        };
        let short: String = r.sha.chars().take(12).collect();
        let note = format!("{short} · {} · {} runs", r.verdict, r.values.len());
        let row = Row {
            name: &r.name,
            note: &note,
            kind: r.verdict,
            y: TOP + ROW_HEIGHT * (i as f64 + 0.5),
            shape,
            colour,
        };
        strip::row(&mut svg, &x, &row, r.values, &unit);
    }
    strip::value_axis(&mut svg, &x, axis_y, plot.unit);
    svg.finish()
}

fn median(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| quantile_sorted(&sorted(values), 0.5))
}

/// A dashed vertical through every row at an end's median, labelled above
/// the rows (the second label a line higher, so the two never overlap).
fn end_median(
    svg: &mut Svg,
    x: &Scale,
    (verdict, colour): (&str, &'static str),
    m: f64,
    axis_y: f64,
    above: f64,
    unit: &str,
) {
    let at = x.px(m);
    svg.dashed(at, TOP - 6.0 - above, at, axis_y, Paint::line(colour, 1.0));
    svg.text(
        at,
        TOP - 10.0 - above,
        Anchor::Middle,
        &format!("{verdict} median {}{unit}", label(m)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_commit_and_the_ends_medians() {
        let good = [100.0, 101.0, 99.0];
        let probe = [80.0, 81.0];
        let bad = [80.5, 79.0, 80.0];
        let rows = [
            PathRow {
                name: "good end".into(),
                sha: "0123456789abcdef",
                verdict: "good",
                values: &good,
            },
            PathRow {
                name: "step 1".into(),
                sha: "fedcba9876543210",
                verdict: "bad",
                values: &probe,
            },
            PathRow {
                name: "step 2".into(),
                sha: "aaaaaaaaaaaaaaaa",
                verdict: "skip",
                values: &[],
            },
            PathRow {
                name: "bad end".into(),
                sha: "bbbbbbbbbbbbbbbb",
                verdict: "bad",
                values: &bad,
            },
        ];
        let svg = render(&BisectionPlot {
            id: "path",
            metric: "pipe.<bw>",
            unit: Some("MB/s"),
            rows: &rows,
        });
        assert_eq!(svg.matches("class=\"run good\"").count(), 3, "{svg}");
        assert_eq!(svg.matches("class=\"run bad\"").count(), 5, "{svg}");
        assert!(svg.contains("good median 100 MB/s"), "{svg}");
        assert!(svg.contains("bad median 80 MB/s"), "{svg}");
        assert!(svg.contains("step 1 run 2: 81 MB/s"), "{svg}");
        assert!(svg.contains("fedcba987654 · bad · 2 runs"), "{svg}");
        assert!(svg.contains("no finished run"), "{svg}");
        assert!(
            svg.contains("pipe.&lt;bw&gt;: 8 runs at 4 commits"),
            "{svg}"
        );
    }
}
