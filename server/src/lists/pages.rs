//! The lists' dashboard pages: every list with its recent series and each
//! series' result, and one series with its result, its bisections' progress
//! and a status per patch (patchwork's view).

use askama::Template;
use axum::extract::{Path, State};

use super::patch_status::{self, Bisected, PatchStatus};
use crate::bisect::{self, BisectionRow, StepRow};
use crate::comparisons::kpi_result::ResultLine;
use crate::error::Result;
use crate::state::AppState;
use crate::submissions;
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
    /// (bisection id, its state, where it is).
    bisections: Vec<(i64, &'static str, String)>,
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
    result: Option<ResultLine>,
}

struct PartRow {
    index: u32,
    subject: String,
    message_id: String,
    /// Its head, for the column: generated ids run to 80 characters and
    /// would push the commit off the page (the full id is the title).
    message_id_short: String,
    commit: String,
    /// The commit's page, once the patch is applied.
    commit_href: Option<String>,
    status: PatchStatus,
    /// The mail in the list's web archive, when the list has one.
    archived: Option<String>,
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
            state: s.state.to_string(),
            base: short(&s.base),
            base_how: s.base_how.clone().unwrap_or_default(),
            ref_name: s.ref_name.clone().unwrap_or_default(),
            tip: short(&s.tip),
            submission: s.submission.map(|id| id.to_string()).unwrap_or_default(),
            detail: s.detail.clone().unwrap_or_default(),
            posted: format_time(s.posted_at),
            result: None,
        }
    }
}

impl PartRow {
    fn new(
        p: &SeriesPart,
        bisections: &[Bisected<'_>],
        (repo, web_url): (&str, Option<&str>),
    ) -> PartRow {
        PartRow {
            commit_href: p
                .commit
                .as_deref()
                .map(|sha| crate::repos::pages::commit_href(repo, sha)),
            archived: web_url.map(|base| archive_link(base, &p.message_id)),
            index: p.index,
            subject: p.subject.clone(),
            message_id: p.message_id.clone(),
            message_id_short: ellipsis(&p.message_id, MESSAGE_ID_SHOWN),
            commit: short(&p.commit),
            status: patch_status::status(p.commit.as_deref(), bisections),
        }
    }
}

/// Characters of a Message-ID the parts table shows.
const MESSAGE_ID_SHOWN: usize = 24;

/// The first `n` characters of `text`, and `…` when there were more.
fn ellipsis(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// public-inbox's address of a mail: the Message-ID as one path segment.
fn archive_link(base: &str, message_id: &str) -> String {
    let segment: String = url::form_urlencoded::byte_serialize(message_id.as_bytes()).collect();
    format!(
        "{}/{}/",
        base.trim().trim_end_matches('/'),
        segment.replace('+', "%20")
    )
}

/// The rows of `series` with each one's result line.
async fn rows_with_results(state: &AppState, series: &[SeriesView]) -> Result<Vec<SeriesRow>> {
    let ids: Vec<i64> = series.iter().filter_map(|s| s.submission).collect();
    let mut lines = submissions::result_lines(&state.db, &ids).await?;
    Ok(series
        .iter()
        .map(|s| SeriesRow {
            result: s.submission.and_then(|id| lines.remove(&id)),
            ..SeriesRow::from(s)
        })
        .collect())
}

/// The bisections the series' pair started, each with its steps and its
/// first bad commit's sha.
async fn bisections_of(
    state: &AppState,
    submission: Option<i64>,
) -> Result<Vec<(BisectionRow, Vec<StepRow>, Option<String>)>> {
    let Some(id) = submission else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for b in bisect::started_from(&state.db, id).await? {
        let steps = bisect::steps(&state.db, b.id).await?;
        let first_bad = match b.first_bad_commit_id {
            Some(c) => Some(crate::repos::commit_by_id(state.db.read(), c).await?.sha),
            None => None,
        };
        out.push((b, steps, first_bad));
    }
    Ok(out)
}

/// `GET /lists`.
pub async fn lists(State(state): State<AppState>) -> PageResult {
    let lists = super::list(&state).await?;
    let series = super::all_series(&state).await?;
    let lists = lists
        .into_iter()
        .map(|l| ListView {
            archive: crate::access::paths_for_viewer(&l.archive),
            ..l
        })
        .collect();
    render(&ListsPage {
        lists,
        series: rows_with_results(&state, &series).await?,
    })
}

/// `GET /series/{id}`.
pub async fn series(State(state): State<AppState>, Path(id): Path<i64>) -> PageResult {
    let detail = super::series_detail(&state, id).await?;
    let list = super::store::list(&state.db)
        .await?
        .into_iter()
        .find(|l| l.name == detail.series.list);
    let repo = list
        .as_ref()
        .map(|l| l.repo_name.clone())
        .unwrap_or_default();
    let git_url = list
        .as_ref()
        .map(|l| state.config.mail.git_url(&l.repo_name))
        .unwrap_or_default();
    let web_url = list
        .as_ref()
        .and_then(|l| l.web_url.as_deref())
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"));
    let found = bisections_of(&state, detail.series.submission).await?;
    let bisected: Vec<Bisected<'_>> = found
        .iter()
        .map(|(row, steps, first_bad)| Bisected {
            row,
            steps,
            first_bad: first_bad.as_deref(),
        })
        .collect();
    let commits: Vec<&str> = detail
        .parts
        .iter()
        .filter_map(|p| p.commit.as_deref())
        .collect();
    let s = rows_with_results(&state, std::slice::from_ref(&detail.series))
        .await?
        .pop()
        .unwrap_or_else(|| SeriesRow::from(&detail.series));
    render(&SeriesPage {
        s,
        parts: detail
            .parts
            .iter()
            .map(|p| PartRow::new(p, &bisected, (&repo, web_url)))
            .collect(),
        git_url,
        bisections: bisected
            .iter()
            .map(|b| {
                let progress = patch_status::progress(b, &commits);
                (b.row.id, b.row.state.as_str(), progress)
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::ellipsis;

    #[test]
    fn long_message_ids_are_cut_on_a_character() {
        assert_eq!(ellipsis("short@x", 24), "short@x");
        assert_eq!(ellipsis("ééééé@example.org", 3), "ééé…");
    }
}
