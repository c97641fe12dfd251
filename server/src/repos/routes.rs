//! `/api/v1/repos...`: register repos, list them, resolve commit names, read
//! the commit graph. Writes need a user token; reads are open, like the
//! dashboard.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::auth::UserAuth;
use crate::error::{ApiJson, Result};
use crate::state::AppState;
use crate::submissions::types::{CommitView, RepoCreate, RepoView};

/// `POST /api/v1/repos`: mirrors the repo and registers it (201).
pub async fn create(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<RepoCreate>,
) -> Result<(StatusCode, Json<RepoView>)> {
    tracing::info!(user = %user.user_name, repo = %req.name, "registering repo");
    let repo = super::register(&state, req).await?;
    Ok((StatusCode::CREATED, Json(repo)))
}

/// `GET /api/v1/repos`.
pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<RepoView>>> {
    let repos = super::list_repos(&state.db).await?;
    Ok(Json(repos.iter().map(super::RepoRow::view).collect()))
}

/// `GET /api/v1/repos/{name}`.
pub async fn show(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<RepoView>> {
    Ok(Json(super::get_repo(&state.db, &name).await?.view()))
}

/// `GET /api/v1/repos/{name}/commits/{*rev}`: resolves a branch, tag or
/// (short) sha to the full commit (a wildcard, so `feature/x` works).
pub async fn commit(
    State(state): State<AppState>,
    Path((name, rev)): Path<(String, String)>,
) -> Result<Json<CommitView>> {
    let repo = super::get_repo(&state.db, &name).await?;
    let commit = super::resolve_commit(&state, &repo, &rev).await?;
    Ok(Json(commit.view))
}

#[derive(Debug, Deserialize)]
pub struct RangeQuery {
    pub base: String,
    pub head: String,
    #[serde(default)]
    pub first_parent: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct RevList {
    pub base: String,
    pub head: String,
    /// `git rev-list --reverse base..head`: oldest first.
    pub commits: Vec<String>,
}

/// `GET /api/v1/repos/{name}/revlist?base=X&head=Y[&first_parent=true]`.
pub async fn revlist(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<RangeQuery>,
) -> Result<Json<RevList>> {
    let repo = super::get_repo(&state.db, &name).await?;
    let commits = super::rev_list(&state, &repo, &q.base, &q.head, q.first_parent).await?;
    Ok(Json(RevList {
        base: q.base,
        head: q.head,
        commits,
    }))
}
