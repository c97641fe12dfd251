//! A run's kernel profile as a user downloads it: the folded call stacks
//! (Brendan Gregg's format, one `frame;frame;... count` line per distinct
//! stack), for `flamegraph.pl`, inferno or a script.

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;

use crate::error::{Error, Result};
use crate::state::AppState;

/// `GET /api/v1/jobs/{id}/profile`: the folded stacks of a finished run.
#[utoipa::path(
    get,
    operation_id = "job_profile",
    path = "/api/v1/jobs/{id}/profile",
    tag = "runs",
    params(("id" = i64, Path, description = "The job id of a finished run")),
    responses(
        (status = 200, description = "Folded call stacks, root first; the sampling event in the `kbot-profile-event` header", content_type = "text/plain"),
        crate::error::LookupErrors,
    ),
)]
pub async fn folded(
    State(state): State<AppState>,
    Path(job_id): Path<i64>,
) -> Result<impl IntoResponse> {
    let (event, folded): (String, String) = sqlx::query_as(
        "SELECT p.event, p.folded FROM result_profiles p JOIN results r ON r.id = p.result_id \
         WHERE r.job_id = $1 ORDER BY r.id DESC LIMIT 1",
    )
    .bind(job_id)
    .fetch_optional(state.db.read())
    .await?
    .ok_or_else(|| Error::not_found("profile of job", job_id))?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
            (
                header::HeaderName::from_static("kbot-profile-event"),
                // An agent's word: only what a header value may carry.
                event.chars().filter(char::is_ascii_graphic).collect(),
            ),
        ],
        folded,
    ))
}
