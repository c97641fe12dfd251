//! The dashboard's forms that change submissions: submit a pair, cancel a
//! submission, submit it again. Each goes through the same functions as the
//! REST API ([`crate::submissions::submit`], [`crate::submissions::cancel`]), as the signed-in user,
//! with the session's CSRF token checked ([`CsrfForm`]).

use std::path::Path;

use askama::Template;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use crate::access::csrf::NoFields;
use crate::access::{CsrfForm, Session, SignedIn};
use crate::error::{Error, HtmlError};
use crate::repos;
use crate::state::AppState;
use crate::submissions;
use crate::web::render;
use kbot_api::submissions::SubmitRequest;

/// Largest example job file read from the jobs directory.
const MAX_EXAMPLE_BYTES: u64 = 64 * 1024;

#[derive(Template)]
#[template(path = "submit.html")]
struct SubmitPage {
    csrf: String,
    repos: Vec<String>,
    examples: Vec<String>,
    form: SubmitForm,
    error: String,
}

/// What the submit form posts (and shows again after an error).
#[derive(Debug, Default, Deserialize)]
pub struct SubmitForm {
    #[serde(default)]
    pub repo: String,
    /// Pasted YAML; empty: the chosen example's text.
    #[serde(default)]
    pub job_file: String,
    #[serde(default)]
    pub example: String,
    #[serde(default)]
    pub base: String,
    #[serde(default)]
    pub head: String,
}

#[derive(Debug, Deserialize)]
pub struct ExampleQuery {
    #[serde(default)]
    example: String,
}

/// `GET /submit?example=NAME`: the form, with an example's text loaded.
pub async fn form(
    State(state): State<AppState>,
    SignedIn(session): SignedIn,
    Query(q): Query<ExampleQuery>,
) -> Response {
    let mut form = SubmitForm::default();
    let mut error = String::new();
    if !q.example.is_empty() {
        match example(&state.config.access.jobs_dir, &q.example).await {
            Ok(text) => form.job_file = text,
            Err(e) => error = e.to_string(),
        }
        form.example = q.example;
    }
    page(&state, &session, form, error, StatusCode::OK).await
}

/// `POST /submit`: queues the pair and shows its page, or the form again
/// with what was wrong (bad YAML, an unknown commit or repo, ...).
pub async fn submit(State(state): State<AppState>, f: CsrfForm<SubmitForm>) -> Response {
    let CsrfForm { session, form } = f;
    match queue(&state, &session, &form).await {
        Ok(id) => Redirect::to(&format!("/submissions/{id}")).into_response(),
        Err(e) if e.status().is_client_error() => {
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            page(&state, &session, form, e.to_string(), status).await
        }
        Err(e) => HtmlError(e).into_response(),
    }
}

async fn queue(state: &AppState, session: &Session, form: &SubmitForm) -> Result<i64, Error> {
    let job_file = if form.job_file.trim().is_empty() && !form.example.is_empty() {
        example(&state.config.access.jobs_dir, &form.example).await?
    } else {
        form.job_file.clone()
    };
    let base = Some(form.base.trim()).filter(|b| !b.is_empty());
    let req = SubmitRequest {
        repo: form.repo.clone(),
        job_file,
        base: base.map(str::to_owned),
        head: form.head.clone(),
        priority: 0,
        max_runs: None,
        bisect: None,
    };
    Ok(submissions::submit(state, &session.user(), req).await?.id)
}

async fn page(
    state: &AppState,
    session: &Session,
    form: SubmitForm,
    error: String,
    status: StatusCode,
) -> Response {
    let repos = match repos::list_repos(&state.db).await {
        Ok(list) => list.into_iter().map(|r| r.name).collect(),
        Err(e) => return HtmlError(e).into_response(),
    };
    let page = SubmitPage {
        csrf: session.csrf_token.clone(),
        repos,
        examples: examples(&state.config.access.jobs_dir).await,
        form,
        error,
    };
    match render(&page) {
        Ok(html) => (status, html).into_response(),
        Err(e) => e.into_response(),
    }
}

/// The example job files (`*.yaml`) in `dir`, by name; none when the
/// directory is missing (an installed server without the source tree).
async fn examples(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return names;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".yaml") {
            names.push(name);
        }
    }
    names.sort();
    names
}

/// The text of example `name`: only a plain file name from the list, so a
/// form cannot read other files of the server.
async fn example(dir: &Path, name: &str) -> Result<String, Error> {
    let unknown = || Error::BadRequest(format!("no example job file {name:?}"));
    if !examples(dir).await.iter().any(|n| n == name) {
        return Err(unknown());
    }
    let path = dir.join(name);
    let size = tokio::fs::metadata(&path).await?.len();
    if size > MAX_EXAMPLE_BYTES {
        return Err(unknown());
    }
    Ok(tokio::fs::read_to_string(&path).await?)
}

/// `POST /submissions/{id}/cancel`
pub async fn cancel(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<i64>,
    f: CsrfForm<NoFields>,
) -> Result<Redirect, HtmlError> {
    submissions::cancel(&state, &f.session.user(), id).await?;
    Ok(Redirect::to(&format!("/submissions/{id}")))
}

/// `POST /submissions/{id}/resubmit`: the same job file, repo and commits
/// (by sha, so a moved branch does not change the pair), as a new
/// submission of the signed-in user.
pub async fn resubmit(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<i64>,
    f: CsrfForm<NoFields>,
) -> Result<Redirect, HtmlError> {
    let old = submissions::view(&state.db, id).await?;
    let row = submissions::get_submission(&state.db, id).await?;
    let req = SubmitRequest {
        repo: old.repo,
        job_file: row.job_file,
        base: Some(old.base.sha),
        head: old.head.sha,
        priority: old.priority,
        max_runs: Some(old.max_runs),
        bisect: None,
    };
    let new = submissions::submit(&state, &f.session.user(), req).await?;
    tracing::info!(submission = new.id, from = id, user = %f.session.user_name, "resubmitted");
    Ok(Redirect::to(&format!("/submissions/{}", new.id)))
}
