//! Submissions that ended (done or cancelled) and whose origin is still to
//! be told (`submissions.dispatch_at`, migration 0029): the comparison
//! worker takes each once ([`hold`]), tells the feature that queued it,
//! and marks it told ([`told`]); a replica that dies meanwhile leaves the
//! hold to expire, and another tells it again (the features' handlers are
//! idempotent).

use super::Origin;
use crate::db::Db;
use crate::error::Result;

/// An ended submission due to be told to its origin.
#[derive(Debug, Clone, Copy, sqlx::FromRow)]
pub struct Ended {
    pub id: i64,
    #[sqlx(try_from = "String")]
    pub origin: Origin,
    pub dispatch_at: i64,
}

/// Up to `limit` ended submissions due at `now`, oldest first.
pub async fn due(db: &Db, now: i64, limit: i64) -> Result<Vec<Ended>> {
    Ok(sqlx::query_as(
        "SELECT id, origin, dispatch_at FROM submissions \
         WHERE dispatch_at IS NOT NULL AND dispatch_at <= $1 ORDER BY dispatch_at, id LIMIT $2",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(db.read())
    .await?)
}

/// Holds submission `id`, due at `seen`, until `until` (another replica
/// skips it meanwhile), unless another replica took or told it first.
pub async fn hold(db: &Db, id: i64, seen: i64, until: i64) -> Result<bool> {
    let mut tx = db.begin_relaxed().await?;
    let held =
        sqlx::query("UPDATE submissions SET dispatch_at = $1 WHERE id = $2 AND dispatch_at = $3")
            .bind(until)
            .bind(id)
            .bind(seen)
            .execute(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(held.rows_affected() == 1)
}

/// Its origin was told: nothing more is due.
pub async fn told(db: &Db, id: i64) -> Result<()> {
    let mut tx = db.begin_relaxed().await?;
    sqlx::query("UPDATE submissions SET dispatch_at = NULL WHERE id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}
