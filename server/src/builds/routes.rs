//! The shared-build endpoints: claims, file uploads and the build's end
//! for agents with a leased job; the build and its files for anyone.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderName, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use kbot_api::builds::{BuildClaim, BuildFailed, BuildFile, BuildReady, BuildView, ClaimAnswer};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use utoipa::IntoParams;

use super::{check_file, check_key};
use crate::auth::AgentAuth;
use crate::db::Tx;
use crate::error::{ApiJson, Result};
use crate::jobs::handlers::check_leased;
use crate::state::AppState;

/// `POST /api/v1/builds/claim`: build the kernel, wait for it, or take it.
#[utoipa::path(
    post,
    operation_id = "claim_build",
    path = "/api/v1/builds/claim",
    tag = "agent",
    request_body = BuildClaim,
    responses(
        (status = 200, description = "Build it, wait, or download it; or it does not build", body = ClaimAnswer),
        crate::error::UpdateErrors,
    ),
    security(("agent_token" = [])),
)]
pub async fn claim(
    State(state): State<AppState>,
    agent: AgentAuth,
    ApiJson(req): ApiJson<BuildClaim>,
) -> Result<Json<ClaimAnswer>> {
    check_key(&req.build_key)?;
    // Asking again costs one indexed read; a build takes minutes, and a
    // waiter should start within seconds of its end.
    let retry = (state.config.heartbeat_interval_secs / 4).clamp(1, 5);
    let mut tx = leased_tx(&state, &agent, req.job_id).await?;
    let answer = super::claim(
        &mut tx,
        req.job_id,
        (&req.build_key, &req.commit, &req.arch),
        retry,
    )
    .await?;
    tx.commit().await?;
    Ok(Json(answer))
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct JobParam {
    /// The leased job that holds the build's claim.
    pub job_id: i64,
}

/// `PUT /api/v1/builds/{key}/files/{name}`: one file of a claimed build,
/// stored whole before it is recorded.
#[utoipa::path(
    put,
    operation_id = "upload_build_file",
    path = "/api/v1/builds/{key}/files/{name}",
    tag = "agent",
    params(
        ("key" = String, Path, description = "The build key"),
        ("name" = String, Path, description = "`bzImage`, `config` or `build.log`"),
        JobParam,
    ),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 200, description = "Stored, with its digest", body = BuildFile),
        crate::error::UploadErrors,
    ),
    security(("agent_token" = [])),
)]
pub async fn upload_file(
    State(state): State<AppState>,
    agent: AgentAuth,
    Path((key, name)): Path<(String, String)>,
    Query(q): Query<JobParam>,
    body: Bytes,
) -> Result<Json<BuildFile>> {
    check_key(&key)?;
    check_file(&name)?;
    // The claim is checked before the upload and again when it is recorded:
    // a stranger's bytes never reach the store, and a claim lost meanwhile
    // records nothing.
    // A read: no write lock is held for the check or the upload.
    let mut conn = state.db.read().acquire().await?;
    check_leased(&mut conn, q.job_id, agent.record.id).await?;
    super::check_claim(&mut conn, &key, q.job_id).await?;
    drop(conn);
    let file = BuildFile {
        name: name.clone(),
        sha256: hex::encode(Sha256::digest(&body)),
        bytes: i64::try_from(body.len()).unwrap_or(i64::MAX),
    };
    state
        .artifacts
        .put_bytes(&super::object_key(&key, &name), body)
        .await?;
    let mut tx = leased_tx(&state, &agent, q.job_id).await?;
    super::record_file(&mut tx, &key, q.job_id, &file).await?;
    tx.commit().await?;
    Ok(Json(file))
}

/// `POST /api/v1/builds/{key}/ready`: the claimant built it.
#[utoipa::path(
    post,
    operation_id = "build_ready",
    path = "/api/v1/builds/{key}/ready",
    tag = "agent",
    params(("key" = String, Path, description = "The build key")),
    request_body = BuildReady,
    responses(
        (status = 200, description = "The build, ready", body = BuildView),
        crate::error::UpdateErrors,
    ),
    security(("agent_token" = [])),
)]
pub async fn ready(
    State(state): State<AppState>,
    agent: AgentAuth,
    Path(key): Path<String>,
    ApiJson(req): ApiJson<BuildReady>,
) -> Result<Json<BuildView>> {
    check_key(&key)?;
    let mut tx = leased_tx(&state, &agent, req.job_id).await?;
    let view = super::ready(&mut tx, &key, &req).await?;
    tx.commit().await?;
    tracing::info!(build = %key, job = req.job_id, "kernel built and stored");
    Ok(Json(view))
}

/// `POST /api/v1/builds/{key}/failed`: the key does not build.
#[utoipa::path(
    post,
    operation_id = "build_failed",
    path = "/api/v1/builds/{key}/failed",
    tag = "agent",
    params(("key" = String, Path, description = "The build key")),
    request_body = BuildFailed,
    responses(
        (status = 200, description = "The build, failed", body = BuildView),
        crate::error::UpdateErrors,
    ),
    security(("agent_token" = [])),
)]
pub async fn failed(
    State(state): State<AppState>,
    agent: AgentAuth,
    Path(key): Path<String>,
    ApiJson(req): ApiJson<BuildFailed>,
) -> Result<Json<BuildView>> {
    check_key(&key)?;
    let mut tx = leased_tx(&state, &agent, req.job_id).await?;
    let view = super::failed(&mut tx, &key, req.job_id, &req.log_tail).await?;
    tx.commit().await?;
    tracing::info!(build = %key, job = req.job_id, "kernel does not build");
    Ok(Json(view))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// At most this many (default 50, at most 500).
    pub limit: Option<u32>,
    /// Only builds with a smaller id (paging, newest first).
    pub before: Option<i64>,
    /// Only builds of this commit (40 hex digits).
    pub commit: Option<String>,
}

/// `GET /api/v1/builds?limit=N&before=ID&commit=SHA`, newest first.
#[utoipa::path(
    get,
    operation_id = "list_builds",
    path = "/api/v1/builds",
    tag = "builds",
    params(ListQuery),
    responses(
        (status = 200, description = "Builds, newest first", body = Vec<BuildView>),
        crate::error::PagedListErrors,
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<BuildView>>> {
    let mut conn = state.db.read().acquire().await?;
    let list = super::list(
        &mut conn,
        q.limit.unwrap_or(50),
        q.before,
        q.commit.as_deref(),
    );
    Ok(Json(list.await?))
}

/// `GET /api/v1/builds/{key}`: a build and its files.
#[utoipa::path(
    get,
    operation_id = "get_build",
    path = "/api/v1/builds/{key}",
    tag = "builds",
    params(("key" = String, Path, description = "The build key")),
    responses(
        (status = 200, description = "The build", body = BuildView),
        crate::error::QueryErrors,
    ),
)]
pub async fn get(
    State(state): State<AppState>,
    Path(key): Path<String>,
) -> Result<Json<BuildView>> {
    check_key(&key)?;
    let mut conn = state.db.read().acquire().await?;
    Ok(Json(super::view(&mut conn, &key).await?))
}

/// `GET /api/v1/builds/{key}/files/{name}`: a file's bytes, its SHA-256 in
/// `x-kbot-sha256` for the downloader to check.
#[utoipa::path(
    get,
    operation_id = "get_build_file",
    path = "/api/v1/builds/{key}/files/{name}",
    tag = "builds",
    params(
        ("key" = String, Path, description = "The build key"),
        ("name" = String, Path, description = "`bzImage`, `config` or `build.log`"),
    ),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream"),
        crate::error::QueryErrors,
    ),
)]
pub async fn file(
    State(state): State<AppState>,
    Path((key, name)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    check_key(&key)?;
    check_file(&name)?;
    let mut conn = state.db.read().acquire().await?;
    let (object, sha256) = super::stored_file(&mut conn, &key, &name).await?;
    drop(conn);
    let bytes = state.artifacts.get_bytes(&object).await?;
    let content_type = if name == "bzImage" {
        "application/octet-stream"
    } else {
        "text/plain; charset=utf-8"
    };
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (
                HeaderName::from_static(kbot_api::builds::SHA256_HEADER),
                sha256,
            ),
        ],
        bytes,
    ))
}

/// A write transaction, after checking that `job` is leased to `agent`.
async fn leased_tx(state: &AppState, agent: &AgentAuth, job: i64) -> Result<Tx> {
    let mut tx = state.db.begin().await?;
    check_leased(&mut tx, job, agent.record.id).await?;
    Ok(tx)
}
