//! SQL of the messages a list's archive held.

use super::SeriesState;
use crate::db::{Db, Tx};
use crate::error::{Error, Result};
use crate::mail::recipients::Mailboxes;
use crate::time::now_ms;

/// A message to keep.
pub struct NewMessage<'a> {
    pub list_id: i64,
    pub message_id: &'a str,
    pub in_reply_to: Option<&'a str>,
    pub references: &'a [String],
    pub subject: &'a str,
    pub from_name: &'a str,
    pub from_address: &'a str,
    /// To and Cc.
    pub recipients: Mailboxes,
    pub date_ms: i64,
    pub is_patch: bool,
    pub has_diff: bool,
    pub base_commit: Option<&'a str>,
    /// `prerequisite-patch-id:` values, in order.
    pub prerequisites: &'a [String],
    pub change_id: Option<&'a str>,
    pub raw: &'a [u8],
    pub origin: &'a str,
}

/// Keeps a message; `false` when the list has it already (archives may
/// carry a message twice; the first copy wins).
pub async fn insert_message(tx: &mut Tx, m: &NewMessage<'_>) -> Result<bool> {
    let id: Option<i64> = sqlx::query_scalar(
        "INSERT INTO list_messages (list_id, message_id, in_reply_to, refs, subject, from_name, \
             from_address, recipients, date_ms, is_patch, has_diff, base_commit, raw, origin, \
             read_at, prerequisites, change_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) \
         ON CONFLICT (list_id, message_id) DO NOTHING RETURNING id",
    )
    .bind(m.list_id)
    .bind(m.message_id)
    .bind(m.in_reply_to)
    .bind(m.references.join("\n"))
    .bind(m.subject)
    .bind(m.from_name)
    .bind(m.from_address)
    .bind(m.recipients.stored())
    .bind(m.date_ms)
    .bind(i64::from(m.is_patch))
    .bind(i64::from(m.has_diff))
    .bind(m.base_commit)
    .bind(m.raw.to_vec())
    .bind(m.origin)
    .bind(now_ms())
    .bind(m.prerequisites.join("\n"))
    .bind(m.change_id)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(id.is_some())
}

/// What series assembly reads of a stored message.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MessageMetaRow {
    pub message_id: String,
    pub in_reply_to: Option<String>,
    pub refs: String,
    pub subject: String,
    pub from_name: String,
    pub from_address: String,
    pub date_ms: i64,
    pub has_diff: i64,
    pub base_commit: Option<String>,
    /// `prerequisite-patch-id:` values, one a line.
    pub prerequisites: String,
    pub change_id: Option<String>,
}

/// Patch mails of the list not yet placed in a series that left `waiting`,
/// read after `since` (older ones cannot complete a series any more).
pub async fn open_patch_messages(db: &Db, list_id: i64, since: i64) -> Result<Vec<MessageMetaRow>> {
    Ok(sqlx::query_as::<_, MessageMetaRow>(
        "SELECT m.message_id, m.in_reply_to, m.refs, m.subject, m.from_name, m.from_address, \
             m.date_ms, m.has_diff, m.base_commit, m.prerequisites, m.change_id \
         FROM list_messages m WHERE m.list_id = $1 AND m.is_patch = 1 AND m.read_at >= $2 \
         AND NOT EXISTS (SELECT 1 FROM series_parts p JOIN series s ON s.id = p.series_id \
                         WHERE p.message_id = m.message_id AND s.list_id = m.list_id \
                         AND s.state <> $3) \
         ORDER BY m.date_ms, m.id",
    )
    .bind(list_id)
    .bind(since)
    .bind(SeriesState::Waiting.as_str())
    .fetch_all(db.read())
    .await?)
}

/// One stored message of a list, with its raw text.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MessageRow {
    pub message_id: String,
    pub refs: String,
    pub subject: String,
    pub from_name: String,
    pub from_address: String,
    #[sqlx(try_from = "String")]
    pub recipients: Mailboxes,
    pub raw: Vec<u8>,
}

pub async fn message(db: &Db, list_id: i64, message_id: &str) -> Result<MessageRow> {
    sqlx::query_as::<_, MessageRow>(
        "SELECT message_id, refs, subject, from_name, from_address, recipients, raw \
             FROM list_messages WHERE list_id = $1 AND message_id = $2",
    )
    .bind(list_id)
    .bind(message_id)
    .fetch_optional(db.read())
    .await?
    .ok_or_else(|| Error::not_found("message", message_id))
}

/// The size of a stored message's raw text, in bytes.
pub async fn message_size(db: &Db, list_id: i64, message_id: &str) -> Result<i64> {
    sqlx::query_scalar::<_, i64>(
        "SELECT CAST(length(raw) AS BIGINT) FROM list_messages \
         WHERE list_id = $1 AND message_id = $2",
    )
    .bind(list_id)
    .bind(message_id)
    .fetch_optional(db.read())
    .await?
    .ok_or_else(|| Error::not_found("message", message_id))
}
