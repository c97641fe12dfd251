//! `/api/v1/watches...`: add, list, show, remove. Writes need a user token.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;

use super::types::{WatchCreate, WatchDetail, WatchView};
use crate::auth::UserAuth;
use crate::error::{ApiJson, Result};
use crate::state::AppState;

/// `POST /api/v1/watches` (201).
pub async fn create(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<WatchCreate>,
) -> Result<(StatusCode, Json<WatchView>)> {
    let view = super::create(&state, &user, req).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// `GET /api/v1/watches`.
pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<WatchView>>> {
    Ok(Json(super::list(&state).await?))
}

/// `GET /api/v1/watches/{id}`: the watch and its recent events.
pub async fn show(State(state): State<AppState>, Path(id): Path<i64>) -> Result<Json<WatchDetail>> {
    Ok(Json(super::detail(&state, id).await?))
}

/// `DELETE /api/v1/watches/{id}`: stops watching (history stays).
pub async fn remove(
    State(state): State<AppState>,
    user: UserAuth,
    Path(id): Path<i64>,
) -> Result<Json<WatchView>> {
    Ok(Json(super::remove(&state, &user, id).await?))
}
