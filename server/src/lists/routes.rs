//! `/api/v1/lists...` and `/api/v1/series...`: add, list, show, remove a
//! list, read it now, its commands; show a series. Writes need a user token.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;

use crate::auth::UserAuth;
use crate::error::{ApiJson, Result};
use crate::state::AppState;
use kbot_api::lists::{ListCommand, ListCreate, ListDetail, ListView, SeriesDetail, SeriesView};

/// `POST /api/v1/lists` (201).
#[utoipa::path(
    post,
    operation_id = "create_list",
    path = "/api/v1/lists",
    tag = "lists",
    request_body = ListCreate,
    responses(
        (status = 201, description = "Reading the list", body = ListView),
        crate::error::UpdateErrors,
    ),
    security(("user_token" = [])),
)]
pub async fn create(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<ListCreate>,
) -> Result<(StatusCode, Json<ListView>)> {
    let view = super::create(&state, &user, req).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// `GET /api/v1/lists`.
#[utoipa::path(
    get,
    operation_id = "list_lists",
    path = "/api/v1/lists",
    tag = "lists",
    responses(
        (status = 200, description = "Every list", body = Vec<ListView>),
        crate::error::ListErrors,
    ),
)]
pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<ListView>>> {
    Ok(Json(super::list(&state).await?))
}

/// `GET /api/v1/lists/{id}`: the list, its recent series and events.
#[utoipa::path(
    get,
    operation_id = "get_list",
    path = "/api/v1/lists/{id}",
    tag = "lists",
    params(("id" = i64, Path, description = "The list id")),
    responses(
        (status = 200, description = "The list, its series and events", body = ListDetail),
        crate::error::LookupErrors,
    ),
)]
pub async fn show(State(state): State<AppState>, Path(id): Path<i64>) -> Result<Json<ListDetail>> {
    Ok(Json(super::detail(&state, id).await?))
}

/// `GET /api/v1/lists/{id}/commands`: the `#kbot` commands read.
#[utoipa::path(
    get,
    operation_id = "list_commands",
    path = "/api/v1/lists/{id}/commands",
    tag = "lists",
    params(("id" = i64, Path, description = "The list id")),
    responses(
        (status = 200, description = "The commands, newest first", body = Vec<ListCommand>),
        crate::error::LookupErrors,
    ),
)]
pub async fn commands(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<Vec<ListCommand>>> {
    Ok(Json(super::commands(&state, id).await?))
}

/// `POST /api/v1/lists/{id}/read`: read the archive now.
#[utoipa::path(
    post,
    operation_id = "read_list",
    path = "/api/v1/lists/{id}/read",
    tag = "lists",
    params(("id" = i64, Path, description = "The list id")),
    responses(
        (status = 200, description = "The list, due now", body = ListView),
        crate::error::CancelErrors,
    ),
    security(("user_token" = [])),
)]
pub async fn read(
    State(state): State<AppState>,
    _user: UserAuth,
    Path(id): Path<i64>,
) -> Result<Json<ListView>> {
    Ok(Json(super::read_now(&state, id).await?))
}

/// `DELETE /api/v1/lists/{id}`: stops reading (history stays).
#[utoipa::path(
    delete,
    operation_id = "remove_list",
    path = "/api/v1/lists/{id}",
    tag = "lists",
    params(("id" = i64, Path, description = "The list id")),
    responses(
        (status = 200, description = "The list, removed (its history stays)", body = ListView),
        crate::error::CancelErrors,
    ),
    security(("user_token" = [])),
)]
pub async fn remove(
    State(state): State<AppState>,
    user: UserAuth,
    Path(id): Path<i64>,
) -> Result<Json<ListView>> {
    Ok(Json(super::remove(&state, &user, id).await?))
}

/// `GET /api/v1/series`: every list's recent series, newest first.
#[utoipa::path(
    get,
    operation_id = "list_series",
    path = "/api/v1/series",
    tag = "lists",
    responses(
        (status = 200, description = "Recent series", body = Vec<SeriesView>),
        crate::error::ListErrors,
    ),
)]
pub async fn series_list(State(state): State<AppState>) -> Result<Json<Vec<SeriesView>>> {
    Ok(Json(super::all_series(&state).await?))
}

/// `GET /api/v1/series/{id}`: a series and its parts.
#[utoipa::path(
    get,
    operation_id = "get_series",
    path = "/api/v1/series/{id}",
    tag = "lists",
    params(("id" = i64, Path, description = "The series id")),
    responses(
        (status = 200, description = "The series and its parts", body = SeriesDetail),
        crate::error::LookupErrors,
    ),
)]
pub async fn series_show(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<SeriesDetail>> {
    Ok(Json(super::series_detail(&state, id).await?))
}
