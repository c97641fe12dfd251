//! The lists' dashboard pages: every list with its recent series, and one
//! series with its parts, base, applied ref and pair.

use askama::Template;
use axum::extract::{Path, State};

use crate::state::AppState;
use crate::time::format_time;
use crate::web::{render, short_sha, PageResult, MEDIUM_SHA};
use kbot_api::lists::{ListView, SeriesPart, SeriesView};

#[derive(Template)]
#[template(path = "lists.html")]
struct ListsPage {
    lists: Vec<ListView>,
    series: Vec<SeriesRow>,
}

#[derive(Template)]
#[template(path = "series.html")]
struct SeriesPage {
    s: SeriesRow,
    parts: Vec<PartRow>,
    git_url: String,
}

struct SeriesRow {
    id: i64,
    list: String,
    version: u32,
    total: u32,
    title: String,
    author: String,
    state: String,
    base: String,
    base_how: String,
    ref_name: String,
    tip: String,
    submission: String,
    detail: String,
    posted: String,
}

struct PartRow {
    index: u32,
    subject: String,
    message_id: String,
    commit: String,
}

fn short(sha: &Option<String>) -> String {
    sha.as_deref()
        .map(|s| short_sha(s, MEDIUM_SHA))
        .unwrap_or_default()
}

impl From<&SeriesView> for SeriesRow {
    fn from(s: &SeriesView) -> SeriesRow {
        SeriesRow {
            id: s.id,
            list: s.list.clone(),
            version: s.version,
            total: s.total,
            title: s.title.clone(),
            author: s.author.clone(),
            state: s.state.clone(),
            base: short(&s.base),
            base_how: s.base_how.clone().unwrap_or_default(),
            ref_name: s.ref_name.clone().unwrap_or_default(),
            tip: short(&s.tip),
            submission: s.submission.map(|id| id.to_string()).unwrap_or_default(),
            detail: s.detail.clone().unwrap_or_default(),
            posted: format_time(s.posted_at),
        }
    }
}

impl From<&SeriesPart> for PartRow {
    fn from(p: &SeriesPart) -> PartRow {
        PartRow {
            index: p.index,
            subject: p.subject.clone(),
            message_id: p.message_id.clone(),
            commit: short(&p.commit),
        }
    }
}

/// `GET /lists`.
pub async fn lists(State(state): State<AppState>) -> PageResult {
    let lists = super::list(&state).await?;
    let series = super::all_series(&state).await?;
    render(&ListsPage {
        lists,
        series: series.iter().map(SeriesRow::from).collect(),
    })
}

/// `GET /series/{id}`.
pub async fn series(State(state): State<AppState>, Path(id): Path<i64>) -> PageResult {
    let detail = super::series_detail(&state, id).await?;
    let list = super::store::list(&state.db)
        .await?
        .into_iter()
        .find(|l| l.name == detail.series.list);
    let git_url = list
        .map(|l| state.config.mail.git_url(&l.repo_name))
        .unwrap_or_default();
    render(&SeriesPage {
        s: SeriesRow::from(&detail.series),
        parts: detail.parts.iter().map(PartRow::from).collect(),
        git_url,
    })
}
