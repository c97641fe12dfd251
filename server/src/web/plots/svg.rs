//! A small SVG writer: the few elements the dashboard's plots draw, with
//! every text and attribute value escaped, so a metric or commit subject
//! cannot break out of the picture (or the page it is inlined in).
//!
//! Presentation is in attributes (`fill`, `stroke`), not CSS classes: the
//! plots look the same inlined in a page, opened alone or screenshotted.

use std::fmt::Write;

/// Escapes `&`, `<`, `>`, `"` and `'` for XML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // XML 1.0 forbids most control characters even escaped.
            c if c.is_control() && !matches!(c, '\n' | '\t') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// How a shape is painted.
#[derive(Debug, Clone, Copy)]
pub struct Paint {
    pub fill: &'static str,
    pub stroke: &'static str,
    pub stroke_width: f64,
}

impl Paint {
    pub const fn filled(colour: &'static str) -> Paint {
        Paint {
            fill: colour,
            stroke: colour,
            stroke_width: 1.0,
        }
    }

    pub const fn hollow(colour: &'static str) -> Paint {
        Paint {
            fill: "none",
            stroke: colour,
            stroke_width: 1.5,
        }
    }

    pub const fn line(colour: &'static str, width: f64) -> Paint {
        Paint {
            fill: "none",
            stroke: colour,
            stroke_width: width,
        }
    }
}

/// A marker shape: the plots tell series apart by shape as well as colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Circle,
    Triangle,
    Square,
    Diamond,
}

/// Text alignment on the x coordinate.
#[derive(Debug, Clone, Copy)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// An SVG document being written; [`Svg::finish`] closes it.
pub struct Svg {
    out: String,
}

/// Coordinates are written with one decimal: enough on a 1000-unit canvas,
/// and it keeps a plot of thousands of points small.
fn n(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}")
    } else {
        String::from("0")
    }
}

impl Svg {
    /// A `width`×`height` picture whose accessible name is `title`; `id`
    /// lets pages and tests find it.
    pub fn new(id: &str, width: f64, height: f64, title: &str) -> Svg {
        let mut out = String::with_capacity(4096);
        let _ = write!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{}\" class=\"plot\" \
             width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" \
             font-family=\"sans-serif\" font-size=\"12\"><title>{}</title>",
            escape(id),
            n(width),
            n(height),
            n(width),
            n(height),
            escape(title)
        );
        Svg { out }
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, paint: Paint) {
        let _ = write!(
            self.out,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"/>",
            n(x1),
            n(y1),
            n(x2),
            n(y2),
            paint.stroke,
            n(paint.stroke_width)
        );
    }

    /// A line with a class (what it marks) and hover text.
    pub fn labelled_line(
        &mut self,
        (x1, y1): (f64, f64),
        (x2, y2): (f64, f64),
        paint: Paint,
        class: &str,
        tip: &str,
    ) {
        let _ = write!(
            self.out,
            "<line class=\"{}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" \
             stroke-width=\"{}\"><title>{}</title></line>",
            escape(class),
            n(x1),
            n(y1),
            n(x2),
            n(y2),
            paint.stroke,
            n(paint.stroke_width),
            escape(tip)
        );
    }

    /// A dashed line (reference lines, change points).
    pub fn dashed(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, paint: Paint) {
        let _ = write!(
            self.out,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\" \
             stroke-dasharray=\"4 3\"/>",
            n(x1),
            n(y1),
            n(x2),
            n(y2),
            paint.stroke,
            n(paint.stroke_width)
        );
    }

    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, paint: Paint, opacity: f64) {
        let _ = write!(
            self.out,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" fill-opacity=\"{}\" \
             stroke=\"{}\" stroke-width=\"{}\"/>",
            n(x),
            n(y),
            n(w.max(0.0)),
            n(h.max(0.0)),
            paint.fill,
            n(opacity),
            paint.stroke,
            n(paint.stroke_width)
        );
    }

    /// A marker of radius `r` at (x, y); `class` names what it is (tests and
    /// pages count points by it) and `tip` is its hover text.
    pub fn marker(
        &mut self,
        shape: Shape,
        (x, y): (f64, f64),
        r: f64,
        paint: Paint,
        class: &str,
        tip: &str,
    ) {
        let style = format!(
            "class=\"{}\" fill=\"{}\" stroke=\"{}\" stroke-width=\"{}\"",
            escape(class),
            paint.fill,
            paint.stroke,
            n(paint.stroke_width)
        );
        let tip = format!("<title>{}</title>", escape(tip));
        let _ = match shape {
            Shape::Circle => write!(
                self.out,
                "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" {style}>{tip}</circle>",
                n(x),
                n(y),
                n(r)
            ),
            Shape::Square => write!(
                self.out,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" {style}>{tip}</rect>",
                n(x - r),
                n(y - r),
                n(2.0 * r),
                n(2.0 * r)
            ),
            Shape::Triangle => write!(
                self.out,
                "<polygon points=\"{},{} {},{} {},{}\" {style}>{tip}</polygon>",
                n(x),
                n(y - r * 1.2),
                n(x - r * 1.1),
                n(y + r * 0.8),
                n(x + r * 1.1),
                n(y + r * 0.8)
            ),
            Shape::Diamond => write!(
                self.out,
                "<polygon points=\"{},{} {},{} {},{} {},{}\" {style}>{tip}</polygon>",
                n(x),
                n(y - r * 1.3),
                n(x + r),
                n(y),
                n(x),
                n(y + r * 1.3),
                n(x - r),
                n(y)
            ),
        };
    }

    pub fn text(&mut self, x: f64, y: f64, anchor: Anchor, text: &str) {
        self.styled_text(x, y, anchor, "", text);
    }

    /// Text with extra presentation attributes (`font-weight="bold"`, a
    /// rotation); `attrs` is a literal of the caller's, never user input.
    pub fn styled_text(&mut self, x: f64, y: f64, anchor: Anchor, attrs: &'static str, text: &str) {
        let _ = write!(
            self.out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"{}\" fill=\"#222\" {attrs}>{}</text>",
            n(x),
            n(y),
            anchor.as_str(),
            escape(text)
        );
    }

    /// Text rotated a quarter turn counter-clockwise about (x, y): a y axis label.
    pub fn vertical_text(&mut self, x: f64, y: f64, text: &str) {
        let _ = write!(
            self.out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#222\" \
             transform=\"rotate(-90 {} {})\">{}</text>",
            n(x),
            n(y),
            n(x),
            n(y),
            escape(text)
        );
    }

    /// Text turned 45° clockwise about (x, y), hanging from it: x labels
    /// that would overlap side by side.
    pub fn rotated_text(&mut self, x: f64, y: f64, text: &str) {
        let _ = write!(
            self.out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"start\" fill=\"#222\" \
             font-family=\"monospace\" font-size=\"11\" transform=\"rotate(45 {} {})\">{}</text>",
            n(x),
            n(y),
            n(x),
            n(y),
            escape(text)
        );
    }

    /// Starts a link: everything drawn until [`Svg::close_link`] leads to `href`.
    pub fn open_link(&mut self, href: &str) {
        let _ = write!(self.out, "<a href=\"{}\">", escape(href));
    }

    pub fn close_link(&mut self) {
        self.out.push_str("</a>");
    }

    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape("<script>\"a\" & 'b'</script>"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;"
        );
        assert_eq!(escape("bell\u{7}"), "bell\u{fffd}");
    }

    #[test]
    fn hostile_text_stays_text() {
        let mut svg = Svg::new("p\"x", 100.0, 50.0, "</title><script>alert(1)</script>");
        svg.text(1.0, 2.0, Anchor::Start, "a</text><b>");
        svg.marker(
            Shape::Circle,
            (5.0, 5.0),
            2.0,
            Paint::filled("#000"),
            "dot",
            "x<y",
        );
        svg.open_link("/reports/<m>?a=1&b=\"2\"");
        svg.close_link();
        let out = svg.finish();
        assert!(!out.contains("<script>"), "{out}");
        assert!(!out.contains("<b>"), "{out}");
        assert!(out.contains("id=\"p&quot;x\""), "{out}");
        assert!(
            out.contains("href=\"/reports/&lt;m&gt;?a=1&amp;b=&quot;2&quot;\""),
            "{out}"
        );
        assert!(out.starts_with("<svg ") && out.ends_with("</svg>"));
    }

    #[test]
    fn markers_have_their_shapes_and_tips() {
        let mut svg = Svg::new("m", 100.0, 100.0, "markers");
        for (i, shape) in [
            Shape::Circle,
            Shape::Triangle,
            Shape::Square,
            Shape::Diamond,
        ]
        .into_iter()
        .enumerate()
        {
            svg.marker(
                shape,
                (10.0 * i as f64, 10.0),
                3.0,
                Paint::hollow("#123"),
                "pt",
                "tip",
            );
        }
        let out = svg.finish();
        assert_eq!(out.matches("class=\"pt\"").count(), 4);
        assert_eq!(out.matches("<polygon").count(), 2);
        assert_eq!(out.matches("<title>tip</title>").count(), 4);
        // Non-finite coordinates never reach the document.
        let mut svg = Svg::new("nan", 10.0, 10.0, "nan");
        svg.line(f64::NAN, 0.0, f64::INFINITY, 1.0, Paint::line("#000", 1.0));
        assert!(!svg.finish().contains("NaN"));
    }
}
