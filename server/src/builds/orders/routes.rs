//! The build-order endpoints: a builder leases an order and keeps it with
//! heartbeats; anyone lists them.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::Json;
use kbot_api::builds::{OrderHeartbeat, OrderLease, OrderLeaseResponse, OrderView};

use super::PlanFor;
use crate::auth::AgentAuth;
use crate::error::{ApiJson, Error, Result};
use crate::state::AppState;
use crate::web::paging::Keyset;

/// `POST /api/v1/builds/orders/lease`: a kernel to build, waiting up to
/// `min(wait_secs, max_lease_wait_secs)` for one.
#[utoipa::path(
    post,
    operation_id = "lease_build_order",
    path = "/api/v1/builds/orders/lease",
    tag = "agent",
    request_body = OrderLease,
    responses(
        (status = 200, description = "At most one order; `order` is null when none was queued within the wait", body = OrderLeaseResponse),
        crate::error::LeaseErrors,
    ),
    security(("agent_token" = [])),
)]
pub async fn lease(
    State(state): State<AppState>,
    agent: AgentAuth,
    ApiJson(req): ApiJson<OrderLease>,
) -> Result<Json<OrderLeaseResponse>> {
    if !matches!(req.arch.as_str(), "x86_64" | "arm64") {
        return Err(Error::BadRequest(format!(
            "arch {:?} is not a kernel ARCH kbot builds (x86_64, arm64)",
            req.arch
        )));
    }
    if req.plan {
        super::plan(&state.db, &req.arch, PlanFor::Builders).await?;
    }
    let wait = Duration::from_secs(u64::from(
        req.wait_secs.min(state.config.max_lease_wait_secs),
    ));
    let order = super::lease_with_wait(&state, agent.record.id, &req.arch, wait).await?;
    Ok(Json(OrderLeaseResponse { order }))
}

/// `POST /api/v1/builds/orders/{id}/heartbeat`: the builder still builds.
#[utoipa::path(
    post,
    operation_id = "build_order_heartbeat",
    path = "/api/v1/builds/orders/{id}/heartbeat",
    tag = "agent",
    params(("id" = i64, Path, description = "The order")),
    responses(
        (status = 200, description = "The lease, extended", body = OrderHeartbeat),
        crate::error::UpdateErrors,
    ),
    security(("agent_token" = [])),
)]
pub async fn heartbeat(
    State(state): State<AppState>,
    agent: AgentAuth,
    Path(id): Path<i64>,
) -> Result<Json<OrderHeartbeat>> {
    let lease_ms = i64::from(state.config.lease_secs) * 1000;
    let until = super::heartbeat(&state.db, id, agent.record.id, lease_ms).await?;
    Ok(Json(OrderHeartbeat {
        lease_expires_at: until,
    }))
}

/// `GET /api/v1/builds/orders?limit=N&before=ID`, newest first.
#[utoipa::path(
    get,
    operation_id = "list_build_orders",
    path = "/api/v1/builds/orders",
    tag = "builds",
    params(Keyset),
    responses(
        (status = 200, description = "Build orders, newest first", body = Vec<OrderView>),
        crate::error::PagedListErrors,
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<Keyset>,
) -> Result<Json<Vec<OrderView>>> {
    let mut conn = state.db.read().acquire().await?;
    let orders = super::list(&mut conn, q.limit(), q.before).await?;
    Ok(Json(orders))
}
