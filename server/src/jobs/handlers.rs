//! The agent endpoints on a leased job: heartbeat, events. (The lease
//! itself is [`crate::scheduler::routes`], result upload is in
//! [`super::results`].)

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use kbot_api::agent::{EventRequest, FailureKind, HeartbeatResponse, JobState};
use sqlx::AnyConnection;

use crate::agents;
use crate::auth::AgentAuth;
use crate::db::{join_writes, Db, Tx};
use crate::error::{ApiJson, Error, Result};
use crate::jobs::{self, Event, ACTIVE_STATES_SQL};
use crate::state::AppState;
use crate::time::now_ms;
use crate::web::without_credentials;

/// `POST /api/v1/jobs/{id}/heartbeat`: extends the lease.
#[utoipa::path(
    post,
    operation_id = "heartbeat_job",
    path = "/api/v1/jobs/{id}/heartbeat",
    tag = "agent",
    params(("id" = i64, Path, description = "The job id, `job_id` of the leased job")),
    responses(
        (status = 200, description = "The new lease expiry, and whether the job was cancelled", body = HeartbeatResponse),
        crate::error::ActionErrors,
    ),
    security(("agent_token" = [])),
)]
pub async fn heartbeat(
    State(state): State<AppState>,
    agent: AgentAuth,
    Path(job_id): Path<i64>,
) -> Result<Json<HeartbeatResponse>> {
    let now = now_ms();
    let expires = now + i64::from(state.config.lease_secs) * 1000;
    // The agent's last-seen time and the lease: one statement, one round
    // trip, committing on its own.
    let db = state.db.clone();
    let agent_id = agent.record.id;
    let rows = state
        .db
        .on_writer(async move {
            let mut conn = db.relaxed().acquire().await?;
            let sql = join_writes(
                &conn,
                &[
                    agents::SEEN_SQL,
                    &format!(
                        "UPDATE jobs SET lease_expires_at = $1, updated_at = $2 \
                         WHERE id = $3 AND lease_owner = $4 AND state IN {ACTIVE_STATES_SQL} \
                         RETURNING lease_expires_at"
                    ),
                ],
            );
            let rows: Vec<i64> = sqlx::query_scalar(&sql)
                .bind(now)
                .bind(agent_id)
                .bind(expires)
                .bind(now)
                .bind(job_id)
                .bind(agent_id)
                .fetch_all(&mut *conn)
                .await?;
            Ok(rows)
        })
        .await?;
    let response = match rows.first() {
        Some(&lease_expires_at) => HeartbeatResponse {
            lease_expires_at,
            cancelled: false,
        },
        None => {
            let mut conn = state.db.read().acquire().await?;
            let job = load_job_owner(&mut conn, job_id).await?;
            job.check_owner(&mut conn, job_id, agent.record.id).await?;
            if job.state != JobState::Cancelled {
                return Err(Error::LeaseLost(job_id));
            }
            HeartbeatResponse {
                lease_expires_at: now,
                cancelled: true,
            }
        }
    };
    Ok(Json(response))
}

/// `POST /api/v1/jobs/{id}/events`: a state change reported by the agent.
#[utoipa::path(
    post,
    operation_id = "report_job_event",
    path = "/api/v1/jobs/{id}/events",
    tag = "agent",
    params(("id" = i64, Path, description = "The job id, `job_id` of the leased job")),
    request_body = EventRequest,
    responses(
        (status = 204, description = "Recorded"),
        crate::error::EventErrors,
    ),
    security(("agent_token" = [])),
)]
pub async fn event(
    State(state): State<AppState>,
    agent: AgentAuth,
    Path(job_id): Path<i64>,
    ApiJson(req): ApiJson<EventRequest>,
) -> Result<StatusCode> {
    match req.state {
        JobState::Building
        | JobState::Booting
        | JobState::Running
        | JobState::Uploading
        | JobState::Failed => {}
        JobState::Finished => {
            return Err(Error::BadRequest(
                "finished is implied by the result upload (PUT /api/v1/jobs/{id}/result)".into(),
            ))
        }
        JobState::Queued | JobState::Leased | JobState::Cancelled => {
            return Err(Error::BadRequest(format!(
                "agents cannot report state {}",
                req.state.as_str()
            )))
        }
    }
    let db = state.db.clone();
    let agent_id = agent.record.id;
    let limit = state.config.max_events_per_job;
    state
        .db
        .on_writer(async move { record_agent_event(&db, job_id, agent_id, &req, limit).await })
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A progress or failure event, in its own transaction. Progress is
/// replaceable (the next event or the result supersedes it); a failure is a
/// verdict on the kernel and is flushed like a result. Progress stops being
/// recorded at `limit` events of the job (a broken or hostile agent would
/// otherwise grow `job_events` without bound); a failure always is.
async fn record_agent_event(
    db: &Db,
    job_id: i64,
    agent_id: i64,
    req: &EventRequest,
    limit: u32,
) -> Result<()> {
    // An agent quotes the URL it fetched the tree from, and git's words
    // about it: a private tree's credentials must not reach the pages.
    let detail = without_credentials(&req.detail);
    if req.state == JobState::Failed {
        let failure = req
            .failure
            .ok_or_else(|| Error::BadRequest("a failed event needs a failure kind".into()))?;
        let mut tx = db.begin().await?;
        fail(&mut tx, job_id, agent_id, failure, &detail).await?;
        tx.commit().await?;
    } else {
        let mut tx = db.begin_relaxed().await?;
        progress(&mut tx, (job_id, agent_id), req.state, &detail, limit).await?;
        tx.commit().await?;
    }
    Ok(())
}

/// A progress event of the lease's owner; past `limit` events of the job the
/// caller's transaction, state change included, is not committed.
async fn progress(
    tx: &mut Tx,
    (job_id, agent_id): (i64, i64),
    state: JobState,
    detail: &str,
    limit: u32,
) -> Result<()> {
    if !jobs::lifecycle::progress(tx, job_id, agent_id, state).await? {
        let job = load_job_owner(&mut *tx, job_id).await?;
        job.check_owner(&mut *tx, job_id, agent_id).await?;
        return Err(Error::LeaseLost(job_id));
    }
    let recorded: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_events WHERE job_id = $1")
        .bind(job_id)
        .fetch_one(&mut **tx)
        .await?;
    if recorded >= i64::from(limit) {
        return Err(Error::TooManyEvents { job_id, limit });
    }
    let event = Event {
        job_id,
        agent_id: Some(agent_id),
        state,
        failure: None,
        detail,
    };
    jobs::record_event(tx, event).await
}

/// A failure the agent reports. Machine trouble (`infrastructure`) is not the
/// kernel's fault: the job goes back to the queue while attempts remain.
/// Everything else fails the job for good.
async fn fail(
    tx: &mut Tx,
    job_id: i64,
    agent_id: i64,
    failure: FailureKind,
    detail: &str,
) -> Result<()> {
    let job = load_job_owner(&mut *tx, job_id).await?;
    job.check_owner(&mut *tx, job_id, agent_id).await?;
    if !job.state.is_active() {
        return Err(Error::LeaseLost(job_id));
    }
    if failure == FailureKind::Infrastructure {
        jobs::lifecycle::requeue_or_fail(tx, job_id, Some(agent_id), failure, detail).await?;
        return Ok(());
    }
    let held = (job_id, agent_id, job.submission_id);
    jobs::lifecycle::fail(tx, held, failure, detail).await
}

/// Who holds a job, for telling apart "not yours" from "no longer yours".
pub(crate) struct JobOwner {
    pub state: JobState,
    pub lease_owner: Option<i64>,
    pub submission_id: i64,
}

/// A [`JobOwner`] as stored: the `jobs` columns `state`, `lease_owner`,
/// `submission_id`.
#[derive(sqlx::FromRow)]
pub(crate) struct JobOwnerRow {
    #[sqlx(try_from = "String")]
    state: JobState,
    lease_owner: Option<i64>,
    submission_id: i64,
}

impl From<JobOwnerRow> for JobOwner {
    fn from(r: JobOwnerRow) -> JobOwner {
        JobOwner {
            state: r.state,
            lease_owner: r.lease_owner,
            submission_id: r.submission_id,
        }
    }
}

impl JobOwner {
    /// An agent may only touch a job leased to it. One that held the lease
    /// before (expired, re-queued, re-leased) is told it lost the lease;
    /// any other agent is refused outright.
    pub async fn check_owner(
        &self,
        conn: &mut AnyConnection,
        job_id: i64,
        agent_id: i64,
    ) -> Result<()> {
        if self.lease_owner == Some(agent_id) {
            return Ok(());
        }
        let held_before: Option<i64> = sqlx::query_scalar(
            "SELECT id FROM job_events WHERE job_id = $1 AND agent_id = $2 AND state = $3 LIMIT 1",
        )
        .bind(job_id)
        .bind(agent_id)
        .bind(JobState::Leased.as_str())
        .fetch_optional(&mut *conn)
        .await?;
        match held_before {
            Some(_) => Err(Error::LeaseLost(job_id)),
            None => Err(Error::Forbidden("the job is not leased to this agent")),
        }
    }
}

pub(crate) trait ActiveState {
    fn is_active(&self) -> bool;
}

impl ActiveState for JobState {
    fn is_active(&self) -> bool {
        matches!(
            *self,
            JobState::Leased
                | JobState::Building
                | JobState::Booting
                | JobState::Running
                | JobState::Uploading
        )
    }
}

pub(crate) async fn load_job_owner(conn: &mut AnyConnection, job_id: i64) -> Result<JobOwner> {
    sqlx::query_as::<_, JobOwnerRow>(
        "SELECT state, lease_owner, submission_id FROM jobs WHERE id = $1",
    )
    .bind(job_id)
    .fetch_optional(&mut *conn)
    .await?
    .map(JobOwner::from)
    .ok_or_else(|| Error::not_found("job", job_id))
}

/// Checks that `job_id` is leased to `agent_id` and still held: another
/// agent is refused, an agent that lost the lease is told so.
pub(crate) async fn check_leased(
    conn: &mut AnyConnection,
    job_id: i64,
    agent_id: i64,
) -> Result<()> {
    let job = load_job_owner(conn, job_id).await?;
    job.check_owner(conn, job_id, agent_id).await?;
    if job.state.is_active() {
        Ok(())
    } else {
        Err(Error::LeaseLost(job_id))
    }
}
