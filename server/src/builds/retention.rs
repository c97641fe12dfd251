//! Built kernels are not kept forever (`KBOT_KEEP_BUILDS_DAYS`): a build
//! that ended before the cutoff and that no job has used since (no job of
//! it is running or changed after the cutoff) leaves the artifact store
//! with its files, and its build orders go with it, so that a job that
//! needs the kernel later has it ordered and built again. A build still
//! being built is never touched.

use crate::error::Result;
use crate::jobs::ACTIVE_STATES_SQL;
use crate::state::AppState;

/// How many builds one pass deletes at most (the next pass goes on).
const BATCH: i64 = 500;

/// Deletes the builds unused since `cutoff` (Unix ms); how many.
pub async fn prune(state: &AppState, cutoff: i64) -> Result<u64> {
    let stale: Vec<(i64, String)> = sqlx::query_as(&format!(
        "SELECT b.id, b.build_key FROM builds b \
         WHERE b.state <> 'building' AND b.updated_at < $1 \
           AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.build_id = b.id \
               AND (j.updated_at >= $1 OR j.state IN {ACTIVE_STATES_SQL})) \
         ORDER BY b.id LIMIT $2"
    ))
    .bind(cutoff)
    .bind(BATCH)
    .fetch_all(state.db.read())
    .await?;
    let mut pruned = 0;
    for (id, key) in stale {
        let objects: Vec<String> =
            sqlx::query_scalar("SELECT object_key FROM build_files WHERE build_id = $1")
                .bind(id)
                .fetch_all(state.db.read())
                .await?;
        // The row goes first: a claim meanwhile builds the kernel again
        // rather than download files about to go.
        let mut tx = state.db.begin().await?;
        sqlx::query("DELETE FROM build_orders WHERE build_key = $1")
            .bind(&key)
            .execute(&mut *tx)
            .await?;
        let gone = sqlx::query("DELETE FROM builds WHERE id = $1 AND updated_at < $2")
            .bind(id)
            .bind(cutoff)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        if gone == 0 {
            continue;
        }
        for object in &objects {
            state.artifacts.delete(object).await?;
        }
        pruned += 1;
    }
    Ok(pruned)
}
