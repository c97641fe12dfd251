//! `PUT /api/v1/jobs/{id}/result`: the outcome of one run, stored once.
//!
//! Idempotent: a run's result is keyed by its job id. A second upload of the
//! same run by the agent that stored it answers `stored: false` with the
//! first result's id and changes nothing. Big text goes to the artifact
//! directory before the transaction that references it commits; the kernel
//! profile, when the run has one, is a row of that transaction.

use axum::extract::{Path, State};
use axum::Json;
use kbot_api::agent::{JobState, ResultUpload, UploadResponse};
use sqlx::AnyConnection;

use crate::auth::AgentAuth;
use crate::db::{JsonText, Tx};
use crate::error::{ApiJson, Error, Result};
use crate::jobs::handlers::{ActiveState, JobOwner, JobOwnerRow};
use crate::jobs::{self, summaries};
use crate::profiles;
use crate::state::{AppState, JobDone};
use crate::time::now_ms;

/// `PUT /api/v1/jobs/{id}/result`: stores the result of one run; uploading
/// the same run again answers with the stored result's id.
#[utoipa::path(
    put,
    operation_id = "upload_job_result",
    path = "/api/v1/jobs/{id}/result",
    tag = "agent",
    params(("id" = i64, Path, description = "The job id, `job_id` of the leased job")),
    request_body = ResultUpload,
    responses(
        (status = 200, description = "Stored, or stored before (`stored` false)", body = UploadResponse),
        crate::error::UploadErrors,
    ),
    security(("agent_token" = [])),
)]
pub async fn upload(
    State(state): State<AppState>,
    agent: AgentAuth,
    Path(job_id): Path<i64>,
    ApiJson(upload): ApiJson<ResultUpload>,
) -> Result<Json<UploadResponse>> {
    validate(&upload)?;
    let job = {
        let mut conn = state.db.read().acquire().await?;
        let (job, stored) = upload_target(&mut conn, job_id).await?;
        if let Some((result_id, owner)) = stored {
            return already_stored(result_id, owner, agent.record.id).map(Json);
        }
        job.check_owner(&mut conn, job_id, agent.record.id).await?;
        job
    };
    if !job.state.is_active() {
        return match job.state {
            JobState::Cancelled => Err(Error::Conflict(format!(
                "job {job_id} was cancelled; its result is not stored"
            ))),
            _ => Err(Error::LeaseLost(job_id)),
        };
    }
    // Files first, then the rows that point at them.
    let paths = write_artifacts(&state, job_id, &upload).await?;
    let db = state.db.clone();
    let agent_id = agent.record.id;
    let submission_id = job.submission_id;
    let stored = state
        .db
        .on_writer(async move {
            let mut tx = db.begin().await?;
            let Some(result_id) = insert_result(&mut tx, job_id, agent_id, &upload, &paths).await?
            else {
                return Ok(None);
            };
            if let Some(profile) = &upload.profile {
                profiles::insert(&mut tx, result_id, profile).await?;
            }
            let atomic_job_id =
                jobs::lifecycle::finish(&mut tx, job_id, agent_id, submission_id).await?;
            summaries::add_run(&mut tx, job_id, &upload.metrics).await?;
            tx.commit().await?;
            Ok(Some((result_id, atomic_job_id)))
        })
        .await?;
    let Some((result_id, atomic_job_id)) = stored else {
        // Another upload of this run won the race.
        return existing_result(&state, job_id, agent.record.id)
            .await?
            .map(Json)
            .ok_or(Error::LeaseLost(job_id));
    };
    // Nobody listening is fine: the comparison worker also re-scans.
    let _ = state.job_done.send(JobDone {
        job_id,
        submission_id: job.submission_id,
        atomic_job_id,
    });
    Ok(Json(UploadResponse {
        result_id,
        stored: true,
    }))
}

/// Rejects what must never reach the statistics (the rules live in
/// kbot-core, where the agent checks them before it uploads).
pub fn validate(upload: &ResultUpload) -> Result<()> {
    upload.check().map_err(|err| match err {
        kbot_core::Error::TooManyMetrics { .. } => Error::PayloadTooLarge,
        kbot_core::Error::NonFiniteMetric { name } => Error::NonFiniteMetric(name),
        other => Error::BadRequest(other.to_string()),
    })
}

/// The job an upload is for, and the id and uploader of the result already
/// stored for it, if any; one read.
/// What [`upload_target`] reads.
#[derive(sqlx::FromRow)]
struct UploadTarget {
    #[sqlx(flatten)]
    job: JobOwnerRow,
    result_id: Option<i64>,
    result_agent: Option<i64>,
}

async fn upload_target(
    conn: &mut AnyConnection,
    job_id: i64,
) -> Result<(JobOwner, Option<(i64, Option<i64>)>)> {
    let row = sqlx::query_as::<_, UploadTarget>(
        "SELECT j.state, j.lease_owner, j.submission_id, r.id AS result_id, \
                r.agent_id AS result_agent \
         FROM jobs j LEFT JOIN results r ON r.job_id = j.id WHERE j.id = $1",
    )
    .bind(job_id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or_else(|| Error::not_found("job", job_id))?;
    let stored = row.result_id.map(|id| (id, row.result_agent));
    Ok((row.job.into(), stored))
}

/// The answer to a second upload of a stored run: its first result, if
/// this agent stored it.
fn already_stored(result_id: i64, owner: Option<i64>, agent_id: i64) -> Result<UploadResponse> {
    if owner != Some(agent_id) {
        return Err(Error::Forbidden(
            "the job's result was uploaded by another agent",
        ));
    }
    Ok(UploadResponse {
        result_id,
        stored: false,
    })
}

async fn existing_result(
    state: &AppState,
    job_id: i64,
    agent_id: i64,
) -> Result<Option<UploadResponse>> {
    let row: Option<(i64, Option<i64>)> =
        sqlx::query_as("SELECT id, agent_id FROM results WHERE job_id = $1")
            .bind(job_id)
            .fetch_optional(state.db.read())
            .await?;
    let Some((id, owner)) = row else {
        return Ok(None);
    };
    already_stored(id, owner, agent_id).map(Some)
}

struct ArtifactPaths {
    raw_output: String,
    console: Option<String>,
    kconfig: Option<String>,
}

async fn write_artifacts(
    state: &AppState,
    job_id: i64,
    upload: &ResultUpload,
) -> Result<ArtifactPaths> {
    let store = &state.artifacts;
    let dir = format!("results/{job_id}");
    let raw_output = format!("{dir}/output.txt");
    store.put(&raw_output, upload.raw_output.clone()).await?;
    let console = match &upload.console {
        Some(text) => {
            let path = format!("{dir}/console.txt");
            store.put(&path, text.clone()).await?;
            Some(path)
        }
        None => None,
    };
    let kconfig = match &upload.kconfig {
        Some(text) => {
            let path = format!("{dir}/kconfig");
            store.put(&path, text.clone()).await?;
            Some(path)
        }
        None => None,
    };
    Ok(ArtifactPaths {
        raw_output,
        console,
        kconfig,
    })
}

/// `None` when another upload of the run won the race.
async fn insert_result(
    tx: &mut Tx,
    job_id: i64,
    agent_id: i64,
    upload: &ResultUpload,
    paths: &ArtifactPaths,
) -> Result<Option<i64>> {
    // One JSON object per run (migration 0006 says why); `validate` has
    // refused the non-finite values JSON cannot carry.
    Ok(sqlx::query_scalar(
        "INSERT INTO results (job_id, agent_id, kernel_release, tuning, metrics, \
             raw_output_path, console_path, kconfig_path, started_at, finished_at, uploaded_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (job_id) DO NOTHING RETURNING id",
    )
    .bind(job_id)
    .bind(agent_id)
    .bind(&upload.kernel_release)
    .bind(JsonText(&upload.tuning))
    .bind(JsonText(&upload.metrics))
    .bind(&paths.raw_output)
    .bind(paths.console.as_deref())
    .bind(paths.kconfig.as_deref())
    .bind(upload.started_at)
    .bind(upload.finished_at)
    .bind(now_ms())
    .fetch_optional(&mut **tx)
    .await?)
}
