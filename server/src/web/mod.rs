//! The dashboard's render library, under every page of every feature:
//! rendering an askama template (`templates/`, each extending `base.html`),
//! the fallback for unknown paths, short commit ids, the list pages' paging
//! and filter links ([`paging`]) and the inline SVG plots ([`plots`]).
//!
//! It names base modules only; times are formatted by
//! [`crate::time::format_time`] and the HTML error page is
//! [`crate::error::error_page`], both a layer below, so the error responses
//! and the command line reach them without naming `web`.

pub mod paging;
pub mod plots;

use askama::Template;
use axum::http::{StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};

use crate::error::{error_page, Error, HtmlError};

/// What a dashboard page handler returns.
pub type PageResult = Result<Html<String>, HtmlError>;

/// Characters of a sha in tables and lists (0-day prints 10).
pub const SHORT_SHA: usize = 10;

/// Characters of a sha where a commit stands alone (steps, plots, logs).
pub const MEDIUM_SHA: usize = 12;

/// Renders a page; a template that fails is a server fault.
pub fn render(page: &impl Template) -> PageResult {
    page.render()
        .map(Html)
        .map_err(|e| HtmlError(Error::Other(anyhow::anyhow!("template failed: {e}"))))
}

/// The first `chars` characters of a commit id.
pub fn short_sha(sha: &str, chars: usize) -> String {
    sha.chars().take(chars).collect()
}

/// Any other path: a JSON 404 under `/api`, an HTML one elsewhere.
pub async fn not_found(uri: Uri) -> Response {
    if uri.path().starts_with("/api/") {
        return Error::not_found("endpoint", uri.path()).into_response();
    }
    error_page(StatusCode::NOT_FOUND, &format!("no page at {}", uri.path()))
}
