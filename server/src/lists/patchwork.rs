//! Patchwork checks: a list with a patchwork instance (URL, project and an
//! API token) gets a check on every patch of every series kbot tests, where
//! netdev's and BPF's maintainers (and `b4 am --check`) look:
//!
//! - `pending` when the series is applied and its pair queued;
//! - `fail` when it does not apply or does not build;
//! - once tested: `warning` on the patch a regression was reported (or
//!   found again) on, `success` on the others; while a bisection inside the
//!   series runs, the checks stay `pending`.
//!
//! Each check links the series' page. What each patch should show is kept in
//! `patchwork_checks`; a sender posts what patchwork does not have yet
//! (`POST /api/1.2/patches/{id}/checks/`, context `kbot`), finding the
//! patch by its Message-ID (`GET /api/1.2/patches/?project=P&msgid=ID`),
//! and retries a failed post on the next passes, up to [`MAX_ATTEMPTS`].

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::store::{self, SeriesRow};
use crate::db::Tx;
use crate::error::Result;
use crate::state::AppState;
use crate::time::now_ms;

/// Posts tried per check before it is left `failed` in the table.
pub const MAX_ATTEMPTS: i64 = 8;

/// The checks' context, as patchwork shows it beside the state.
const CONTEXT: &str = "kbot";

const HTTP_TIMEOUT: Duration = Duration::from_secs(20);

kbot_api::wire_enum! {
    /// A check's state, patchwork's words.
    pub enum CheckState {
        Pending = "pending",
        Success = "success",
        Warning = "warning",
        Fail = "fail",
    }
}

/// Sets what every patch of `s` should show, in the caller's transaction;
/// nothing for a list without patchwork. `state_of` gives a part's state
/// and description from its index.
pub async fn set(
    state: &AppState,
    tx: &mut Tx,
    s: &SeriesRow,
    state_of: impl Fn(u32) -> (CheckState, String),
) -> Result<()> {
    let l = store::get(&state.db, s.list_id).await?;
    if l.patchwork_url.is_none() {
        return Ok(());
    }
    let now = now_ms();
    for part in store::parts(&state.db, s.id).await? {
        if part.index == 0 {
            continue;
        }
        let (check, description) = state_of(part.index);
        sqlx::query(
            "INSERT INTO patchwork_checks (series_id, message_id, state, description, attempts, \
                 updated_at) VALUES ($1, $2, $3, $4, 0, $5) \
             ON CONFLICT (series_id, message_id) DO UPDATE SET state = excluded.state, \
                 description = excluded.description, attempts = 0, updated_at = excluded.updated_at",
        )
        .bind(s.id)
        .bind(&part.message_id)
        .bind(check.as_str())
        .bind(&description)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Every patch of `s` in one state.
pub async fn set_all(
    state: &AppState,
    tx: &mut Tx,
    s: &SeriesRow,
    check: CheckState,
    description: &str,
) -> Result<()> {
    set(state, tx, s, |_| (check, description.to_owned())).await
}

/// Tested series whose checks are still pending: once no bisection of
/// their pair runs, `warning` on the parts a regression was reported on,
/// `success` on the rest.
pub async fn resolve(state: &AppState) -> Result<()> {
    let waiting: Vec<i64> = sqlx::query_scalar(
        "SELECT DISTINCT c.series_id FROM patchwork_checks c JOIN series s ON s.id = c.series_id \
         WHERE c.state = 'pending' AND s.state = 'tested'",
    )
    .fetch_all(state.db.read())
    .await?;
    for id in waiting {
        let s = store::series(&state.db, id).await?;
        let Some(submission) = s.submission_id else {
            continue;
        };
        let running: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM bisections WHERE origin_submission_id = $1 \
             AND finished_at IS NULL",
        )
        .bind(submission)
        .fetch_one(state.db.read())
        .await?;
        if running > 0 {
            continue;
        }
        let culprits = culprits(state, submission).await?;
        let parts = store::parts(&state.db, s.id).await?;
        let url = series_url(state, s.id);
        let mut tx = state.db.begin().await?;
        set(state, &mut tx, &s, |index| {
            let commit = parts
                .iter()
                .find(|p| p.index == index)
                .and_then(|p| p.commit.clone())
                .unwrap_or_default();
            if culprits.contains(&commit) {
                (
                    CheckState::Warning,
                    format!("performance regression reported on this patch: {url}"),
                )
            } else {
                (CheckState::Success, "no regression found".to_owned())
            }
        })
        .await?;
        tx.commit().await?;
    }
    Ok(())
}

/// The commits a regression of `submission` was reported on: bisected to
/// (reported, or the same change reported before), or the pair's head when
/// the pair itself was reported.
async fn culprits(state: &AppState, submission: i64) -> Result<Vec<String>> {
    let mut out: Vec<String> = sqlx::query_scalar(
        "SELECT c.sha FROM bisections b JOIN commits c ON c.id = b.first_bad_commit_id \
         WHERE b.origin_submission_id = $1 AND b.state IN ('reported', 'duplicate')",
    )
    .bind(submission)
    .fetch_all(state.db.read())
    .await?;
    let pair: Vec<String> = sqlx::query_scalar(
        "SELECT c.sha FROM report_outbox o JOIN submissions s ON s.id = o.submission_id \
         JOIN commits c ON c.id = s.head_commit_id \
         WHERE o.submission_id = $1 AND o.kind = 'regression'",
    )
    .bind(submission)
    .fetch_all(state.db.read())
    .await?;
    out.extend(pair);
    Ok(out)
}

fn series_url(state: &AppState, series_id: i64) -> String {
    format!("{}/series/{series_id}", state.config.mail.public_url)
}

#[derive(sqlx::FromRow)]
struct Due {
    id: i64,
    series_id: i64,
    message_id: String,
    #[sqlx(try_from = "String")]
    state: CheckState,
    description: String,
    patch_id: Option<i64>,
    url: String,
    project: String,
    token: String,
}

/// Posts every check patchwork does not have yet.
pub async fn send_due(state: &AppState) -> Result<()> {
    let due: Vec<Due> = sqlx::query_as(
        "SELECT c.id, c.series_id, c.message_id, c.state, c.description, c.patch_id, \
             l.patchwork_url AS url, l.patchwork_project AS project, \
             l.patchwork_token AS token \
         FROM patchwork_checks c JOIN series s ON s.id = c.series_id \
         JOIN lists l ON l.id = s.list_id \
         WHERE (c.sent_state IS NULL OR c.sent_state <> c.state) AND c.attempts < $1 \
         AND l.patchwork_url IS NOT NULL ORDER BY c.id LIMIT 100",
    )
    .bind(MAX_ATTEMPTS)
    .fetch_all(state.db.read())
    .await?;
    if due.is_empty() {
        return Ok(());
    }
    let http = reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .build()
        .map_err(anyhow::Error::from)?;
    for d in due {
        let outcome = post(&http, state, &d).await;
        let (sent, patch_id, error) = match outcome {
            Ok(patch_id) => (Some(d.state.as_str()), Some(patch_id), None),
            Err(why) => (None, d.patch_id, Some(why)),
        };
        if let Some(why) = &error {
            tracing::warn!(check = d.id, series = d.series_id, error = %why, "patchwork check not posted");
        }
        sqlx::query(
            "UPDATE patchwork_checks SET sent_state = COALESCE($1, sent_state), patch_id = $2, \
                 attempts = attempts + $3, last_error = $4, updated_at = $5 \
             WHERE id = $6 AND state = $7",
        )
        .bind(sent)
        .bind(patch_id)
        .bind(i64::from(error.is_some()))
        .bind(&error)
        .bind(now_ms())
        .bind(d.id)
        .bind(d.state.as_str())
        .execute(state.db.write())
        .await?;
    }
    Ok(())
}

#[derive(Deserialize)]
struct PatchRef {
    id: i64,
}

/// Finds the patch (once) and posts the check; the patch's id, or why not.
async fn post(
    http: &reqwest::Client,
    state: &AppState,
    d: &Due,
) -> std::result::Result<i64, String> {
    let api = format!("{}/api/1.2", d.url.trim_end_matches('/'));
    let auth = format!("Token {}", d.token);
    let patch_id = match d.patch_id {
        Some(id) => id,
        None => {
            let found: Vec<PatchRef> = http
                .get(format!("{api}/patches/"))
                .query(&[
                    ("project", d.project.as_str()),
                    ("msgid", d.message_id.as_str()),
                ])
                .header("Authorization", &auth)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .map_err(|e| format!("looking up <{}>: {e}", d.message_id))?
                .json()
                .await
                .map_err(|e| format!("looking up <{}>: {e}", d.message_id))?;
            found
                .first()
                .map(|p| p.id)
                .ok_or_else(|| format!("patchwork has no patch <{}>", d.message_id))?
        }
    };
    let body = json!({
        "state": d.state,
        "target_url": series_url(state, d.series_id),
        "context": CONTEXT,
        "description": d.description,
    });
    http.post(format!("{api}/patches/{patch_id}/checks/"))
        .header("Authorization", &auth)
        .json(&body)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("posting the check of patch {patch_id}: {e}"))?;
    Ok(patch_id)
}
