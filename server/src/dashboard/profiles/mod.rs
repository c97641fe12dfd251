//! The dashboard's comparison of the kernel profiles (stored by
//! `profiles`) of two sides. A side is the finished runs of an atomic job
//! at one commit: a pair's base and head, or a bisection's good end and one
//! tested commit ([`store::Side`]). Its profiles are merged (stack counts
//! summed, [`kbot_core::profile`]) and compared: the symbols whose self and
//! children shares moved most, and a differential flame graph drawn by
//! `inferno` ([`flamegraph`]), served as a static SVG (its script and event
//! handlers removed).
//!
//! The pages are in [`pages`].

pub mod pages;
pub mod store;

use kbot_core::profile::{top_movers, Mover, Profile, Share};

use crate::db::Db;
use crate::error::{Error, Result};
use store::{Side, StoredProfile};

/// Rows of each top-movers table.
pub const TOP_MOVERS: usize = 15;

/// The merged profiles of both sides of a comparison, of one event.
#[derive(Debug, Clone)]
pub struct Sides {
    /// The sampling event (`cpu-clock`).
    pub event: String,
    pub base: Profile,
    pub head: Profile,
    /// Profiled runs on each side.
    pub base_runs: usize,
    pub head_runs: usize,
}

impl Sides {
    /// Whether both sides have samples to compare.
    pub fn comparable(&self) -> bool {
        !self.base.is_empty() && !self.head.is_empty()
    }

    /// The self and children movers, largest change first.
    pub fn movers(&self) -> (Vec<Mover>, Vec<Mover>) {
        (
            top_movers(&self.base, &self.head, Share::SelfTime, TOP_MOVERS),
            top_movers(&self.base, &self.head, Share::Children, TOP_MOVERS),
        )
    }
}

/// Reads and merges both sides' profiles (off the async runtime: a side
/// may hold megabytes of stacks). Only the profiles of one event are
/// merged: the head's first one's, else the base's.
pub async fn load(db: &Db, base: &Side, head: &Side) -> Result<Sides> {
    let base = store::profiles(db, base).await?;
    let head = store::profiles(db, head).await?;
    blocking(move || merge(base, head)).await
}

fn merge(base: Vec<StoredProfile>, head: Vec<StoredProfile>) -> Result<Sides> {
    let event = head
        .first()
        .or(base.first())
        .map(|p| p.event.clone())
        .unwrap_or_default();
    let side = |profiles: &[StoredProfile]| -> Result<(Profile, usize)> {
        let of_event: Vec<&str> = profiles
            .iter()
            .filter(|p| p.event == event)
            .map(|p| p.folded.as_str())
            .collect();
        // Stored profiles passed the upload's check: a bad one is a fault
        // of the store, not of the request.
        let merged = Profile::merged(of_event.iter().copied())
            .map_err(|e| Error::Other(anyhow::anyhow!("a stored profile: {e}")))?;
        Ok((merged, of_event.len()))
    };
    let (base, base_runs) = side(&base)?;
    let (head, head_runs) = side(&head)?;
    Ok(Sides {
        event,
        base,
        head,
        base_runs,
        head_runs,
    })
}

/// Runs `work` on the blocking pool.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| anyhow::anyhow!("profile task failed: {e}"))?
}

/// The differential flame graph of `sides` as a static SVG: the head's
/// stacks, each frame coloured by how its share changed against the base
/// (red grew, blue shrank; the base scaled to the head's sample count).
/// CPU-bound: call it through [`blocking`].
pub fn flamegraph(sides: &Sides, title: &str) -> Result<String> {
    let mut diff = Vec::new();
    let options = inferno::differential::Options {
        normalize: true,
        ..Default::default()
    };
    inferno::differential::from_readers(
        options,
        xml_safe(&sides.base.folded()).as_bytes(),
        xml_safe(&sides.head.folded()).as_bytes(),
        &mut diff,
    )?;
    let diff = String::from_utf8_lossy(&diff);
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    options.subtitle = Some(format!(
        "{}: widths are the head's samples; red grew, blue shrank against the base",
        sides.event
    ));
    options.count_name = "samples".to_owned();
    options.image_width = Some(FLAMEGRAPH_WIDTH);
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, diff.lines(), &mut svg)?;
    Ok(static_svg(&String::from_utf8_lossy(&svg)))
}

/// Folded stacks whose frame names hold only characters XML allows:
/// quick-xml escapes markup but passes control characters through, and one
/// would make the SVG unreadable. Each is replaced by U+FFFD; the line
/// breaks between stacks stay.
fn xml_safe(folded: &str) -> String {
    folded
        .chars()
        .map(|c| {
            let forbidden = (c.is_control() && c != '\n') || matches!(c, '\u{FFFE}' | '\u{FFFF}');
            if forbidden {
                char::REPLACEMENT_CHARACTER
            } else {
                c
            }
        })
        .collect()
}

/// Pixels: the page scales it down to fit.
const FLAMEGRAPH_WIDTH: usize = 1200;

/// `svg` without its scripts and `on...` handlers, and without the
/// controls only those served (search, zoom reset): nothing in it runs,
/// wherever it is opened; each frame keeps its `<title>`, which a browser
/// shows on hover.
fn static_svg(svg: &str) -> String {
    let mut out = svg.to_owned();
    while let Some(start) = out.find("<script") {
        let Some(len) = out[start..].find("</script>") else {
            out.truncate(start);
            break;
        };
        out.replace_range(start..start + len + "</script>".len(), "");
    }
    for control in ["unzoom", "search", "matched"] {
        let opening = format!("<text id=\"{control}\"");
        if let Some(start) = out.find(&opening) {
            if let Some(len) = out[start..].find("</text>") {
                out.replace_range(start..start + len + "</text>".len(), "");
            }
        }
    }
    strip_handlers(&out)
}

/// `text` without any ` onNAME="..."` attribute.
fn strip_handlers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" on") {
        let (before, tail) = rest.split_at(at);
        out.push_str(before);
        let name_len = tail[3..]
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(tail.len() - 3);
        let after_name = &tail[3 + name_len..];
        match after_name.strip_prefix("=\"").and_then(|v| v.find('"')) {
            Some(end) if name_len > 0 => rest = &after_name[2 + end + 1..],
            _ => {
                out.push_str(" on");
                rest = &tail[3..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sides(base: &str, head: &str) -> Sides {
        Sides {
            event: "cpu-clock".into(),
            base: Profile::merged([base]).expect("base"),
            head: Profile::merged([head]).expect("head"),
            base_runs: 1,
            head_runs: 1,
        }
    }

    #[test]
    fn the_flame_graph_is_static_svg_naming_the_frames() {
        let s = sides(
            "main;sys_read;pipe_read 10\nmain;schedule 30\n",
            "main;sys_read;pipe_read 40\nmain;schedule 10\n",
        );
        let svg = flamegraph(&s, "base against head").expect("svg");
        assert!(svg.starts_with("<?xml"), "{svg:.200}");
        assert!(svg.contains("<svg"), "{svg:.200}");
        assert!(svg.contains("pipe_read"));
        assert!(svg.contains("base against head"));
        assert!(!svg.contains("<script"), "a script is left");
        assert!(!svg.contains("onload="), "a handler is left");
        assert!(!svg.contains("id=\"unzoom\""), "a dead control is left");
        assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
    }

    #[test]
    fn handlers_are_stripped_and_other_text_kept() {
        let text = r#"<svg onload="init(evt)" x="1"><g onmouseover="s(this)"><title>on top, only 3 onions</title></g></svg>"#;
        assert_eq!(
            strip_handlers(text),
            r#"<svg x="1"><g><title>on top, only 3 onions</title></g></svg>"#
        );
    }
}
