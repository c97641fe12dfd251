//! The bisections' dashboard pages: the list, and one bisection with the
//! path through its range.

use askama::Template;
use axum::extract::{Path, State};

use crate::access::Reader;
use crate::state::AppState;
use crate::time::format_time;
use crate::web::plots::{
    self,
    bisection::{BisectionPlot, PathRow},
};
use crate::web::{render, short_sha, PageResult, MEDIUM_SHA};
use kbot_api::bisections::{BisectionDetail, BisectionView, StepView};

#[derive(Template)]
#[template(path = "bisections.html")]
struct ListPage {
    bisections: Vec<Row>,
}

#[derive(Template)]
#[template(path = "bisection.html")]
struct ShowPage {
    b: Row,
    reason: String,
    remaining: Vec<String>,
    steps: Vec<StepRow>,
    /// The inline SVG of the samples at the ends and at each step.
    plot: String,
}

/// A bisection as a row of text.
struct Row {
    id: i64,
    state: String,
    repo: String,
    good: String,
    bad: String,
    metric: String,
    job: String,
    tbox_group: String,
    first_bad: String,
    /// The first bad commit's page.
    first_bad_href: String,
    first_bad_author: String,
    /// The report's Message-ID, for a reader who may see it.
    report: String,
    /// A report exists that this reader may not see yet (not sent).
    report_waiting: bool,
    origin: i64,
    probe: String,
    verify: String,
    steps: u32,
    builds: u32,
    runs: u32,
    wall: String,
    created: String,
}

impl From<&BisectionView> for Row {
    fn from(b: &BisectionView) -> Row {
        Row {
            id: b.id,
            state: b.state.to_string(),
            repo: b.repo.clone(),
            good: short(&b.good),
            bad: short(&b.bad),
            metric: b.metric.clone(),
            job: b.job_name.clone(),
            tbox_group: b.tbox_group.clone(),
            first_bad: b
                .first_bad
                .as_ref()
                .map(|c| format!("{} {}", short(&c.sha), c.subject))
                .unwrap_or_default(),
            first_bad_href: b
                .first_bad
                .as_ref()
                .map(|c| crate::repos::pages::commit_href(&b.repo, &c.sha))
                .unwrap_or_default(),
            first_bad_author: b
                .first_bad
                .as_ref()
                .map(|c| format!("{} <{}>", c.author_name, c.author_email))
                .unwrap_or_default(),
            report: b.report.clone().unwrap_or_default(),
            report_waiting: b.report_id.is_some() && b.report.is_none(),
            origin: b.origin_submission,
            probe: b
                .probe_submission
                .map(|p| p.to_string())
                .unwrap_or_default(),
            verify: b
                .verify_submission
                .map(|v| v.to_string())
                .unwrap_or_default(),
            steps: b.steps,
            builds: b.builds,
            runs: b.runs,
            wall: format!("{}m{:02}s", b.wall_secs / 60, b.wall_secs % 60),
            created: format_time(b.created_at),
        }
    }
}

struct StepRow {
    index: u32,
    sha: String,
    subject: String,
    state: String,
    runs: u32,
    failed: u32,
    failure: String,
    change: String,
    detail: String,
}

impl From<&StepView> for StepRow {
    fn from(s: &StepView) -> StepRow {
        StepRow {
            index: s.index,
            sha: short(&s.sha),
            subject: s.subject.clone(),
            state: s.state.to_string(),
            runs: s.runs,
            failed: s.failed_runs,
            failure: s.failure.clone().unwrap_or_default(),
            change: s
                .change_percent
                .map(|c| format!("{c:+.1}%"))
                .unwrap_or_default(),
            detail: s.detail.clone(),
        }
    }
}

fn short(sha: &str) -> String {
    short_sha(sha, MEDIUM_SHA)
}

/// `GET /bisections`.
pub async fn list(State(state): State<AppState>, reader: Reader) -> PageResult {
    let list = super::views::list(&state, 200, reader).await?;
    render(&ListPage {
        bisections: list.iter().map(Row::from).collect(),
    })
}

/// `GET /bisections/{id}`.
pub async fn show(
    State(state): State<AppState>,
    reader: Reader,
    Path(id): Path<i64>,
) -> PageResult {
    let d = super::views::detail(&state, id, reader).await?;
    render(&ShowPage {
        b: Row::from(&d.bisection),
        reason: d.bisection.reason.clone().unwrap_or_default(),
        remaining: d.bisection.remaining.iter().map(|s| short(s)).collect(),
        steps: d.steps.iter().map(StepRow::from).collect(),
        plot: path_plot(&d),
    })
}

/// The samples of the bisected metric along the path through the range.
fn path_plot(d: &BisectionDetail) -> String {
    let b = &d.bisection;
    let mut rows = vec![PathRow {
        name: "good end".into(),
        sha: &b.good,
        verdict: "good",
        values: &d.good_samples,
    }];
    rows.extend(d.steps.iter().map(|s| PathRow {
        name: format!("step {}", s.index),
        sha: &s.sha,
        verdict: s.state.as_str(),
        values: &s.samples,
    }));
    rows.push(PathRow {
        name: "bad end".into(),
        sha: &b.bad,
        verdict: "bad",
        values: &d.bad_samples,
    });
    plots::bisection::render(&BisectionPlot {
        id: "path-plot",
        metric: &b.metric,
        unit: kbot_core::metrics::unit(&b.metric),
        rows: &rows,
    })
}
