//! `/api/v1/watches...`: add, list, show, remove. Writes need a user token.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;

use crate::auth::UserAuth;
use crate::error::{ApiJson, Result};
use crate::state::AppState;
use kbot_api::watches::{WatchCreate, WatchDetail, WatchView};

/// `POST /api/v1/watches` (201).
#[utoipa::path(
    post,
    operation_id = "create_watch",
    path = "/api/v1/watches",
    tag = "watches",
    request_body = WatchCreate,
    responses(
        (status = 201, description = "Watching", body = WatchView),
        crate::error::UpdateErrors,
    ),
    security(("user_token" = [])),
)]
pub async fn create(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<WatchCreate>,
) -> Result<(StatusCode, Json<WatchView>)> {
    let view = super::create(&state, &user, req).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// `GET /api/v1/watches`.
#[utoipa::path(
    get,
    operation_id = "list_watches",
    path = "/api/v1/watches",
    tag = "watches",
    responses(
        (status = 200, description = "Every watch", body = Vec<WatchView>),
        crate::error::ListErrors,
    ),
)]
pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<WatchView>>> {
    Ok(Json(super::list(&state).await?))
}

/// `GET /api/v1/watches/{id}`: the watch and its recent events.
#[utoipa::path(
    get,
    operation_id = "get_watch",
    path = "/api/v1/watches/{id}",
    tag = "watches",
    params(("id" = i64, Path, description = "The watch id")),
    responses(
        (status = 200, description = "The watch and its recent events", body = WatchDetail),
        crate::error::LookupErrors,
    ),
)]
pub async fn show(State(state): State<AppState>, Path(id): Path<i64>) -> Result<Json<WatchDetail>> {
    Ok(Json(super::detail(&state, id).await?))
}

/// `DELETE /api/v1/watches/{id}`: stops watching (history stays).
#[utoipa::path(
    delete,
    operation_id = "remove_watch",
    path = "/api/v1/watches/{id}",
    tag = "watches",
    params(("id" = i64, Path, description = "The watch id")),
    responses(
        (status = 200, description = "The watch, removed (its history stays)", body = WatchView),
        crate::error::CancelErrors,
    ),
    security(("user_token" = [])),
)]
pub async fn remove(
    State(state): State<AppState>,
    user: UserAuth,
    Path(id): Path<i64>,
) -> Result<Json<WatchView>> {
    Ok(Json(super::remove(&state, &user, id).await?))
}
