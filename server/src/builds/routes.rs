//! The shared-build endpoints: claims, file uploads and the build's end
//! for agents with a leased job or build order; the build and its files
//! for anyone.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderName, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use kbot_api::builds::{
    BuildClaim, BuildFailed, BuildFile, BuildReady, BuildView, ClaimAnswer, Claimant,
};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use utoipa::IntoParams;

use super::{check_file, check_key};
use crate::auth::AgentAuth;
use crate::db::Tx;
use crate::error::{ApiJson, Error, Result};
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
    let by = claimant(req.job_id, req.order_id)?;
    let mut tx = held_tx(&state, &agent, by).await?;
    let answer = super::claim(&mut tx, by, (&req.build_key, &req.commit, &req.arch), retry).await?;
    tx.commit().await?;
    Ok(Json(answer))
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct ClaimantParam {
    /// The leased job that holds the build's claim (or `order_id`).
    pub job_id: Option<i64>,
    /// The leased build order that holds it (or `job_id`).
    pub order_id: Option<i64>,
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
        ClaimantParam,
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
    Query(q): Query<ClaimantParam>,
    body: Bytes,
) -> Result<Json<BuildFile>> {
    check_key(&key)?;
    check_file(&name)?;
    let by = claimant(q.job_id, q.order_id)?;
    // The claim is checked before the upload and again when it is recorded:
    // a stranger's bytes never reach the store, and a claim lost meanwhile
    // records nothing.
    // A read: no write lock is held for the check or the upload.
    let mut conn = state.db.read().acquire().await?;
    check_holder(&mut conn, &agent, by).await?;
    super::check_claim(&mut conn, &key, by).await?;
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
    let mut tx = held_tx(&state, &agent, by).await?;
    super::record_file(&mut tx, &key, by, &file).await?;
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
    let by = claimant(req.job_id, req.order_id)?;
    let mut tx = held_tx(&state, &agent, by).await?;
    let view = super::ready(&mut tx, &key, by, &req).await?;
    tx.commit().await?;
    tracing::info!(build = %key, %by, "kernel built and stored");
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
    let by = claimant(req.job_id, req.order_id)?;
    let mut tx = held_tx(&state, &agent, by).await?;
    let view = super::failed(&mut tx, &key, by, &req.log_tail).await?;
    tx.commit().await?;
    tracing::info!(build = %key, %by, "kernel does not build");
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

/// The claimant a request names: a job or an order, not both.
fn claimant(job_id: Option<i64>, order_id: Option<i64>) -> Result<Claimant> {
    Claimant::from_ids(job_id, order_id)
        .ok_or_else(|| Error::BadRequest("give exactly one of job_id and order_id".into()))
}

/// Checks that `agent` holds the lease of the job or order `by`.
async fn check_holder(
    conn: &mut sqlx::AnyConnection,
    agent: &AgentAuth,
    by: Claimant,
) -> Result<()> {
    match by {
        Claimant::Job(job) => check_leased(conn, job, agent.record.id).await,
        Claimant::Order(order) => super::orders::check_leased(conn, order, agent.record.id).await,
    }
}

/// A write transaction, after checking that `agent` holds `by`'s lease.
async fn held_tx(state: &AppState, agent: &AgentAuth, by: Claimant) -> Result<Tx> {
    let mut tx = state.db.begin().await?;
    check_holder(&mut tx, agent, by).await?;
    Ok(tx)
}
