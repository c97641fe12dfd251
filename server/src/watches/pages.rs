//! The watches' dashboard page: every watched branch, its last commits and
//! the submission testing its head.

use askama::Template;
use axum::extract::State;

use crate::comparisons::kpi_result::ResultLine;
use crate::state::AppState;
use crate::time::format_time;
use crate::web::{render, short_sha, PageResult, MEDIUM_SHA};
use kbot_api::watches::WatchView;

#[derive(Template)]
#[template(path = "watches.html")]
struct WatchesPage {
    watches: Vec<WatchRow>,
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
    /// The running pair's result line.
    result: Option<ResultLine>,
}

impl From<&WatchView> for WatchRow {
    fn from(w: &WatchView) -> WatchRow {
        let sha = |s: &Option<String>| s.as_deref().map(short).unwrap_or_default();
        WatchRow {
            id: w.id,
            repo: w.repo.clone(),
            branch: w.branch.clone(),
            job: w.job_name.clone(),
            state: w.state.to_string(),
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
            result: None,
        }
    }
}

fn short(sha: &str) -> String {
    short_sha(sha, MEDIUM_SHA)
}

/// `GET /watches`.
pub async fn watches(State(state): State<AppState>) -> PageResult {
    let list = super::list(&state).await?;
    let running: Vec<i64> = list.iter().filter_map(|w| w.current_submission).collect();
    let mut lines = crate::submissions::result_lines(&state.db, &running).await?;
    render(&WatchesPage {
        watches: list
            .iter()
            .map(|w| WatchRow {
                result: w.current_submission.and_then(|id| lines.remove(&id)),
                ..WatchRow::from(w)
            })
            .collect(),
    })
}
