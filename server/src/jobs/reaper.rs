//! Takes jobs back from agents that stopped heartbeating.

use std::time::Duration;

use kbot_api::agent::FailureKind;

use crate::db::Db;
use crate::error::{error_chain, Result};
use crate::jobs::{self, ACTIVE_STATES_SQL};
use crate::state::AppState;
use crate::time::now_ms;

/// Expired leases handled per pass; the next pass takes the rest.
const BATCH: i64 = 200;

/// Re-queues (or fails, past the attempt limit) every job whose lease
/// expired before `now`. Returns how many jobs it took back.
pub async fn reap_expired(db: &Db, now: i64) -> Result<u64> {
    let rows: Vec<(i64, Option<i64>, i64)> = sqlx::query_as(&format!(
        "SELECT id, lease_owner, lease_expires_at FROM jobs \
         WHERE state IN {ACTIVE_STATES_SQL} AND lease_expires_at < $1 \
         ORDER BY lease_expires_at LIMIT $2"
    ))
    .bind(now)
    .bind(BATCH)
    .fetch_all(db.read())
    .await?;
    let mut reaped = 0;
    for (job_id, owner, expired_at) in rows {
        let mut tx = db.begin().await?;
        // A heartbeat may have landed since the select: re-check in the transaction.
        let still_expired: Option<i64> = sqlx::query_scalar(&format!(
            "SELECT id FROM jobs WHERE id = $1 AND state IN {ACTIVE_STATES_SQL} \
             AND lease_expires_at < $2"
        ))
        .bind(job_id)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        if still_expired.is_none() {
            continue;
        }
        let detail = format!("lease expired at {expired_at} without a heartbeat");
        let state = jobs::lifecycle::requeue_or_fail(
            &mut tx,
            job_id,
            owner,
            FailureKind::Infrastructure,
            &detail,
        )
        .await?;
        tx.commit().await?;
        tracing::warn!(job_id, agent_id = ?owner, new_state = state.as_str(), "lease expired");
        reaped += 1;
    }
    Ok(reaped)
}

/// Runs [`reap_expired`] every `reaper_interval_secs` until shutdown.
pub async fn run(state: AppState) {
    let period = Duration::from_secs(u64::from(state.config.reaper_interval_secs));
    let mut shutdown = state.shutdown.clone();
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.changed() => return,
        }
        match reap_expired(&state.db, now_ms()).await {
            Ok(0) => {}
            Ok(_) => state.wake_lessees(),
            Err(err) => tracing::error!(error = %error_chain(&err), "lease reaper failed"),
        }
    }
}
