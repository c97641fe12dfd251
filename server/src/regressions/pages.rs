//! `/regressions`: the triage list (filtered from the URL, paginated), one
//! regression with its bisection, report and history, and the form that
//! changes its state.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Redirect;
use serde::Deserialize;

use super::store::{self, Filter, HistoryRow};
use super::{for_reader, state_label, STATES};
use crate::access::{CsrfForm, Reader};
use crate::error::HtmlError;
use crate::mail::outbox;
use crate::state::AppState;
use crate::time::format_time;
use crate::web::{render, short_sha, PageResult, SHORT_SHA};
use kbot_api::regressions::RegressionRow;

/// Regressions per page.
const PAGE_SIZE: i64 = 50;

#[derive(Template)]
#[template(path = "regressions/list.html")]
struct ListPage {
    filter: Filter,
    states: &'static [(&'static str, &'static str)],
    rows: Vec<Row>,
    page: i64,
    prev: Option<String>,
    next: Option<String>,
}

#[derive(Template)]
#[template(path = "regressions/show.html")]
struct ShowPage {
    r: Row,
    states: &'static [(&'static str, &'static str)],
    /// The report's e-mail as stored (and sent), when there is one.
    message: Option<String>,
    history: Vec<Change>,
}

/// A regression as text.
struct Row {
    id: i64,
    repo: String,
    submission_id: i64,
    metric: String,
    tbox_group: String,
    change: String,
    state: String,
    state_label: String,
    head_short: String,
    head_subject: String,
    bisection: Option<(i64, String)>,
    /// The report's Message-ID and subject, for a reader who may see it.
    report: Option<(String, String)>,
    /// A report exists that this reader may not see yet (not sent).
    report_waiting: bool,
    created: String,
    updated: String,
}

impl From<&RegressionRow> for Row {
    fn from(r: &RegressionRow) -> Row {
        Row {
            id: r.id,
            repo: r.repo.clone(),
            submission_id: r.submission_id,
            metric: r.metric.clone(),
            tbox_group: r.tbox_group.clone(),
            change: r
                .change_pct
                .map(|c| format!("{c:+.1}%"))
                .unwrap_or_default(),
            state: r.state.to_string(),
            state_label: state_label(r.state.as_str()).to_owned(),
            head_short: short_sha(&r.head_sha, SHORT_SHA),
            head_subject: r.head_subject.clone(),
            bisection: r.bisection_id.map(|id| {
                (
                    id,
                    r.bisection_state.map(|s| s.to_string()).unwrap_or_default(),
                )
            }),
            report: r
                .report_message_id
                .clone()
                .map(|m| (m, r.report_subject.clone().unwrap_or_default())),
            report_waiting: r.report_id.is_some() && r.report_message_id.is_none(),
            created: format_time(r.created_at),
            updated: format_time(r.updated_at),
        }
    }
}

struct Change {
    at: String,
    who: String,
    from: String,
    to: String,
    note: String,
}

impl From<&HistoryRow> for Change {
    fn from(h: &HistoryRow) -> Change {
        Change {
            at: format_time(h.at),
            who: h.user.clone().unwrap_or_else(|| "kbot (robot)".into()),
            from: state_label(h.from_state.as_str()).to_owned(),
            to: state_label(h.to_state.as_str()).to_owned(),
            note: h.note.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    #[serde(flatten)]
    filter: Filter,
    /// From 1.
    page: Option<i64>,
}

/// `GET /regressions?repo=&tbox_group=&metric=&state=&page=`
pub async fn list(
    State(state): State<AppState>,
    reader: Reader,
    Query(q): Query<ListQuery>,
) -> PageResult {
    let page = q.page.unwrap_or(1).max(1);
    // One more than a page says whether there is a next one.
    let offset = (page - 1).saturating_mul(PAGE_SIZE);
    let mut rows = store::list(&state.db, &q.filter, PAGE_SIZE + 1, offset).await?;
    let more = rows.len() > PAGE_SIZE as usize;
    rows.truncate(PAGE_SIZE as usize);
    let rows: Vec<RegressionRow> = rows.into_iter().map(|r| for_reader(r, reader)).collect();
    let link = |p: i64| page_link(&q.filter, p);
    render(&ListPage {
        rows: rows.iter().map(Row::from).collect(),
        states: &STATES,
        page,
        prev: (page > 1).then(|| link(page - 1)),
        next: more.then(|| link(page + 1)),
        filter: q.filter,
    })
}

/// `/regressions?...` for page `page` under the same filters.
fn page_link(filter: &Filter, page: i64) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (key, value) in [
        ("repo", &filter.repo),
        ("tbox_group", &filter.tbox_group),
        ("metric", &filter.metric),
        ("state", &filter.state),
    ] {
        if !value.is_empty() {
            query.append_pair(key, value);
        }
    }
    query.append_pair("page", &page.to_string());
    format!("/regressions?{}", query.finish())
}

/// `GET /regressions/{id}`: the report's e-mail as `reader` may read it
/// ([`outbox::message_for`]).
pub async fn show(
    State(state): State<AppState>,
    reader: Reader,
    Path(id): Path<i64>,
) -> PageResult {
    let r = for_reader(store::get(&state.db, id).await?, reader);
    let message = match r.report_id {
        Some(report) => outbox::by_id(&state.db, report)
            .await?
            .and_then(|o| outbox::message_for(reader, o.state, &o.message)),
        None => None,
    };
    let history = store::history(&state.db, id).await?;
    render(&ShowPage {
        r: Row::from(&r),
        states: &STATES,
        message,
        history: history.iter().map(Change::from).collect(),
    })
}

#[derive(Debug, Deserialize)]
pub struct TriageForm {
    state: String,
    #[serde(default)]
    note: String,
}

/// `POST /regressions/{id}/state`
pub async fn triage(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    f: CsrfForm<TriageForm>,
) -> Result<Redirect, HtmlError> {
    let user = f.session.user();
    let to = super::parse_state(&f.form.state)?;
    store::set_state(&state.db, id, &user, to, &f.form.note).await?;
    Ok(Redirect::to(&format!("/regressions/{id}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_links_keep_the_filters() {
        let filter = Filter {
            repo: "linux".into(),
            metric: "bw_pipe.bandwidth.MB/sec".into(),
            ..Filter::default()
        };
        assert_eq!(
            page_link(&filter, 2),
            "/regressions?repo=linux&metric=bw_pipe.bandwidth.MB%2Fsec&page=2"
        );
    }
}
