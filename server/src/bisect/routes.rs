//! `/api/v1/bisections...`: list, show, cancel. Reads are open; cancel
//! needs a user token.

use axum::extract::{Path, Query, State};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::access::Reader;
use crate::auth::UserAuth;
use crate::error::Result;
use crate::state::AppState;
use kbot_api::bisections::{BisectionDetail, BisectionView};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// At most this many (default 50).
    pub limit: Option<u32>,
}

/// `GET /api/v1/bisections?limit=N`, newest first.
#[utoipa::path(
    get,
    operation_id = "list_bisections",
    path = "/api/v1/bisections",
    tag = "bisections",
    params(ListQuery),
    responses(
        (status = 200, description = "Bisections, newest first", body = Vec<BisectionView>),
        crate::error::PagedListErrors,
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    reader: Reader,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<BisectionView>>> {
    Ok(Json(
        super::views::list(&state, q.limit.unwrap_or(50), reader).await?,
    ))
}

/// `GET /api/v1/bisections/{id}`: the bisection and its steps.
#[utoipa::path(
    get,
    operation_id = "get_bisection",
    path = "/api/v1/bisections/{id}",
    tag = "bisections",
    params(("id" = i64, Path, description = "The bisection id")),
    responses(
        (status = 200, description = "The bisection and the commits it tested", body = BisectionDetail),
        crate::error::LookupErrors,
    ),
)]
pub async fn show(
    State(state): State<AppState>,
    reader: Reader,
    Path(id): Path<i64>,
) -> Result<Json<BisectionDetail>> {
    Ok(Json(super::views::detail(&state, id, reader).await?))
}

/// `POST /api/v1/bisections/{id}/cancel`.
#[utoipa::path(
    post,
    operation_id = "cancel_bisection",
    path = "/api/v1/bisections/{id}/cancel",
    tag = "bisections",
    params(("id" = i64, Path, description = "The bisection id")),
    responses(
        (status = 200, description = "The bisection, cancelled with its queued runs", body = BisectionView),
        crate::error::ActionErrors,
    ),
    security(("user_token" = [])),
)]
pub async fn cancel(
    State(state): State<AppState>,
    user: UserAuth,
    Path(id): Path<i64>,
) -> Result<Json<BisectionView>> {
    let b = super::cancel(&state, id, &user.user_name).await?;
    Ok(Json(super::views::view(&state, &b, Reader::User).await?))
}
