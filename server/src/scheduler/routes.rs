//! The agents' lease endpoint: `POST /api/v1/agents/lease`, a bounded
//! long-poll for at most one job.

use std::time::Duration;

use axum::extract::State;
use axum::Json;
use kbot_api::agent::{LeaseRequest, LeaseResponse};

use crate::auth::AgentAuth;
use crate::error::{ApiJson, Result};
use crate::state::AppState;

/// `POST /api/v1/agents/lease`: at most one job, waiting up to
/// `min(wait_secs, max_lease_wait_secs)` for one.
#[utoipa::path(
    post,
    operation_id = "lease_job",
    path = "/api/v1/agents/lease",
    tag = "agent",
    request_body = LeaseRequest,
    responses(
        (status = 200, description = "At most one job; `job` is null when none matched within the wait", body = LeaseResponse),
        crate::error::LeaseErrors,
    ),
    security(("agent_token" = [])),
)]
pub async fn lease(
    State(state): State<AppState>,
    agent: AgentAuth,
    ApiJson(req): ApiJson<LeaseRequest>,
) -> Result<Json<LeaseResponse>> {
    let wait = Duration::from_secs(u64::from(
        req.wait_secs.min(state.config.max_lease_wait_secs),
    ));
    let job = super::lease_with_wait(&state, &agent.record, wait, req.can_build).await?;
    if let Some(job) = &job {
        tracing::info!(job_id = job.job_id, agent = %agent.record.name, attempt = job.attempt, "job leased");
    }
    Ok(Json(LeaseResponse { job }))
}
