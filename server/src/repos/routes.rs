//! `/api/v1/repos...`: register repos, list them, resolve commit names, read
//! the commit graph. Writes need a user token; reads are open, like the
//! dashboard.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::UserAuth;
use crate::error::{ApiJson, Result};
use crate::state::AppState;
use kbot_api::repos::{CommitView, RepoCreate, RepoView, RevList};

/// `POST /api/v1/repos`: mirrors the repo and registers it (201).
#[utoipa::path(
    post,
    operation_id = "create_repo",
    path = "/api/v1/repos",
    tag = "repos",
    request_body = RepoCreate,
    responses(
        (status = 201, description = "Mirrored and registered", body = RepoView),
        crate::error::RepoCreateErrors,
    ),
    security(("user_token" = [])),
)]
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
#[utoipa::path(
    get,
    operation_id = "list_repos",
    path = "/api/v1/repos",
    tag = "repos",
    responses(
        (status = 200, description = "Every registered repo", body = Vec<RepoView>),
        crate::error::ListErrors,
    ),
)]
pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<RepoView>>> {
    let repos = super::list_repos(&state.db).await?;
    Ok(Json(repos.iter().map(super::RepoRow::view).collect()))
}

/// `GET /api/v1/repos/{name}`.
#[utoipa::path(
    get,
    operation_id = "get_repo",
    path = "/api/v1/repos/{name}",
    tag = "repos",
    params(("name" = String, Path, description = "The repo's short name (`linux`)")),
    responses(
        (status = 200, description = "The repo", body = RepoView),
        crate::error::LookupErrors,
    ),
)]
pub async fn show(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<RepoView>> {
    Ok(Json(super::get_repo(&state.db, &name).await?.view()))
}

/// `GET /api/v1/repos/{name}/commits/{*rev}`: resolves a branch, tag or
/// (short) sha to the full commit (a wildcard, so `feature/x` works).
#[utoipa::path(
    get,
    operation_id = "resolve_commit",
    path = "/api/v1/repos/{name}/commits/{rev}",
    tag = "repos",
    params(
        ("name" = String, Path, description = "The repo's short name (`linux`)"),
        ("rev" = String, Path, description = "A branch, tag or (short) sha; a branch name may contain `/`"),
    ),
    responses(
        (status = 200, description = "The commit", body = CommitView),
        crate::error::QueryErrors,
    ),
)]
pub async fn commit(
    State(state): State<AppState>,
    Path((name, rev)): Path<(String, String)>,
) -> Result<Json<CommitView>> {
    let repo = super::get_repo(&state.db, &name).await?;
    let commit = super::resolve_commit(&state, &repo, &rev).await?;
    Ok(Json(commit.view))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RangeQuery {
    /// The excluded end: branch, tag or (short) sha.
    pub base: String,
    /// The included end.
    pub head: String,
    /// Follow only first parents (default false).
    #[serde(default)]
    pub first_parent: bool,
}

/// `GET /api/v1/repos/{name}/revlist?base=X&head=Y[&first_parent=true]`.
#[utoipa::path(
    get,
    operation_id = "rev_list",
    path = "/api/v1/repos/{name}/revlist",
    tag = "repos",
    params(("name" = String, Path, description = "The repo's short name (`linux`)"), RangeQuery),
    responses(
        (status = 200, description = "The commits of base..head, oldest first", body = RevList),
        crate::error::QueryErrors,
    ),
)]
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
