//! `/api/v1/submissions...`: submit, list, follow, cancel, results. Writes
//! need a user token; reads are open, like the dashboard.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::UserAuth;
use crate::error::{ApiJson, Result};
use crate::state::AppState;
use crate::web::paging::Keyset;
use kbot_api::submissions::{
    ComparisonView, EventView, SubmissionDetail, SubmissionResults, SubmissionView, SubmitRequest,
};

/// `POST /api/v1/submissions` (201).
#[utoipa::path(
    post,
    operation_id = "create_submission",
    path = "/api/v1/submissions",
    tag = "submissions",
    request_body = SubmitRequest,
    responses(
        (status = 201, description = "Queued: one job per atomic job, commit and run", body = SubmissionView),
        crate::error::SubmitErrors,
    ),
    security(("user_token" = [])),
)]
pub async fn create(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<SubmitRequest>,
) -> Result<(StatusCode, Json<SubmissionView>)> {
    let view = super::submit(&state, &user, req).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// `GET /api/v1/submissions?limit=N&before=ID`, newest first.
#[utoipa::path(
    get,
    operation_id = "list_submissions",
    path = "/api/v1/submissions",
    tag = "submissions",
    params(Keyset),
    responses(
        (status = 200, description = "Submissions, newest first", body = Vec<SubmissionView>),
        crate::error::PagedListErrors,
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<Keyset>,
) -> Result<Json<Vec<SubmissionView>>> {
    let list = super::list_submissions(&state.db, q.limit(), q.before).await?;
    Ok(Json(list))
}

/// `GET /api/v1/submissions/{id}`: the submission, its job file, atomic jobs and jobs.
#[utoipa::path(
    get,
    operation_id = "get_submission",
    path = "/api/v1/submissions/{id}",
    tag = "submissions",
    params(("id" = i64, Path, description = "The submission id")),
    responses(
        (status = 200, description = "The submission, its job file, atomic jobs and jobs", body = SubmissionDetail),
        crate::error::LookupErrors,
    ),
)]
pub async fn show(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<SubmissionDetail>> {
    Ok(Json(super::detail(&state, id).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Only events with a larger id (what `follow` saw last).
    #[serde(default)]
    pub after: i64,
    /// At most this many (default 1000).
    pub limit: Option<u32>,
}

/// `GET /api/v1/submissions/{id}/events?after=ID`, oldest first.
#[utoipa::path(
    get,
    operation_id = "list_submission_events",
    path = "/api/v1/submissions/{id}/events",
    tag = "submissions",
    params(("id" = i64, Path, description = "The submission id"), EventsQuery),
    responses(
        (status = 200, description = "Job events, oldest first", body = Vec<EventView>),
        crate::error::QueryErrors,
    ),
)]
pub async fn events(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    Query(q): Query<EventsQuery>,
) -> Result<Json<Vec<EventView>>> {
    super::get_submission(&state.db, id).await?;
    let events = super::events(&state.db, id, q.after, q.limit.unwrap_or(1000)).await?;
    Ok(Json(events))
}

/// `POST /api/v1/submissions/{id}/cancel`.
#[utoipa::path(
    post,
    operation_id = "cancel_submission",
    path = "/api/v1/submissions/{id}/cancel",
    tag = "submissions",
    params(("id" = i64, Path, description = "The submission id")),
    responses(
        (status = 200, description = "The submission, its unfinished jobs cancelled", body = SubmissionView),
        crate::error::CancelErrors,
    ),
    security(("user_token" = [])),
)]
pub async fn cancel(
    State(state): State<AppState>,
    user: UserAuth,
    Path(id): Path<i64>,
) -> Result<Json<SubmissionView>> {
    Ok(Json(super::cancel(&state, &user, id).await?))
}

/// `GET /api/v1/submissions/{id}/kcidb`: the pair as a KernelCI KCIDB v5.3
/// I/O document (checkouts, builds, tests with their numbers).
#[utoipa::path(
    get,
    operation_id = "get_submission_kcidb",
    path = "/api/v1/submissions/{id}/kcidb",
    tag = "submissions",
    params(("id" = i64, Path, description = "The submission id")),
    responses(
        (status = 200, description = "A KCIDB v5.3 I/O document", body = Object),
        crate::error::LookupErrors,
    ),
)]
pub async fn kcidb(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<kbot_core::kcidb::Document>> {
    Ok(Json(
        super::kcidb::document(&state.db, id, &state.config.mail).await?,
    ))
}

/// `GET /api/v1/submissions/{id}/results`: per-run metrics and comparisons.
#[utoipa::path(
    get,
    operation_id = "get_submission_results",
    path = "/api/v1/submissions/{id}/results",
    tag = "submissions",
    params(("id" = i64, Path, description = "The submission id")),
    responses(
        (status = 200, description = "Per-run metrics and per-metric comparisons", body = SubmissionResults),
        crate::error::LookupErrors,
    ),
)]
pub async fn results(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<SubmissionResults>> {
    Ok(Json(super::results(&state, id).await?))
}

/// `GET /api/v1/submissions/{id}/comparisons`.
#[utoipa::path(
    get,
    operation_id = "list_submission_comparisons",
    path = "/api/v1/submissions/{id}/comparisons",
    tag = "submissions",
    params(("id" = i64, Path, description = "The submission id")),
    responses(
        (status = 200, description = "Per-metric comparisons: verdict, means, change", body = Vec<ComparisonView>),
        crate::error::LookupErrors,
    ),
)]
pub async fn comparisons(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<Vec<ComparisonView>>> {
    super::get_submission(&state.db, id).await?;
    Ok(Json(super::comparisons(&state.db, id).await?))
}
