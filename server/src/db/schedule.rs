//! Rows the robot looks at on an interval (a watched branch, a mailing
//! list's archive): an active row is due once its `next_check_at` has
//! passed, and one replica takes each look by moving `next_check_at` an
//! interval on with a conditional `UPDATE`; a replica that read the row
//! before sees it moved and leaves it. A removed row is no longer looked
//! at and keeps its history: each row has an event log the owner writes.

use std::fmt::Display;

use kbot_api::watches::SourceState;
use kbot_core::text::{head, without_credentials};
use sqlx::any::AnyRow;

use super::{Db, Tx};
use crate::error::{Error, Result};
use crate::time::now_ms;

/// Longest event detail kept (git's stderr can be long).
const MAX_EVENT_DETAIL_BYTES: usize = 8192;

/// The table of an owner's scheduled rows (its columns `id`, `state` as a
/// [`SourceState`], `next_check_at` and `interval_secs`), how the owner
/// reads a row (one, all or the due ones, with the owner's `SELECT`), and
/// the rows' event log (columns `at`, `kind`, `detail` and the row's id).
pub struct Schedule {
    pub table: &'static str,
    /// The owner's `SELECT` of its rows, naming the table as `alias`.
    pub select: &'static str,
    pub alias: &'static str,
    pub events: EventLog,
}

/// A scheduled table's event log: its table and its column naming the row.
pub struct EventLog {
    pub table: &'static str,
    pub row: &'static str,
}

impl Schedule {
    /// Row `id`; `what` names it in the not-found error.
    pub async fn get<R>(&self, db: &Db, id: i64, what: &'static str) -> Result<R>
    where
        R: for<'r> sqlx::FromRow<'r, AnyRow> + Send + Unpin,
    {
        let Schedule { select, alias, .. } = self;
        sqlx::query_as::<_, R>(&format!("{select} WHERE {alias}.id = $1"))
            .bind(id)
            .fetch_optional(db.read())
            .await?
            .ok_or_else(|| Error::not_found(what, id))
    }

    /// Every row, the oldest first.
    pub async fn all<R>(&self, db: &Db) -> Result<Vec<R>>
    where
        R: for<'r> sqlx::FromRow<'r, AnyRow> + Send + Unpin,
    {
        let Schedule { select, alias, .. } = self;
        Ok(
            sqlx::query_as::<_, R>(&format!("{select} ORDER BY {alias}.id"))
                .fetch_all(db.read())
                .await?,
        )
    }

    /// The active rows due at `now`, the longest-waiting first.
    pub async fn due<R>(&self, db: &Db, now: i64) -> Result<Vec<R>>
    where
        R: for<'r> sqlx::FromRow<'r, AnyRow> + Send + Unpin,
    {
        let Schedule { select, alias, .. } = self;
        Ok(sqlx::query_as::<_, R>(&format!(
            "{select} WHERE {alias}.state = $1 AND {alias}.next_check_at <= $2 \
             ORDER BY {alias}.next_check_at"
        ))
        .bind(SourceState::Active.as_str())
        .bind(now)
        .fetch_all(db.read())
        .await?)
    }

    /// Takes the look at row `id`, read as due at `due_at` every
    /// `interval_secs`: moves its next look an interval on, unless another
    /// replica did first.
    pub async fn claim(
        &self,
        db: &Db,
        id: i64,
        due_at: i64,
        interval_secs: i64,
        now: i64,
    ) -> Result<bool> {
        let mut tx = db.begin_relaxed().await?;
        let done = sqlx::query(&format!(
            "UPDATE {} SET next_check_at = $1 WHERE id = $2 AND next_check_at = $3 \
             AND state = $4",
            self.table
        ))
        .bind(now + interval_secs * 1000)
        .bind(id)
        .bind(due_at)
        .bind(SourceState::Active.as_str())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// Makes row `id` due now.
    pub async fn poke(&self, db: &Db, id: i64) -> Result<()> {
        sqlx::query(&format!(
            "UPDATE {} SET next_check_at = $1 WHERE id = $2",
            self.table
        ))
        .bind(now_ms())
        .bind(id)
        .execute(db.write())
        .await?;
        Ok(())
    }

    /// Stops looking at row `id`, in the caller's transaction; false when
    /// it was removed before.
    pub async fn remove(&self, tx: &mut Tx, id: i64) -> Result<bool> {
        let done = sqlx::query(&format!(
            "UPDATE {} SET state = $1 WHERE id = $2 AND state = $3",
            self.table
        ))
        .bind(SourceState::Removed.as_str())
        .bind(id)
        .bind(SourceState::Active.as_str())
        .execute(&mut **tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Logs what row `id` did or saw; the detail without credentials (it
    /// may quote a URL) and cut to a bound.
    pub async fn event(&self, tx: &mut Tx, id: i64, kind: &str, detail: &str) -> Result<()> {
        let EventLog { table, row } = self.events;
        sqlx::query(&format!(
            "INSERT INTO {table} ({row}, at, kind, detail) VALUES ($1, $2, $3, $4)"
        ))
        .bind(id)
        .bind(now_ms())
        .bind(kind)
        .bind(head(&without_credentials(detail), MAX_EVENT_DETAIL_BYTES).to_owned())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Row `id`'s newest `limit` events, oldest first, as `(at, kind,
    /// detail)`.
    pub async fn events<K>(&self, db: &Db, id: i64, limit: i64) -> Result<Vec<(i64, K, String)>>
    where
        K: TryFrom<String>,
        K::Error: Display,
    {
        let EventLog { table, row } = self.events;
        let rows: Vec<(i64, String, String)> = sqlx::query_as(&format!(
            "SELECT at, kind, detail FROM {table} WHERE {row} = $1 ORDER BY id DESC LIMIT $2"
        ))
        .bind(id)
        .bind(limit)
        .fetch_all(db.read())
        .await?;
        let mut events = rows
            .into_iter()
            .map(|(at, kind, detail)| {
                let kind = K::try_from(kind).map_err(|e| anyhow::anyhow!("{e}"))?;
                // Events written before their detail was cut may hold URLs whole.
                Ok((at, kind, without_credentials(&detail)))
            })
            .collect::<Result<Vec<_>>>()?;
        events.reverse();
        Ok(events)
    }
}
