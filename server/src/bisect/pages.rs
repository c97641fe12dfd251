//! Dashboard pages of the robot: bisections (the path through the range)
//! and watches.

use askama::Template;
use axum::extract::{Path, State};
use axum::response::Html;

use crate::dashboard::format_time;
use crate::dashboard::plots::{
    self,
    bisection::{BisectionPlot, PathRow},
};
use crate::error::{Error, HtmlError};
use crate::state::AppState;
use kbot_api::bisections::{BisectionDetail, BisectionView, StepView};
use kbot_api::watches::WatchView;

type PageResult = Result<Html<String>, HtmlError>;

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

#[derive(Template)]
#[template(path = "watches.html")]
struct WatchesPage {
    watches: Vec<WatchRow>,
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
    first_bad_author: String,
    report: String,
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
            state: b.state.clone(),
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
            first_bad_author: b
                .first_bad
                .as_ref()
                .map(|c| format!("{} <{}>", c.author_name, c.author_email))
                .unwrap_or_default(),
            report: b.report.clone().unwrap_or_default(),
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
            state: s.state.clone(),
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

struct WatchRow {
    id: i64,
    repo: String,
    branch: String,
    job: String,
    state: String,
    interval: u32,
    last_seen: String,
    last_tested: String,
    last_good: String,
    current: String,
    checked: String,
    last_error: String,
}

impl From<&WatchView> for WatchRow {
    fn from(w: &WatchView) -> WatchRow {
        let sha = |s: &Option<String>| s.as_deref().map(short).unwrap_or_default();
        WatchRow {
            id: w.id,
            repo: w.repo.clone(),
            branch: w.branch.clone(),
            job: w.job_name.clone(),
            state: w.state.clone(),
            interval: w.interval_secs,
            last_seen: sha(&w.last_seen),
            last_tested: sha(&w.last_tested),
            last_good: sha(&w.last_good),
            current: w
                .current_submission
                .map(|s| s.to_string())
                .unwrap_or_default(),
            checked: w.checked_at.map(format_time).unwrap_or_default(),
            last_error: w.last_error.clone().unwrap_or_default(),
        }
    }
}

fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

fn render(page: &impl Template) -> PageResult {
    page.render()
        .map(Html)
        .map_err(|e| HtmlError(Error::Other(anyhow::anyhow!("template failed: {e}"))))
}

/// `GET /bisections`.
pub async fn list(State(state): State<AppState>) -> PageResult {
    let list = super::views::list(&state, 200).await?;
    render(&ListPage {
        bisections: list.iter().map(Row::from).collect(),
    })
}

/// `GET /bisections/{id}`.
pub async fn show(State(state): State<AppState>, Path(id): Path<i64>) -> PageResult {
    let d = super::views::detail(&state, id).await?;
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
        verdict: &s.state,
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

/// `GET /watches`.
pub async fn watches(State(state): State<AppState>) -> PageResult {
    let list = crate::watches::list(&state).await?;
    render(&WatchesPage {
        watches: list.iter().map(WatchRow::from).collect(),
    })
}
