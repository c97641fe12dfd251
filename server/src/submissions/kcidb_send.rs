//! Sending finished pairs to KCIDB: with `KBOT_KCIDB_URL` set, every
//! submission that is done is posted once, as the KCIDB v5 document
//! [`super::kcidb::document`] makes, to the KCIDB submission endpoint
//! (kcidb-ng's REST `POST /submit`, the origin's bearer token). A refusal
//! or an unreachable endpoint is tried again on the next pass, up to
//! [`MAX_ATTEMPTS`] times; the last refusal is kept on the submission.

use std::time::Duration;

use crate::error::Result;
use crate::state::AppState;
use crate::time::now_ms;
use crate::worker::{self, Pace, Woken, Worker};

/// Tries per submission before it is left alone (its last error kept).
pub const MAX_ATTEMPTS: i64 = 8;

/// One endpoint call's limit.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the sender looks for finished submissions.
const PASS_EVERY: Duration = Duration::from_secs(10);

/// The sender, when an endpoint is configured.
pub fn spawn_worker(state: AppState) -> Option<tokio::task::JoinHandle<()>> {
    state.config.kcidb.url.as_ref()?;
    let shutdown = state.shutdown.clone();
    Some(tokio::spawn(worker::run(
        KcidbSender(state),
        shutdown,
        Pace::After(PASS_EVERY),
    )))
}

struct KcidbSender(AppState);

impl Worker for KcidbSender {
    type Event = ();

    async fn event(&mut self) -> Option<()> {
        std::future::pending().await
    }

    async fn pass(&mut self, _: Woken<()>) {
        if let Err(e) = send_due(&self.0).await {
            tracing::warn!(error = %crate::error::error_chain(&e), "KCIDB pass failed");
        }
    }
}

/// Sends every finished submission not yet accepted; how many were.
pub async fn send_due(state: &AppState) -> Result<usize> {
    let Some(url) = state.config.kcidb.url.as_deref() else {
        return Ok(0);
    };
    let due: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM submissions WHERE state = 'done' AND kcidb_sent_at IS NULL \
         AND kcidb_attempts < $1 ORDER BY id LIMIT 50",
    )
    .bind(MAX_ATTEMPTS)
    .fetch_all(state.db.read())
    .await?;
    if due.is_empty() {
        return Ok(0);
    }
    let http = reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .build()
        .map_err(anyhow::Error::from)?;
    let mut sent = 0;
    for id in due {
        let doc = super::kcidb::document(&state.db, id, &state.config.mail).await?;
        let mut request = http.post(url).json(&doc);
        if let Some(token) = &state.config.kcidb.token {
            request = request.bearer_auth(token);
        }
        let error = match request.send().await {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => {
                let status = r.status();
                let body = r.text().await.unwrap_or_default();
                Some(format!(
                    "HTTP {status}: {}",
                    kbot_core::text::head(body.trim(), 500)
                ))
            }
            Err(e) => Some(e.to_string()),
        };
        match &error {
            None => {
                sent += 1;
                tracing::info!(submission = id, "KCIDB document sent");
            }
            Some(why) => tracing::warn!(submission = id, error = %why, "KCIDB document refused"),
        }
        sqlx::query(
            "UPDATE submissions SET kcidb_sent_at = $1, kcidb_attempts = kcidb_attempts + 1, \
                 kcidb_error = $2 WHERE id = $3",
        )
        .bind(error.is_none().then(now_ms))
        .bind(&error)
        .bind(id)
        .execute(state.db.write())
        .await?;
    }
    Ok(sent)
}
