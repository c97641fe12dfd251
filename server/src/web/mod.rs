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

/// A link from one object's page to a neighbour's (a submission to its
/// series, bisection, regression or report), with what the neighbour is to
/// it and the neighbour's state for the page's colour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// What the neighbour is to the page's object: `queued by`, `bisection`, ...
    pub rel: &'static str,
    pub text: String,
    pub href: String,
    /// The neighbour's state word (`state-{state}` colours it); may be empty.
    pub state: String,
}

/// The first `chars` characters of a commit id.
pub fn short_sha(sha: &str, chars: usize) -> String {
    sha.chars().take(chars).collect()
}

pub use kbot_core::text::without_credentials;

/// Text as a reader who is not signed in sees it: every absolute path of
/// the server's or an agent's disk (`/var/lib/kbot/work/17/bzImage`) cut to
/// its last component (`…/bzImage`). Paths inside URLs are kept; a path is
/// one that starts a word (after a space, `=`, a quote, `(` or `,`).
pub fn without_paths(text: &str) -> String {
    let is_path_char =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-' | '/');
    let mut out = String::with_capacity(text.len());
    let mut prev: Option<char> = None;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let starts_word =
            prev.is_none_or(|p| p.is_whitespace() || matches!(p, '=' | '\'' | '"' | '(' | ','));
        if c == '/' && starts_word {
            let end = rest.find(|c: char| !is_path_char(c)).unwrap_or(rest.len());
            let path = &rest[..end];
            let parts = path.split('/').filter(|p| !p.is_empty()).count();
            if parts >= 2 {
                out.push('…');
                out.push('/');
                out.push_str(path.rsplit('/').next().unwrap_or_default());
            } else {
                out.push_str(path);
            }
            prev = path.chars().last();
            rest = &rest[end..];
            continue;
        }
        out.push(c);
        prev = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Any other path: a JSON 404 under `/api`, an HTML one elsewhere.
pub async fn not_found(uri: Uri) -> Response {
    if uri.path().starts_with("/api/") {
        return Error::not_found("endpoint", uri.path()).into_response();
    }
    error_page(StatusCode::NOT_FOUND, &format!("no page at {}", uri.path()))
}

#[cfg(test)]
mod tests {
    use super::without_paths;

    #[test]
    fn paths_are_cut_to_their_last_component_and_urls_kept() {
        assert_eq!(
            without_paths(
                "qemu-system-x86_64 -kernel /var/lib/kbot/work/17/bzImage -append 'root=/dev/ram0' \
                 -initrd=/tmp/x/initrd.cpio.gz from https://example.org/a/b.git at /"
            ),
            "qemu-system-x86_64 -kernel …/bzImage -append 'root=…/ram0' \
                 -initrd=…/initrd.cpio.gz from https://example.org/a/b.git at /"
        );
        assert_eq!(without_paths("exit 1 (/bin)"), "exit 1 (/bin)");
    }
}
