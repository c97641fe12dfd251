//! The initramfs a run's guest booted (static kbot-bench, busybox, /init),
//! stored once per archive by its SHA-256 so that a reproduction script
//! ([`super::repro`]) boots the same bytes: an agent stores it while it
//! holds the job's lease, anyone may download it.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderName, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use kbot_api::agent::InitramfsStored;
use sha2::{Digest, Sha256};

use crate::auth::AgentAuth;
use crate::error::{Error, Result};
use crate::jobs::handlers::check_leased;
use crate::state::AppState;

/// Where an archive lives in the artifact store.
fn object_key(sha256: &str) -> String {
    format!("initramfs/{sha256}.cpio")
}

/// Whether `s` is a SHA-256 as kbot writes it: 64 lowercase hex digits.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `PUT /api/v1/jobs/{id}/initramfs`: the initramfs the leased job booted.
#[utoipa::path(
    put,
    operation_id = "upload_job_initramfs",
    path = "/api/v1/jobs/{id}/initramfs",
    tag = "agent",
    params(("id" = i64, Path, description = "The job id, `job_id` of the leased job")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 200, description = "Stored under its SHA-256", body = InitramfsStored),
        crate::error::UploadErrors,
    ),
    security(("agent_token" = [])),
)]
pub async fn upload(
    State(state): State<AppState>,
    agent: AgentAuth,
    Path(job_id): Path<i64>,
    body: Bytes,
) -> Result<Json<InitramfsStored>> {
    // Only the lease holder's bytes reach the store.
    let mut conn = state.db.read().acquire().await?;
    check_leased(&mut conn, job_id, agent.record.id).await?;
    drop(conn);
    if body.is_empty() {
        return Err(Error::BadRequest("the initramfs is empty".into()));
    }
    let stored = InitramfsStored {
        sha256: hex::encode(Sha256::digest(&body)),
        bytes: i64::try_from(body.len()).unwrap_or(i64::MAX),
    };
    // The key is the content's digest: storing it again writes the same bytes.
    state
        .artifacts
        .put_bytes(&object_key(&stored.sha256), body)
        .await?;
    tracing::info!(job_id, sha256 = %stored.sha256, bytes = stored.bytes, "initramfs stored");
    Ok(Json(stored))
}

/// `GET /api/v1/initramfs/{sha256}`: a stored initramfs.
#[utoipa::path(
    get,
    operation_id = "get_initramfs",
    path = "/api/v1/initramfs/{sha256}",
    tag = "runs",
    params(("sha256" = String, Path, description = "The archive's SHA-256, lowercase hex")),
    responses(
        (status = 200, description = "The newc cpio archive", content_type = "application/octet-stream"),
        crate::error::QueryErrors,
    ),
)]
pub async fn download(
    State(state): State<AppState>,
    Path(sha256): Path<String>,
) -> Result<impl IntoResponse> {
    if !is_sha256(&sha256) {
        return Err(Error::BadRequest(
            "an initramfs is named by its SHA-256: 64 lowercase hex digits".into(),
        ));
    }
    let bytes = match state.artifacts.get_bytes(&object_key(&sha256)).await {
        Ok(b) => b,
        Err(Error::ArtifactStore {
            source: object_store::Error::NotFound { .. },
            ..
        }) => return Err(Error::not_found("initramfs", &sha256)),
        Err(e) => return Err(e),
    };
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (
                HeaderName::from_static(kbot_api::builds::SHA256_HEADER),
                sha256,
            ),
        ],
        bytes,
    ))
}
