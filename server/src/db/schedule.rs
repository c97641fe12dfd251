//! Rows the robot looks at on an interval (a watched branch, a mailing
//! list's archive): an active row is due once its `next_check_at` has
//! passed, and one replica takes each look by moving `next_check_at` an
//! interval on with a conditional `UPDATE`; a replica that read the row
//! before sees it moved and leaves it.

use sqlx::any::AnyRow;

use super::Db;
use crate::error::{Error, Result};
use crate::time::now_ms;

/// The table of an owner's scheduled rows (its columns `id`, `state`,
/// `next_check_at` and `interval_secs`) and how the owner reads a row: the
/// rows are read one, all or the due ones, with the owner's `SELECT`.
pub struct Schedule {
    pub table: &'static str,
    /// The owner's `SELECT` of its rows, naming the table as `alias`.
    pub select: &'static str,
    pub alias: &'static str,
    /// `state` of a row that is looked at.
    pub active: &'static str,
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
        .bind(self.active)
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
        .bind(self.active)
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
}
