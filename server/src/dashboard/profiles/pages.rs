//! The profile comparison pages and their flame graphs:
//! - `GET /submissions/{id}/jobs/{position}/profile` (and `/profile.svg`):
//!   a pair's base against its head;
//! - `GET /bisections/{id}/steps/{index}/profile` (and `/profile.svg`): a
//!   bisection's good end against the commit a step tested.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use kbot_core::profile::Mover;

use super::store::{self, Comparison};
use crate::error::{error_page, HtmlError};
use crate::repos::StoredCommit;
use crate::state::AppState;
use crate::web::{render, short_sha, PageResult, MEDIUM_SHA};

#[derive(Template)]
#[template(path = "profile.html")]
struct ProfilePage {
    heading: String,
    /// Where the compared runs come from: (link, text).
    back: (String, String),
    job: String,
    base_name: &'static str,
    head_name: &'static str,
    base: SideRow,
    head: SideRow,
    event: String,
    comparable: bool,
    /// Runs of the pair still queued or under way.
    pending: i64,
    /// Self, then children.
    tables: Vec<MoverTable>,
    svg: String,
}

/// One top-movers table.
struct MoverTable {
    id: &'static str,
    what: &'static str,
    rows: Vec<MoverRow>,
}

struct SideRow {
    sha: String,
    subject: String,
    runs: usize,
    samples: u64,
}

struct MoverRow {
    symbol: String,
    base: String,
    head: String,
    change: String,
    /// `grew` or `shrank`, for the cell's colour.
    class: &'static str,
}

impl From<&Mover> for MoverRow {
    fn from(m: &Mover) -> MoverRow {
        MoverRow {
            symbol: m.symbol.clone(),
            base: format!("{:.2}", m.base_pct),
            head: format!("{:.2}", m.head_pct),
            change: format!("{:+.2}", m.change()),
            class: if m.change() > 0.0 { "grew" } else { "shrank" },
        }
    }
}

/// Which comparison a page shows, and how it names its sides.
struct Subject {
    heading: String,
    back: (String, String),
    base_name: &'static str,
    head_name: &'static str,
    path: String,
}

impl Subject {
    fn pair(id: i64, position: i64) -> Subject {
        Subject {
            heading: format!("Kernel profile of submission {id}, job {position}"),
            back: (
                format!("/submissions/{id}/compare?job={position}"),
                format!("the comparison of submission {id}"),
            ),
            base_name: "Base",
            head_name: "Head",
            path: format!("/submissions/{id}/jobs/{position}/profile"),
        }
    }

    fn step(id: i64, index: i64) -> Subject {
        Subject {
            heading: format!("Kernel profile of bisection {id}, step {index}"),
            back: (format!("/bisections/{id}"), format!("bisection {id}")),
            base_name: "Good end",
            head_name: "Tested commit",
            path: format!("/bisections/{id}/steps/{index}/profile"),
        }
    }
}

/// `GET /submissions/{id}/jobs/{position}/profile`.
pub async fn pair_page(
    State(state): State<AppState>,
    Path((id, position)): Path<(i64, i64)>,
) -> PageResult {
    let c = store::pair(&state.db, id, position).await?;
    page(&state, Subject::pair(id, position), c).await
}

/// `GET /submissions/{id}/jobs/{position}/profile.svg`.
pub async fn pair_svg(
    State(state): State<AppState>,
    Path((id, position)): Path<(i64, i64)>,
) -> Result<Response, HtmlError> {
    let c = store::pair(&state.db, id, position).await?;
    svg(&state, c).await
}

/// `GET /bisections/{id}/steps/{index}/profile`.
pub async fn step_page(
    State(state): State<AppState>,
    Path((id, index)): Path<(i64, i64)>,
) -> PageResult {
    let c = store::step(&state.db, id, index).await?;
    page(&state, Subject::step(id, index), c).await
}

/// `GET /bisections/{id}/steps/{index}/profile.svg`.
pub async fn step_svg(
    State(state): State<AppState>,
    Path((id, index)): Path<(i64, i64)>,
) -> Result<Response, HtmlError> {
    let c = store::step(&state.db, id, index).await?;
    svg(&state, c).await
}

async fn page(state: &AppState, subject: Subject, c: Comparison) -> PageResult {
    let sides = super::load(&state.db, &c.base, &c.head).await?;
    let comparable = sides.comparable();
    let pending = store::pending_runs(&state.db, &c).await?;
    let (sides, (self_movers, children_movers)) = if comparable {
        super::blocking(move || {
            let movers = sides.movers();
            Ok((sides, movers))
        })
        .await?
    } else {
        (sides, (Vec::new(), Vec::new()))
    };
    let side = |commit: &StoredCommit, runs: usize, samples: u64| SideRow {
        sha: short_sha(&commit.sha, MEDIUM_SHA),
        subject: commit.view.subject.clone(),
        runs,
        samples,
    };
    render(&ProfilePage {
        heading: subject.heading,
        back: subject.back,
        job: c.job.clone(),
        base_name: subject.base_name,
        head_name: subject.head_name,
        base: side(&c.base_commit, sides.base_runs, sides.base.total()),
        head: side(&c.head_commit, sides.head_runs, sides.head.total()),
        event: sides.event.clone(),
        comparable,
        pending,
        tables: vec![
            MoverTable {
                id: "movers-self",
                what: "Self: samples whose leaf frame is the symbol",
                rows: self_movers.iter().map(MoverRow::from).collect(),
            },
            MoverTable {
                id: "movers-children",
                what: "Children: samples whose stack holds the symbol",
                rows: children_movers.iter().map(MoverRow::from).collect(),
            },
        ],
        svg: format!("{}.svg", subject.path),
    })
}

/// The flame graph's `Content-Security-Policy`: its own inline styles, and
/// no script, image, font or frame from anywhere.
const SVG_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'";

/// The differential flame graph, or a 404 page when a side has no profile.
async fn svg(state: &AppState, c: Comparison) -> Result<Response, HtmlError> {
    let sides = super::load(&state.db, &c.base, &c.head).await?;
    if !sides.comparable() {
        return Ok(error_page(
            StatusCode::NOT_FOUND,
            "no profile was taken for these runs (both sides need one)",
        ));
    }
    let title = format!(
        "{}: {} against {}",
        c.job,
        short_sha(&c.base_commit.sha, MEDIUM_SHA),
        short_sha(&c.head_commit.sha, MEDIUM_SHA)
    );
    let started = std::time::Instant::now();
    let svg = super::blocking(move || super::flamegraph(&sides, &title)).await?;
    tracing::debug!(
        bytes = svg.len(),
        ms = started.elapsed().as_millis() as u64,
        "flame graph drawn"
    );
    Ok((
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            // Frame names are the guest's, so the attacker's: should an
            // escape ever fail, nothing in the SVG may run or load.
            (header::CONTENT_SECURITY_POLICY, SVG_CSP),
            (header::CONTENT_DISPOSITION, "inline"),
        ],
        svg,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mover_row_prints_points_with_a_sign() {
        let grew = MoverRow::from(&Mover {
            symbol: "pipe_read".into(),
            base_pct: 20.0,
            head_pct: 38.461,
        });
        assert_eq!(
            (grew.base.as_str(), grew.head.as_str(), grew.change.as_str()),
            ("20.00", "38.46", "+18.46")
        );
        assert_eq!(grew.class, "grew");
        let shrank = MoverRow::from(&Mover {
            symbol: "schedule".into(),
            base_pct: 20.0,
            head_pct: 7.5,
        });
        assert_eq!((shrank.change.as_str(), shrank.class), ("-12.50", "shrank"));
    }
}
