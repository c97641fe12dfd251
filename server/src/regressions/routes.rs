//! `/api/v1/regressions`: the triage list, filtered as the dashboard's, and
//! a state change for a user token, for the CLI and scripts.

use axum::extract::{Path, Query, State};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::store::{self, Filter};
use crate::access::Reader;
use crate::auth::UserAuth;
use crate::error::{ApiJson, Result};
use crate::state::AppState;
use kbot_api::regressions::{RegressionRow, TriageRequest};

/// Regressions listed when the query names no limit, and the most it may.
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 500;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this repository's.
    pub repo: Option<String>,
    /// Only this tbox group's.
    pub tbox_group: Option<String>,
    /// Only this metric's.
    pub metric: Option<String>,
    /// Only those in this triage state (`new`, `confirmed`, `reported`,
    /// `fixed`, `invalid`, `wont_fix`, `duplicate`).
    pub state: Option<String>,
    /// At most this many (default 50, at most 500).
    pub limit: Option<u32>,
    /// Skip this many of the newest first (paging).
    pub offset: Option<u32>,
}

/// `GET /api/v1/regressions?repo=&tbox_group=&metric=&state=&limit=&offset=`,
/// newest first.
#[utoipa::path(
    get,
    operation_id = "list_regressions",
    path = "/api/v1/regressions",
    tag = "regressions",
    params(ListQuery),
    responses(
        (status = 200, description = "Regressions matching the filters, newest first", body = Vec<RegressionRow>),
        crate::error::PagedListErrors,
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    reader: Reader,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<RegressionRow>>> {
    let filter = Filter {
        repo: q.repo.unwrap_or_default(),
        tbox_group: q.tbox_group.unwrap_or_default(),
        metric: q.metric.unwrap_or_default(),
        state: q.state.unwrap_or_default(),
    };
    // A misspelt state would list nothing and look like an empty queue.
    if !filter.state.is_empty() {
        super::parse_state(&filter.state)?;
    }
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let offset = q.offset.unwrap_or(0);
    let rows = store::list(&state.db, &filter, limit.into(), offset.into()).await?;
    let rows = rows.into_iter().map(|r| super::for_reader(r, reader));
    Ok(Json(rows.collect()))
}

/// `POST /api/v1/regressions/{id}/state`: changes a regression's triage
/// state, recorded with the token's user and the note.
#[utoipa::path(
    post,
    operation_id = "triage_regression",
    path = "/api/v1/regressions/{id}/state",
    tag = "regressions",
    params(("id" = i64, Path, description = "The regression id")),
    request_body = TriageRequest,
    responses(
        (status = 200, description = "The regression in its new state", body = RegressionRow),
        crate::error::UpdateErrors,
    ),
    security(("user_token" = [])),
)]
pub async fn triage(
    State(state): State<AppState>,
    user: UserAuth,
    Path(id): Path<i64>,
    ApiJson(request): ApiJson<TriageRequest>,
) -> Result<Json<RegressionRow>> {
    store::set_state(&state.db, id, &user, request.state, &request.note).await?;
    Ok(Json(store::get(&state.db, id).await?))
}
