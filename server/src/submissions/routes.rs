//! `/api/v1/submissions...`: submit, list, follow, cancel, results. Writes
//! need a user token; reads are open, like the dashboard.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;

use super::types::{
    ComparisonView, EventView, SubmissionDetail, SubmissionResults, SubmissionView, SubmitRequest,
};
use crate::auth::UserAuth;
use crate::error::{ApiJson, Result};
use crate::state::AppState;

/// `POST /api/v1/submissions` (201).
pub async fn create(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<SubmitRequest>,
) -> Result<(StatusCode, Json<SubmissionView>)> {
    let view = super::submit(&state, &user, req).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    pub limit: Option<u32>,
    /// Only submissions with a smaller id (paging, newest first).
    pub before: Option<i64>,
}

/// `GET /api/v1/submissions?limit=N&before=ID`, newest first.
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<SubmissionView>>> {
    let list = super::list_submissions(&state.db, q.limit.unwrap_or(50), q.before).await?;
    Ok(Json(list))
}

/// `GET /api/v1/submissions/{id}`: the submission, its job file, atomic jobs and jobs.
pub async fn show(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<SubmissionDetail>> {
    Ok(Json(super::detail(&state, id).await?))
}

#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    /// Only events with a larger id (what `follow` saw last).
    #[serde(default)]
    pub after: i64,
    pub limit: Option<u32>,
}

/// `GET /api/v1/submissions/{id}/events?after=ID`, oldest first.
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
pub async fn cancel(
    State(state): State<AppState>,
    user: UserAuth,
    Path(id): Path<i64>,
) -> Result<Json<SubmissionView>> {
    Ok(Json(super::cancel(&state, &user, id).await?))
}

/// `GET /api/v1/submissions/{id}/results`: per-run metrics and comparisons.
pub async fn results(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<SubmissionResults>> {
    Ok(Json(super::results(&state, id).await?))
}

/// `GET /api/v1/submissions/{id}/comparisons`.
pub async fn comparisons(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<Vec<ComparisonView>>> {
    super::get_submission(&state.db, id).await?;
    Ok(Json(super::comparisons(&state.db, id).await?))
}
