//! `/api/v1/bisections...`: list, show, cancel. Reads are open; cancel
//! needs a user token.

use axum::extract::{Path, Query, State};
use axum::Json;
use serde::Deserialize;

use super::types::{BisectionDetail, BisectionView};
use crate::auth::UserAuth;
use crate::error::Result;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    pub limit: Option<u32>,
}

/// `GET /api/v1/bisections?limit=N`, newest first.
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<BisectionView>>> {
    Ok(Json(
        super::views::list(&state, q.limit.unwrap_or(50)).await?,
    ))
}

/// `GET /api/v1/bisections/{id}`: the bisection and its steps.
pub async fn show(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<BisectionDetail>> {
    Ok(Json(super::views::detail(&state, id).await?))
}

/// `POST /api/v1/bisections/{id}/cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    user: UserAuth,
    Path(id): Path<i64>,
) -> Result<Json<BisectionView>> {
    let b = super::cancel(&state, id, &user.user_name).await?;
    Ok(Json(super::views::view(&state, &b).await?))
}
