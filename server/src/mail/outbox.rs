//! The outbox table: queued reports, their claims by senders, every attempt.
//!
//! Delivery is at most once per Message-ID, even across a crash. A sender
//! claims a due row (state `sending`, its name, an expiry) in one statement
//! that other senders on any replica skip. Once the relay has taken the
//! envelope, and before the DATA command, the sender records `handed`
//! durably ([`mark_handed`]); it records the outcome only while it still
//! holds the claim. A sender that dies before `handed` leaves a row that is
//! claimed again after the claim expires: the relay never had the message. A
//! sender that dies after it leaves a row the relay may have accepted:
//! [`settle_abandoned`] turns it `uncertain` once the claim expires, nothing
//! sends it again, and an operator may [`resend`] it.

use kbot_api::reports::{Attempt, StoredReport};
use sqlx::Row;

use crate::db::{Backend, Db, Tx};
use crate::error::Result;

/// A report to queue.
#[derive(Debug, Clone)]
pub struct NewReport {
    pub message_id: String,
    pub submission_id: Option<i64>,
    pub atomic_job_id: Option<i64>,
    pub bisection_id: Option<i64>,
    /// `regression` or `improvement`.
    pub kind: &'static str,
    /// `pending` (to send) or `mail_off` (written while mail is off).
    pub state: &'static str,
    pub subject: String,
    pub envelope_from: String,
    pub recipients: Vec<String>,
    /// RFC 5322 with `\n` line ends.
    pub message: String,
    pub created_at: i64,
}

/// A row claimed for one delivery attempt.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: i64,
    pub message_id: String,
    pub envelope_from: String,
    pub recipients: Vec<String>,
    pub message: String,
    /// This attempt's number, from 1.
    pub attempt: i64,
}

/// The outcome to record for an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Sent,
    /// Back to `pending` until `next_attempt_at`.
    Transient {
        next_attempt_at: i64,
    },
    Permanent,
    /// The relay may have accepted it: not sent again by itself.
    Uncertain,
}

/// Queues a report inside the caller's transaction. `None` when a report with
/// this Message-ID is already queued (the regression was recorded before).
pub async fn insert(tx: &mut Tx, r: &NewReport) -> Result<Option<i64>> {
    let row = sqlx::query(
        "INSERT INTO report_outbox (message_id, submission_id, atomic_job_id, kind, subject, \
         envelope_from, recipients, message, next_attempt_at, created_at, bisection_id, state) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT (message_id) DO NOTHING RETURNING id",
    )
    .bind(&r.message_id)
    .bind(r.submission_id)
    .bind(r.atomic_job_id)
    .bind(r.kind)
    .bind(&r.subject)
    .bind(&r.envelope_from)
    .bind(r.recipients.join("\n"))
    .bind(&r.message)
    .bind(r.created_at)
    .bind(r.created_at)
    .bind(r.bisection_id)
    .bind(r.state)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.map(|r| r.get::<i64, _>(0)))
}

/// Claims the most overdue report that is pending, or whose claim expired.
pub async fn claim(db: &Db, sender: &str, now: i64, claim_ttl_ms: i64) -> Result<Option<Claimed>> {
    let sql = format!(
        "UPDATE report_outbox SET state = 'sending', claimed_by = $1, claim_expires_at = $2, \
         attempts = attempts + 1 \
         WHERE id = (SELECT id FROM report_outbox \
                     WHERE (state = 'pending' AND next_attempt_at <= $3) \
                        OR (state = 'sending' AND claim_expires_at <= $4) \
                     ORDER BY next_attempt_at, id LIMIT 1{}) \
           AND (state = 'pending' OR (state = 'sending' AND claim_expires_at <= $5)) \
         RETURNING id, message_id, envelope_from, recipients, message, attempts",
        db.skip_locked("report_outbox")
    );
    let row = sqlx::query(&sql)
        .bind(sender)
        .bind(now + claim_ttl_ms)
        .bind(now)
        .bind(now)
        .bind(now)
        .fetch_optional(db.write())
        .await?;
    Ok(row.map(|r| Claimed {
        id: r.get(0),
        message_id: r.get(1),
        envelope_from: r.get(2),
        recipients: split_recipients(&r.get::<String, _>(3)),
        message: r.get(4),
        attempt: r.get(5),
    }))
}

/// Records an attempt and moves the row on, if `sender` still holds its claim.
/// Returns false when the claim had been lost (expired and taken by another).
pub async fn finish(
    db: &Db,
    claimed: &Claimed,
    sender: &str,
    started_at: i64,
    finished_at: i64,
    outcome: Outcome,
    detail: &str,
) -> Result<bool> {
    let mut tx = db.begin().await?;
    let (state, next, sent_at, label) = match outcome {
        Outcome::Sent => ("sent", finished_at, Some(finished_at), "sent"),
        Outcome::Transient { next_attempt_at } => ("pending", next_attempt_at, None, "transient"),
        Outcome::Permanent => ("failed", finished_at, None, "permanent"),
        Outcome::Uncertain => ("uncertain", finished_at, None, "uncertain"),
    };
    let last_error = (outcome != Outcome::Sent).then_some(detail);
    let updated = sqlx::query(
        "UPDATE report_outbox SET state = $1, next_attempt_at = $2, sent_at = $3, last_error = $4, \
         claimed_by = NULL, claim_expires_at = NULL \
         WHERE id = $5 AND state IN ('sending', 'handed', 'uncertain') AND claimed_by = $6 \
           AND attempts = $7",
    )
    .bind(state)
    .bind(next)
    .bind(sent_at)
    .bind(last_error)
    .bind(claimed.id)
    .bind(sender)
    .bind(claimed.attempt)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query(
        "INSERT INTO report_attempts (outbox_id, attempt, sender, started_at, finished_at, outcome, detail) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(claimed.id)
    .bind(claimed.attempt)
    .bind(sender)
    .bind(started_at)
    .bind(finished_at)
    .bind(label)
    .bind(detail)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(updated == 1)
}

/// Records, durably, that `sender` is about to send DATA for its claim.
/// False when the claim was lost meanwhile: then nothing may be sent.
pub async fn mark_handed(db: &Db, claimed: &Claimed, sender: &str, now: i64) -> Result<bool> {
    let mut conn = db.write().acquire().await?;
    // SQLite's WAL at `synchronous = NORMAL` survives a process crash but
    // may lose the last commits to a power cut: this one must not be lost.
    let sqlite = db.backend() == Backend::Sqlite;
    if sqlite {
        sqlx::query("PRAGMA synchronous = FULL")
            .execute(&mut *conn)
            .await?;
    }
    let marked = sqlx::query(
        "UPDATE report_outbox SET state = 'handed', handed_at = $1 \
         WHERE id = $2 AND state = 'sending' AND claimed_by = $3 AND attempts = $4",
    )
    .bind(now)
    .bind(claimed.id)
    .bind(sender)
    .bind(claimed.attempt)
    .execute(&mut *conn)
    .await;
    if sqlite {
        sqlx::query("PRAGMA synchronous = NORMAL")
            .execute(&mut *conn)
            .await?;
    }
    Ok(marked?.rows_affected() == 1)
}

/// Turns every row left `handed` by a sender whose claim expired (it died
/// mid-hand-off) `uncertain`, recording the attempt so; returns how many.
pub async fn settle_abandoned(db: &Db, now: i64) -> Result<usize> {
    const WHY: &str = "the sender stopped while handing the message to the relay, which may \
                       have accepted it: not sent again unless an operator resends it";
    let mut tx = db.begin().await?;
    let rows = sqlx::query(
        "UPDATE report_outbox SET state = 'uncertain', last_error = $1 \
         WHERE state = 'handed' AND claim_expires_at <= $2 \
         RETURNING id, attempts, claimed_by, handed_at",
    )
    .bind(WHY)
    .bind(now)
    .fetch_all(&mut *tx)
    .await?;
    for r in &rows {
        sqlx::query(
            "INSERT INTO report_attempts (outbox_id, attempt, sender, started_at, finished_at, \
             outcome, detail) VALUES ($1, $2, $3, $4, $5, 'uncertain', $6)",
        )
        .bind(r.get::<i64, _>(0))
        .bind(r.get::<i64, _>(1))
        .bind(r.get::<Option<String>, _>(2).unwrap_or_default())
        .bind(r.get::<Option<i64>, _>(3).unwrap_or(now))
        .bind(now)
        .bind(WHY)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(rows.len())
}

/// The states an operator may send a report again from.
const RESENDABLE: [&str; 2] = ["uncertain", "failed"];

/// Whether [`resend`] takes a report in `state`.
pub fn is_resendable(state: &str) -> bool {
    RESENDABLE.contains(&state)
}

/// An operator's decision to send an `uncertain` or `failed` report (again):
/// it is due at once. False when the report is in no such state.
pub async fn resend(db: &Db, id: i64, now: i64) -> Result<bool> {
    let updated = sqlx::query(
        "UPDATE report_outbox SET state = 'pending', next_attempt_at = $1, claimed_by = NULL, \
         claim_expires_at = NULL WHERE id = $2 AND state IN ($3, $4)",
    )
    .bind(now)
    .bind(id)
    .bind(RESENDABLE[0])
    .bind(RESENDABLE[1])
    .execute(db.write())
    .await?
    .rows_affected();
    Ok(updated == 1)
}

const REPORT_COLUMNS: &str = "id, message_id, submission_id, kind, subject, recipients, message, \
     state, attempts, next_attempt_at, last_error, created_at, sent_at, bisection_id, handed_at";

fn report_from_row(r: &sqlx::any::AnyRow) -> StoredReport {
    StoredReport {
        id: r.get(0),
        message_id: r.get(1),
        submission_id: r.get(2),
        kind: r.get(3),
        subject: r.get(4),
        recipients: split_recipients(&r.get::<String, _>(5)),
        message: r.get(6),
        state: r.get(7),
        attempts: r.get(8),
        next_attempt_at: r.get(9),
        last_error: r.get(10),
        created_at: r.get(11),
        sent_at: r.get(12),
        bisection_id: r.get(13),
        handed_at: r.get(14),
    }
}

/// The newest reports first.
pub async fn list(db: &Db, limit: i64) -> Result<Vec<StoredReport>> {
    let rows = sqlx::query(&format!(
        "SELECT {REPORT_COLUMNS} FROM report_outbox ORDER BY created_at DESC, id DESC LIMIT $1"
    ))
    .bind(limit)
    .fetch_all(db.read())
    .await?;
    Ok(rows.iter().map(report_from_row).collect())
}

pub async fn by_id(db: &Db, id: i64) -> Result<Option<StoredReport>> {
    let row = sqlx::query(&format!(
        "SELECT {REPORT_COLUMNS} FROM report_outbox WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(db.read())
    .await?;
    Ok(row.as_ref().map(report_from_row))
}

pub async fn by_message_id(db: &Db, message_id: &str) -> Result<Option<StoredReport>> {
    let row = sqlx::query(&format!(
        "SELECT {REPORT_COLUMNS} FROM report_outbox WHERE message_id = $1"
    ))
    .bind(message_id)
    .fetch_optional(db.read())
    .await?;
    Ok(row.as_ref().map(report_from_row))
}

pub async fn attempts(db: &Db, outbox_id: i64) -> Result<Vec<Attempt>> {
    let rows = sqlx::query(
        "SELECT attempt, sender, started_at, finished_at, outcome, detail \
         FROM report_attempts WHERE outbox_id = $1 ORDER BY id",
    )
    .bind(outbox_id)
    .fetch_all(db.read())
    .await?;
    Ok(rows
        .iter()
        .map(|r| Attempt {
            attempt: r.get(0),
            sender: r.get(1),
            started_at: r.get(2),
            finished_at: r.get(3),
            outcome: r.get(4),
            detail: r.get(5),
        })
        .collect())
}

fn split_recipients(s: &str) -> Vec<String> {
    s.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}
