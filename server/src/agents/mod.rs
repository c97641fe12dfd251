//! Agents: enrolment, and the stored hardware fingerprint jobs are matched
//! and resolved against (the record itself, [`AgentRecord`], is in
//! [`crate::auth`], which authenticates agents as it); [`pages`]: the
//! agents' dashboard page.

pub mod pages;

use std::time::Instant;

use axum::extract::State;
use axum::Json;
use kbot_api::agent::{EnrollRequest, EnrollResponse};

use crate::access::pages::ClientAddr;
use crate::auth::{
    self, backend_str, limit, AgentRecord, AgentRow, EnrolmentBinding, AGENT_COLUMNS,
};
use crate::db::Tx;
use crate::error::{ApiJson, Error, Result};
use crate::state::AppState;
use crate::time::now_ms;

/// An agent seen (`$1` the time, `$2` the agent), for a statement batch of
/// the caller's (`db::join_writes`): a lease's heartbeat says the agent is
/// alive in the same round trip.
pub const SEEN_SQL: &str = "UPDATE agents SET last_seen_at = $1 WHERE id = $2";

/// An agent seen and busy (`$1` the time, `$2` the agent): it leased a job.
pub const BUSY_SQL: &str = "UPDATE agents SET state = 'busy', last_seen_at = $1 WHERE id = $2";

/// An agent seen, busy while `holds_job` (an SQL condition on the agent
/// `$2`) holds and idle otherwise (`$1` the time). The jobs know what an
/// agent holds: an agent leases its next job before the last one's result
/// is in, so a job leaving it or an empty poll does not make it idle by
/// itself.
pub fn state_now_sql(holds_job: &str) -> String {
    format!(
        "UPDATE agents SET state = CASE WHEN {holds_job} THEN 'busy' ELSE 'idle' END, \
         last_seen_at = $1 WHERE id = $2"
    )
}

/// `POST /api/v1/agents/enroll`: trades a one-time enrolment token for an
/// agent token. A token bound to a name (or tbox group) enrols that name
/// (group) only. Enrolling an existing name again (a reinstalled machine)
/// needs a token bound to that name: it keeps the agent's id and history,
/// updates its fingerprint and revokes its old tokens. An unbound token
/// cannot take over an enrolled name (409, and the token stays unused).
#[utoipa::path(
    post,
    operation_id = "enroll_agent",
    path = "/api/v1/agents/enroll",
    tag = "agent",
    request_body = EnrollRequest,
    responses(
        (status = 200, description = "The agent's id and its token", body = EnrollResponse),
        crate::error::EnrollErrors,
    ),
)]
pub async fn enroll(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    ApiJson(req): ApiJson<EnrollRequest>,
) -> Result<Json<EnrollResponse>> {
    validate(&req)?;
    let keys = limit::client_keys(client);
    if let Err(wait) = state.enrol_limiter.check(&keys, Instant::now()) {
        return Err(Error::TooManyAttempts(wait.as_secs().max(1)));
    }
    let mut tx = state.db.begin().await?;
    let allowed = match auth::consume_enrollment_token(&mut tx, &req.enrollment_token).await {
        Ok(binding) => check_binding(&mut tx, &binding, &req)
            .await
            .map(|()| binding),
        Err(err) => Err(err),
    };
    let binding = match allowed {
        Ok(binding) => binding,
        Err(err) => {
            if matches!(err, Error::Unauthorized) {
                state.enrol_limiter.record_failure(&keys, Instant::now());
            }
            tracing::info!(client = ?client, name = %req.name, %err, "enrolment refused");
            return Err(err);
        }
    };
    let agent_id = upsert_agent(&mut tx, &req, binding.disposable).await?;
    let agent_token = auth::issue_agent_token(&mut tx, agent_id, &req.name).await?;
    tx.commit().await?;
    // Its old tokens are revoked; this replica stops accepting them now.
    state.agent_tokens.forget_agent(agent_id);
    tracing::info!(agent_id, name = %req.name, tbox_group = %req.tbox_group,
        disposable = binding.disposable, "agent enrolled");
    Ok(Json(EnrollResponse {
        agent_id,
        agent_token,
    }))
}

/// Whether the token's binding lets `req` enrol: a bound name or group must
/// be the request's (else 401, as a wrong token), and an unbound name must
/// be new (else 409: enrolling it would revoke the real agent's token).
async fn check_binding(tx: &mut Tx, binding: &EnrolmentBinding, req: &EnrollRequest) -> Result<()> {
    let mismatch =
        |bound: &Option<String>, asked: &str| bound.as_deref().is_some_and(|b| b != asked);
    if mismatch(&binding.agent_name, &req.name) || mismatch(&binding.tbox_group, &req.tbox_group) {
        return Err(Error::Unauthorized);
    }
    if binding.agent_name.is_some() {
        return Ok(());
    }
    let existing: Option<i64> = sqlx::query_scalar("SELECT id FROM agents WHERE name = $1")
        .bind(&req.name)
        .fetch_optional(&mut **tx)
        .await?;
    match existing {
        Some(_) => Err(Error::Conflict(format!(
            "agent {:?} is already enrolled; enrolling it again needs a token bound to its name \
             (kbot-server enroll-token --name {})",
            req.name, req.name
        ))),
        None => Ok(()),
    }
}

fn validate(req: &EnrollRequest) -> Result<()> {
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 128
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if !name_ok(&req.name) {
        return Err(Error::BadRequest(format!(
            "agent name {:?} must be 1-128 characters of [A-Za-z0-9._-]",
            req.name
        )));
    }
    if !name_ok(&req.tbox_group) {
        return Err(Error::BadRequest(format!(
            "tbox_group {:?} must be 1-128 characters of [A-Za-z0-9._-]",
            req.tbox_group
        )));
    }
    if req.hardware.threads == 0 || req.hardware.memory_bytes == 0 {
        return Err(Error::BadRequest(
            "hardware must report at least one thread and some memory".into(),
        ));
    }
    Ok(())
}

fn to_i64(value: u64, what: &str) -> Result<i64> {
    i64::try_from(value).map_err(|_| Error::BadRequest(format!("{what} {value} is out of range")))
}

async fn upsert_agent(tx: &mut Tx, req: &EnrollRequest, disposable: bool) -> Result<i64> {
    let hw = &req.hardware;
    let host_json = match &req.host {
        Some(host) => Some(serde_json::to_string(host).map_err(anyhow::Error::from)?),
        None => None,
    };
    let now = now_ms();
    let row: (i64,) = sqlx::query_as(
        "INSERT INTO agents (name, tbox_group, backend, arch, cpu_model, sockets, cores, threads, \
             numa_nodes, memory_bytes, page_size, microcode, kernel, host_hardware, state, \
             enrolled_at, last_seen_at, disposable) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'idle', $15, $16, \
             $17) \
         ON CONFLICT (name) DO UPDATE SET tbox_group = excluded.tbox_group, \
             backend = excluded.backend, arch = excluded.arch, cpu_model = excluded.cpu_model, \
             sockets = excluded.sockets, cores = excluded.cores, threads = excluded.threads, \
             numa_nodes = excluded.numa_nodes, memory_bytes = excluded.memory_bytes, \
             page_size = excluded.page_size, microcode = excluded.microcode, \
             kernel = excluded.kernel, host_hardware = excluded.host_hardware, state = 'idle', enrolled_at = excluded.enrolled_at, \
             last_seen_at = excluded.last_seen_at, disposable = excluded.disposable \
         RETURNING id",
    )
    .bind(&req.name)
    .bind(&req.tbox_group)
    .bind(backend_str(req.backend))
    .bind(&hw.arch)
    .bind(&hw.cpu_model)
    .bind(i64::from(hw.sockets))
    .bind(i64::from(hw.cores))
    .bind(i64::from(hw.threads))
    .bind(i64::from(hw.numa_nodes))
    .bind(to_i64(hw.memory_bytes, "memory_bytes")?)
    .bind(to_i64(hw.page_size, "page_size")?)
    .bind(hw.microcode.as_deref())
    .bind(&hw.kernel)
    .bind(host_json)
    .bind(now)
    .bind(now)
    .bind(i64::from(disposable))
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.0)
}

/// Loads one agent.
pub async fn load(pool: &sqlx::AnyPool, agent_id: i64) -> Result<AgentRecord> {
    let row =
        sqlx::query_as::<_, AgentRow>(&format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1"))
            .bind(agent_id)
            .fetch_optional(pool)
            .await?
            .ok_or_else(|| Error::not_found("agent", agent_id))?;
    AgentRecord::try_from(row)
}
