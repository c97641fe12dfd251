//! Reports on the dashboard and the API: the list, one report's text with its
//! delivery attempts, and the mbox download.
//!
//! What a reader who is not signed in (no session, no user token) sees is
//! less: no recipient anywhere (the list's column, the report's `To:` line
//! and the To/Cc headers of its text are left out), and a report that has
//! not left yet (not `sent`, `handed` or `uncertain`) shows neither its
//! Message-ID nor its text: an outsider could otherwise answer a report before its recipients
//! see it, or collect their addresses.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Json;

use super::outbox::{self, sees_all};
use crate::access::csrf::NoFields;
use crate::access::{CsrfForm, Reader};
use crate::auth::UserAuth;
use crate::error::{Error, HtmlError};
use crate::state::AppState;
use crate::time::format_time;
use crate::time::now_ms;
use crate::web::render;
use kbot_api::reports::{Attempt, ReportDetail, StoredReport};

/// Most reports listed at once.
const LIST_LIMIT: i64 = 200;

#[derive(Template)]
#[template(path = "reports/list.html")]
struct ListPage {
    reports: Vec<ReportRow>,
    /// Whether the recipients column is shown.
    signed_in: bool,
}

#[derive(Template)]
#[template(path = "reports/show.html")]
struct ShowPage {
    r: ReportRow,
    /// The resend button is offered: mail is on and the report is
    /// `uncertain` or `failed` (what `outbox::resend` accepts).
    resendable: bool,
    message: String,
    attempts: Vec<AttemptRow>,
}

struct ReportRow {
    /// Empty when the reader may not see it (then the row has no link).
    message_id: String,
    subject: String,
    kind: String,
    state: String,
    attempts: i64,
    recipients: String,
    created: String,
    sent: String,
    last_error: String,
    /// The pair it reports on, and the bisection that found its commit.
    submission: Option<i64>,
    bisection: Option<i64>,
}

struct AttemptRow {
    attempt: i64,
    sender: String,
    at: String,
    outcome: String,
    detail: String,
}

impl From<&StoredReport> for ReportRow {
    fn from(r: &StoredReport) -> ReportRow {
        ReportRow {
            message_id: r.message_id.clone(),
            subject: r.subject.clone(),
            kind: r.kind.to_string(),
            state: r.state.to_string(),
            attempts: r.attempts,
            recipients: r.recipients.join(", "),
            created: format_time(r.created_at),
            sent: r.sent_at.map(format_time).unwrap_or_default(),
            last_error: r.last_error.clone().unwrap_or_default(),
            submission: r.submission_id,
            bisection: r.bisection_id,
        }
    }
}

impl From<Attempt> for AttemptRow {
    fn from(a: Attempt) -> AttemptRow {
        AttemptRow {
            attempt: a.attempt,
            sender: a.sender,
            at: format_time(a.started_at),
            outcome: a.outcome.to_string(),
            detail: a.detail,
        }
    }
}

/// A report by its Message-ID (with or without `<>`) or its numeric id.
async fn find(state: &AppState, key: &str) -> Result<StoredReport, Error> {
    let key = key.trim_matches(['<', '>']);
    let found = match key.parse::<i64>() {
        Ok(id) => outbox::by_id(&state.db, id).await?,
        Err(_) => outbox::by_message_id(&state.db, key).await?,
    };
    found.ok_or_else(|| Error::NotFound {
        what: "report",
        key: key.to_owned(),
    })
}

/// `r` as a reader who is not signed in sees it: no recipients, no To or
/// Cc header, and nothing that names a report that is not public.
fn for_anonymous(mut r: StoredReport) -> StoredReport {
    r.recipients.clear();
    // The relay's words may name a recipient ("550 <x@y>: no such user").
    r.last_error = None;
    match outbox::message_for(Reader::Anonymous, r.state, &r.message) {
        Some(message) => r.message = message,
        None => {
            r.message_id.clear();
            r.message.clear();
        }
    }
    r
}

/// A report's delivery attempts as `reader` may see them: the relay's
/// words only signed in.
async fn attempts_for(state: &AppState, id: i64, reader: Reader) -> Result<Vec<Attempt>, Error> {
    let mut attempts = outbox::attempts(&state.db, id).await?;
    if !sees_all(reader) {
        for a in &mut attempts {
            a.detail.clear();
        }
    }
    Ok(attempts)
}

/// The report `key` as `reader` may see it: a report that is not public is
/// not found for a reader who is not signed in.
async fn find_for(state: &AppState, key: &str, reader: Reader) -> Result<StoredReport, Error> {
    let r = find(state, key).await?;
    if sees_all(reader) {
        return Ok(r);
    }
    if !r.state.is_public() {
        return Err(Error::NotFound {
            what: "report",
            key: key.trim_matches(['<', '>']).to_owned(),
        });
    }
    Ok(for_anonymous(r))
}

/// `GET /reports`
pub async fn list_page(
    State(state): State<AppState>,
    reader: Reader,
) -> Result<Html<String>, HtmlError> {
    let reports = list_for(&state, reader).await.map_err(HtmlError)?;
    render(&ListPage {
        reports: reports.iter().map(ReportRow::from).collect(),
        signed_in: sees_all(reader),
    })
}

/// The newest reports as `reader` may see them.
async fn list_for(state: &AppState, reader: Reader) -> Result<Vec<StoredReport>, Error> {
    let reports = outbox::list(&state.db, LIST_LIMIT).await?;
    if sees_all(reader) {
        return Ok(reports);
    }
    Ok(reports.into_iter().map(for_anonymous).collect())
}

/// `GET /reports/{message_id}`
pub async fn show_page(
    State(state): State<AppState>,
    reader: Reader,
    Path(message_id): Path<String>,
) -> Result<Html<String>, HtmlError> {
    let r = find_for(&state, &message_id, reader)
        .await
        .map_err(HtmlError)?;
    let attempts = attempts_for(&state, r.id, reader)
        .await
        .map_err(HtmlError)?;
    render(&ShowPage {
        resendable: state.config.mail.enabled && outbox::is_resendable(r.state),
        r: ReportRow::from(&r),
        message: r.message.clone(),
        attempts: attempts.into_iter().map(AttemptRow::from).collect(),
    })
}

/// `GET /reports/{message_id}/mbox`: the stored message as a one-entry mbox.
pub async fn mbox(
    State(state): State<AppState>,
    reader: Reader,
    Path(message_id): Path<String>,
) -> Result<Response, Error> {
    let r = find_for(&state, &message_id, reader).await?;
    let from = state.config.mail.report.robot_address.clone();
    let body = kbot_core::report::mbox::mbox_entry(&r.message, &from, r.created_at)?;
    let disposition = format!("attachment; filename=\"{}.mbox\"", file_name(&r.message_id));
    Ok((
        [
            (header::CONTENT_TYPE, "application/mbox".to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        body,
    )
        .into_response())
}

/// `GET /api/v1/reports`
#[utoipa::path(
    get,
    operation_id = "list_reports",
    path = "/api/v1/reports",
    tag = "reports",
    responses(
        (status = 200, description = "Reports, newest first", body = Vec<StoredReport>),
        crate::error::ListErrors,
    ),
)]
pub async fn list_json(
    State(state): State<AppState>,
    reader: Reader,
) -> Result<Json<Vec<StoredReport>>, Error> {
    Ok(Json(list_for(&state, reader).await?))
}

/// `GET /api/v1/reports/{id or message_id}`: the report (with its full
/// message) and its delivery attempts. The attempts are `delivery`, not
/// `attempts`, which is their count here as in the list.
#[utoipa::path(
    get,
    operation_id = "get_report",
    path = "/api/v1/reports/{message_id}",
    tag = "reports",
    params(("message_id" = String, Path, description = "The report's numeric id, or its Message-ID with or without `<>`")),
    responses(
        (status = 200, description = "The report with its full message and its delivery attempts", body = ReportDetail),
        crate::error::LookupErrors,
    ),
)]
pub async fn show_json(
    State(state): State<AppState>,
    reader: Reader,
    Path(key): Path<String>,
) -> Result<Json<ReportDetail>, Error> {
    let report = find_for(&state, &key, reader).await?;
    let delivery = attempts_for(&state, report.id, reader).await?;
    Ok(Json(ReportDetail { report, delivery }))
}

/// `POST /api/v1/reports/{id or message_id}/resend`: an operator sends an
/// `uncertain` report (its sender stopped while handing it to the relay, so
/// it may have arrived) or a `failed` one (again). Mail must be on.
#[utoipa::path(
    post,
    operation_id = "resend_report",
    path = "/api/v1/reports/{message_id}/resend",
    tag = "reports",
    params(("message_id" = String, Path, description = "The report's numeric id, or its Message-ID with or without `<>`")),
    responses(
        (status = 200, description = "The report, pending again, with its delivery attempts", body = ReportDetail),
        crate::error::ActionErrors,
    ),
    security(("user_token" = [])),
)]
pub async fn resend_json(
    State(state): State<AppState>,
    user: UserAuth,
    Path(key): Path<String>,
) -> Result<Json<ReportDetail>, Error> {
    let report = resend(&state, &key, &user.user_name).await?;
    show_json(State(state), Reader::User, Path(report.id.to_string())).await
}

/// `POST /reports/{message_id}/resend`: the report page's button, for a
/// signed-in user with the session's CSRF token; back to the report.
pub async fn resend_form(
    State(state): State<AppState>,
    Path(key): Path<String>,
    f: CsrfForm<NoFields>,
) -> Result<Redirect, HtmlError> {
    let report = resend(&state, &key, &f.session.user().user_name)
        .await
        .map_err(HtmlError)?;
    Ok(Redirect::to(&format!("/reports/{}", report.message_id)))
}

/// Queues `key`'s report to be sent again, if mail is on and it is
/// `uncertain` or `failed`; `by` is the operator, for the log.
async fn resend(state: &AppState, key: &str, by: &str) -> Result<StoredReport, Error> {
    let report = find(state, key).await?;
    if !state.config.mail.enabled {
        return Err(Error::Conflict("mail is off on this server".into()));
    }
    if !outbox::resend(&state.db, report.id, now_ms()).await? {
        return Err(Error::Conflict(format!(
            "report {} is {}: only an uncertain or failed report is resent",
            report.id, report.state
        )));
    }
    tracing::warn!(message_id = %report.message_id, by, was = %report.state, "report resent by an operator");
    Ok(report)
}

/// A Message-ID made safe for a file name.
fn file_name(message_id: &str) -> String {
    message_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".-_@".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}
