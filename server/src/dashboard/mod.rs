//! The web dashboard: submissions, one submission with its jobs, events and
//! compare table, and the agents. Server-rendered askama templates
//! (`templates/`, each extending `base.html`); no JavaScript.

pub mod compare;
mod fleet;
pub mod machines;
pub mod overview;
mod paging;
pub mod plots;
pub mod trends;
mod trends_data;
mod verdicts;
pub(crate) mod views;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};

use crate::agents::{AgentRecord, AGENT_COLUMNS};
use crate::comparisons;
use crate::error::{Error, HtmlError};
use crate::state::AppState;
use crate::submissions;
pub use views::format_time;
use views::{
    AgentRow, BootNote, ComparisonRow, EventRow, JobRow, SubmissionRow, SubmissionSummary,
};

type PageResult = Result<Html<String>, HtmlError>;

#[derive(Template)]
#[template(path = "submissions.html")]
struct SubmissionsPage {
    submissions: Vec<SubmissionRow>,
}

#[derive(Template)]
#[template(path = "submission.html")]
struct SubmissionPage {
    s: SubmissionSummary,
    boot_notes: Vec<BootNote>,
    /// (job, why no enrolled agent can take its queued runs).
    waiting: Vec<(String, String)>,
    comparisons: Vec<ComparisonRow>,
    tables: Vec<String>,
    jobs: Vec<JobRow>,
    events: Vec<EventRow>,
}

#[derive(Template)]
#[template(path = "agents.html")]
struct AgentsPage {
    agents: Vec<AgentRow>,
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    status: u16,
    title: &'a str,
    message: &'a str,
}

/// Most events shown on a submission page (the API has them all).
const PAGE_EVENTS: u32 = 500;

pub(crate) fn render(page: &impl Template) -> PageResult {
    page.render()
        .map(Html)
        .map_err(|e| HtmlError(Error::Other(anyhow::anyhow!("template failed: {e}"))))
}

/// `GET /submissions`: the newest submissions.
pub async fn index(State(state): State<AppState>) -> PageResult {
    let list = submissions::list_submissions(&state.db, 100, None).await?;
    render(&SubmissionsPage {
        submissions: list.iter().map(SubmissionRow::from).collect(),
    })
}

/// `GET /submissions/{id}`.
pub async fn submission(State(state): State<AppState>, Path(id): Path<i64>) -> PageResult {
    let detail = submissions::detail(&state, id).await?;
    let stored = submissions::comparisons(&state.db, id).await?;
    let events = submissions::events(&state.db, id, 0, PAGE_EVENTS).await?;
    let tables = comparisons::submission_tables(&state, id).await?;
    let booted = comparisons::booted_commits_by_position(&state.db, id).await?;
    let label = |index: u32| views::job_label(detail.atomic_jobs.get(index as usize));
    render(&SubmissionPage {
        s: SubmissionSummary::from(&detail.submission),
        boot_notes: booted
            .iter()
            .filter_map(|(position, b)| {
                Some(BootNote {
                    job: label(u32::try_from(*position).ok()?),
                    note: b.note()?,
                })
            })
            .collect(),
        waiting: detail
            .waiting
            .iter()
            .map(|w| (label(w.job_index), w.reason.clone()))
            .collect(),
        comparisons: stored
            .iter()
            .map(|c| ComparisonRow::new(c, label(c.job_index)))
            .collect(),
        tables: tables
            .iter()
            .map(comparisons::PairComparison::table)
            .collect(),
        jobs: detail
            .jobs
            .iter()
            .map(|j| JobRow::new(j, label(j.job_index)))
            .collect(),
        events: events.iter().map(EventRow::from).collect(),
    })
}

/// `GET /agents`.
pub async fn agents(State(state): State<AppState>) -> PageResult {
    let rows = sqlx::query(&format!(
        "SELECT {AGENT_COLUMNS} FROM agents ORDER BY tbox_group, name"
    ))
    .fetch_all(state.db.read())
    .await
    .map_err(Error::from)?;
    let agents = rows
        .iter()
        .map(|row| AgentRecord::from_row(row).map(|a| AgentRow::from(&a)))
        .collect::<Result<Vec<_>, Error>>()?;
    render(&AgentsPage { agents })
}

/// Any other path: a JSON 404 under `/api`, an HTML one elsewhere.
pub async fn not_found(uri: Uri) -> Response {
    if uri.path().starts_with("/api/") {
        return Error::not_found("endpoint", uri.path()).into_response();
    }
    error_page(StatusCode::NOT_FOUND, &format!("no page at {}", uri.path()))
}

/// The error page every dashboard error renders as.
pub fn error_page(status: StatusCode, message: &str) -> Response {
    let page = ErrorPage {
        status: status.as_u16(),
        title: status.canonical_reason().unwrap_or("Error"),
        message,
    };
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        // The template is compiled in; failing to render it is a bug worth a
        // plain-text answer rather than a second error page.
        Err(e) => (status, format!("{status}: {message} ({e})")).into_response(),
    }
}
