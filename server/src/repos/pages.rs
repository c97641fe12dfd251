//! A commit as a reader sees it (`/commits/{repo}/{sha}`): `git show` of
//! the repo's mirror, so every page that names a commit can link it, also
//! for a repo registered from a path on the server's disk, which has no web
//! view of its own. Who may read it is who may fetch the mirror
//! ([`super::serve`]): anyone with `KBOT_GIT_PUBLIC`, else a token or a
//! session; the mirror holds `#kbot test` patches too.

use askama::Template;
use axum::extract::{Path, State};

use super::git::is_full_sha;
use crate::access::Reader;
use crate::error::Error;
use crate::state::AppState;
use crate::web::{render, PageResult};

/// Most bytes of `git show` a page shows; a huge commit (a driver import)
/// is cut there, and the mirror has the rest.
const SHOWN_BYTES: usize = 512 * 1024;

#[derive(Template)]
#[template(path = "commit.html")]
struct CommitPage {
    repo: String,
    sha: String,
    text: String,
    /// Bytes left out past [`SHOWN_BYTES`].
    cut: usize,
}

/// `GET /commits/{repo}/{sha}`.
pub async fn commit(
    State(state): State<AppState>,
    reader: Reader,
    Path((repo, sha)): Path<(String, String)>,
) -> PageResult {
    if reader == Reader::Anonymous && !state.config.access.git_public {
        return Err(Error::Unauthorized.into());
    }
    let not_found = || Error::NotFound {
        what: "commit",
        key: format!("{repo}/{sha}"),
    };
    if !is_full_sha(&sha) {
        return Err(not_found().into());
    }
    let row = super::store::get_repo(&state.db, &repo).await?;
    let mirror = super::mirror_for(&state, &row.name);
    if !mirror.has_commit(&sha).await {
        return Err(not_found().into());
    }
    let text = mirror.show(&sha).await.map_err(Error::from)?;
    let shown = kbot_core::text::head(&text, SHOWN_BYTES);
    render(&CommitPage {
        cut: text.len() - shown.len(),
        text: shown.to_owned(),
        repo: row.name,
        sha,
    })
}

/// The page of commit `sha` of `repo`.
pub fn commit_href(repo: &str, sha: &str) -> String {
    format!("/commits/{repo}/{sha}")
}
