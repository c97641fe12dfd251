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

use super::recipients::Recipients;
use crate::access::Reader;
use crate::db::{Db, Tx};
use crate::error::Result;

pub use kbot_api::reports::{AttemptOutcome, OutboxState, ReportKind};

/// Whether `reader` sees every report whole: its recipients, the relay's
/// words, and reports that are not public yet ([`OutboxState::is_public`]).
/// Only people do (a session or a user token); an agent reads what anyone
/// may.
pub fn sees_all(reader: Reader) -> bool {
    reader == Reader::User
}

/// Whether `reader` may see the Message-ID and text of a report in
/// `state`. Every page and API answer that names a report asks this: a
/// Message-ID shown early lets a stranger answer the report with a
/// command before its recipients have it.
pub fn readable(reader: Reader, state: OutboxState) -> bool {
    sees_all(reader) || state.is_public()
}

/// [`readable`] for a state read as text; a state kbot does not know is
/// read by nobody but signed-in users.
pub fn readable_text(reader: Reader, state: &str) -> bool {
    sees_all(reader) || OutboxState::parse(state).is_some_and(OutboxState::is_public)
}

/// A report's stored text as `reader` may read it: whole for a signed-in
/// reader, without its To and Cc for anyone once it is public, and
/// nothing before.
pub fn message_for(reader: Reader, state: OutboxState, message: &str) -> Option<String> {
    if sees_all(reader) {
        Some(message.to_owned())
    } else if state.is_public() {
        Some(without_recipients(message))
    } else {
        None
    }
}

/// A mail's text without its To and Cc headers (with their continuation
/// lines); the body is left as it is.
pub fn without_recipients(message: &str) -> String {
    let (head, body) = match message.find("\n\n") {
        Some(at) => message.split_at(at),
        None => (message, ""),
    };
    let mut out = String::with_capacity(message.len());
    let mut skipping = false;
    for line in head.split_inclusive('\n') {
        let continued = line.starts_with([' ', '\t']);
        if !continued {
            let name = line.split(':').next().unwrap_or_default().trim();
            skipping = name.eq_ignore_ascii_case("to") || name.eq_ignore_ascii_case("cc");
        }
        if !skipping {
            out.push_str(line);
        }
    }
    out.push_str(body);
    out
}

/// A report to queue.
#[derive(Debug, Clone)]
pub struct NewReport {
    pub message_id: String,
    pub submission_id: Option<i64>,
    pub atomic_job_id: Option<i64>,
    pub bisection_id: Option<i64>,
    pub kind: ReportKind,
    /// `Pending` (to send) or `MailOff` (written while mail is off).
    pub state: OutboxState,
    pub subject: String,
    pub envelope_from: String,
    pub recipients: Recipients,
    /// RFC 5322 with `\n` line ends.
    pub message: String,
    pub created_at: i64,
    /// Not sent before this (Unix ms): reports wait for the gather window,
    /// answers are due at once.
    pub send_after: i64,
    /// The change a report blames (see [`crate::mail::culprit`]); at most
    /// one report per culprit.
    pub culprit: Option<String>,
    /// What the report was rendered from, as JSON, to render it again.
    pub facts: Option<String>,
    /// The list thread it goes to (its first Reference), for the sender's
    /// per-thread cap; `None` for a report that starts no thread.
    pub thread: Option<String>,
}

/// What a report was rendered from (`report_outbox.facts`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Facts {
    pub data: kbot_core::report::ReportData,
    pub addressing: kbot_core::report::mbox::Addressing,
    /// The tbox group of the report's own finding.
    pub tbox_group: String,
}

/// A row claimed for one delivery attempt.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Claimed {
    pub id: i64,
    pub message_id: String,
    pub envelope_from: String,
    #[sqlx(try_from = "String")]
    pub recipients: Recipients,
    pub message: String,
    /// This attempt's number, from 1.
    #[sqlx(rename = "attempts")]
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
/// this Message-ID (the regression was recorded before) or this culprit is
/// already queued.
pub async fn insert(tx: &mut Tx, r: &NewReport) -> Result<Option<i64>> {
    let id = sqlx::query_scalar(
        "INSERT INTO report_outbox (message_id, submission_id, atomic_job_id, kind, subject, \
         envelope_from, recipients, message, next_attempt_at, created_at, bisection_id, state, \
         culprit, facts, thread) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
         ON CONFLICT DO NOTHING RETURNING id",
    )
    .bind(&r.message_id)
    .bind(r.submission_id)
    .bind(r.atomic_job_id)
    .bind(r.kind.as_str())
    .bind(&r.subject)
    .bind(&r.envelope_from)
    .bind(r.recipients.stored())
    .bind(&r.message)
    .bind(r.send_after)
    .bind(r.created_at)
    .bind(r.bisection_id)
    .bind(r.state.as_str())
    .bind(&r.culprit)
    .bind(&r.facts)
    .bind(&r.thread)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(id)
}

/// How many mails may go to the relay per hour, in all and per thread.
#[derive(Debug, Clone, Copy)]
pub struct SendLimits {
    pub per_hour: u32,
    pub per_thread_hour: u32,
}

/// Attempts that may have reached someone (sent, or uncertain).
const DELIVERED: &str = "a.outcome IN ('sent', 'uncertain')";

/// Claims the most overdue report that is pending, or whose claim expired,
/// while the last hour's deliveries are under `limits` (in all, and in the
/// report's thread); a report over a limit stays as it is, for later.
pub async fn claim(
    db: &Db,
    sender: &str,
    now: i64,
    claim_ttl_ms: i64,
    limits: SendLimits,
) -> Result<Option<Claimed>> {
    let sql = format!(
        "UPDATE report_outbox SET state = 'sending', claimed_by = $1, claim_expires_at = $2, \
         attempts = attempts + 1 \
         WHERE id = (SELECT id FROM report_outbox \
                     WHERE ((state = 'pending' AND next_attempt_at <= $3) \
                        OR (state = 'sending' AND claim_expires_at <= $4)) \
                       AND (SELECT COUNT(*) FROM report_attempts a \
                            WHERE a.started_at > $6 AND {DELIVERED}) < $7 \
                       AND (report_outbox.thread IS NULL OR \
                            (SELECT COUNT(*) FROM report_attempts a \
                             JOIN report_outbox t ON t.id = a.outbox_id \
                             WHERE t.thread = report_outbox.thread AND a.started_at > $8 \
                               AND {DELIVERED}) < $9) \
                     ORDER BY next_attempt_at, id LIMIT 1{}) \
           AND (state = 'pending' OR (state = 'sending' AND claim_expires_at <= $5)) \
         RETURNING id, message_id, envelope_from, recipients, message, attempts",
        db.skip_locked("report_outbox")
    );
    let hour_ago = now - 3600 * 1000;
    Ok(sqlx::query_as::<_, Claimed>(&sql)
        .bind(sender)
        .bind(now + claim_ttl_ms)
        .bind(now)
        .bind(now)
        .bind(now)
        .bind(hour_ago)
        .bind(i64::from(limits.per_hour))
        .bind(hour_ago)
        .bind(i64::from(limits.per_thread_hour))
        .fetch_optional(db.write())
        .await?)
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
        Outcome::Sent => (
            OutboxState::Sent,
            finished_at,
            Some(finished_at),
            AttemptOutcome::Sent,
        ),
        Outcome::Transient { next_attempt_at } => (
            OutboxState::Pending,
            next_attempt_at,
            None,
            AttemptOutcome::Transient,
        ),
        Outcome::Permanent => (
            OutboxState::Failed,
            finished_at,
            None,
            AttemptOutcome::Permanent,
        ),
        Outcome::Uncertain => (
            OutboxState::Uncertain,
            finished_at,
            None,
            AttemptOutcome::Uncertain,
        ),
    };
    let last_error = (outcome != Outcome::Sent).then_some(detail);
    let updated = sqlx::query(
        "UPDATE report_outbox SET state = $1, next_attempt_at = $2, sent_at = $3, last_error = $4, \
         claimed_by = NULL, claim_expires_at = NULL \
         WHERE id = $5 AND state IN ('sending', 'handed', 'uncertain') AND claimed_by = $6 \
           AND attempts = $7",
    )
    .bind(state.as_str())
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
    .bind(label.as_str())
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
    db.set_full_sync(&mut conn, true).await?;
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
    db.set_full_sync(&mut conn, false).await?;
    Ok(marked?.rows_affected() == 1)
}

/// Turns every row left `handed` by a sender whose claim expired (it died
/// mid-hand-off) `uncertain`, recording the attempt so; returns how many.
pub async fn settle_abandoned(db: &Db, now: i64) -> Result<usize> {
    const WHY: &str = "the sender stopped while handing the message to the relay, which may \
                       have accepted it: not sent again unless an operator resends it";
    let mut tx = db.begin().await?;
    let rows: Vec<(i64, i64, Option<String>, Option<i64>)> = sqlx::query_as(
        "UPDATE report_outbox SET state = 'uncertain', last_error = $1 \
         WHERE state = 'handed' AND claim_expires_at <= $2 \
         RETURNING id, attempts, claimed_by, handed_at",
    )
    .bind(WHY)
    .bind(now)
    .fetch_all(&mut *tx)
    .await?;
    for (id, attempt, claimed_by, handed_at) in &rows {
        sqlx::query(
            "INSERT INTO report_attempts (outbox_id, attempt, sender, started_at, finished_at, \
             outcome, detail) VALUES ($1, $2, $3, $4, $5, 'uncertain', $6)",
        )
        .bind(id)
        .bind(attempt)
        .bind(claimed_by.clone().unwrap_or_default())
        .bind(handed_at.unwrap_or(now))
        .bind(now)
        .bind(WHY)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(rows.len())
}

/// The states an operator may send a report again from.
const RESENDABLE: [OutboxState; 2] = [OutboxState::Uncertain, OutboxState::Failed];

/// Whether [`resend`] takes a report in `state`.
pub fn is_resendable(state: OutboxState) -> bool {
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
    .bind(RESENDABLE[0].as_str())
    .bind(RESENDABLE[1].as_str())
    .execute(db.write())
    .await?
    .rows_affected();
    Ok(updated == 1)
}

const REPORT_COLUMNS: &str = "id, message_id, submission_id, kind, subject, recipients, message, \
     state, attempts, next_attempt_at, last_error, created_at, sent_at, bisection_id, handed_at";

/// A [`StoredReport`] as [`REPORT_COLUMNS`] reads it.
#[derive(sqlx::FromRow)]
struct ReportRecord {
    id: i64,
    message_id: String,
    submission_id: Option<i64>,
    #[sqlx(try_from = "String")]
    kind: ReportKind,
    subject: String,
    #[sqlx(try_from = "String")]
    recipients: Recipients,
    message: String,
    #[sqlx(try_from = "String")]
    state: OutboxState,
    attempts: i64,
    next_attempt_at: i64,
    last_error: Option<String>,
    created_at: i64,
    sent_at: Option<i64>,
    bisection_id: Option<i64>,
    handed_at: Option<i64>,
}

impl From<ReportRecord> for StoredReport {
    fn from(r: ReportRecord) -> StoredReport {
        StoredReport {
            id: r.id,
            message_id: r.message_id,
            submission_id: r.submission_id,
            kind: r.kind,
            subject: r.subject,
            recipients: r.recipients.0,
            message: r.message,
            state: r.state,
            attempts: r.attempts,
            next_attempt_at: r.next_attempt_at,
            last_error: r.last_error,
            created_at: r.created_at,
            sent_at: r.sent_at,
            bisection_id: r.bisection_id,
            handed_at: r.handed_at,
        }
    }
}

/// The newest reports first.
pub async fn list(db: &Db, limit: i64) -> Result<Vec<StoredReport>> {
    let rows = sqlx::query_as::<_, ReportRecord>(&format!(
        "SELECT {REPORT_COLUMNS} FROM report_outbox ORDER BY created_at DESC, id DESC LIMIT $1"
    ))
    .bind(limit)
    .fetch_all(db.read())
    .await?;
    Ok(rows.into_iter().map(StoredReport::from).collect())
}

pub async fn by_id(db: &Db, id: i64) -> Result<Option<StoredReport>> {
    let row = sqlx::query_as::<_, ReportRecord>(&format!(
        "SELECT {REPORT_COLUMNS} FROM report_outbox WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(db.read())
    .await?;
    Ok(row.map(StoredReport::from))
}

pub async fn by_message_id(db: &Db, message_id: &str) -> Result<Option<StoredReport>> {
    let row = sqlx::query_as::<_, ReportRecord>(&format!(
        "SELECT {REPORT_COLUMNS} FROM report_outbox WHERE message_id = $1"
    ))
    .bind(message_id)
    .fetch_optional(db.read())
    .await?;
    Ok(row.map(StoredReport::from))
}

pub async fn attempts(db: &Db, outbox_id: i64) -> Result<Vec<Attempt>> {
    let rows: Vec<(i64, String, i64, i64, String, String)> = sqlx::query_as(
        "SELECT attempt, sender, started_at, finished_at, outcome, detail \
         FROM report_attempts WHERE outbox_id = $1 ORDER BY id",
    )
    .bind(outbox_id)
    .fetch_all(db.read())
    .await?;
    rows.into_iter()
        .map(
            |(attempt, sender, started_at, finished_at, outcome, detail)| {
                let outcome = AttemptOutcome::try_from(outcome).map_err(anyhow::Error::msg)?;
                Ok(Attempt {
                    attempt,
                    sender,
                    started_at,
                    finished_at,
                    outcome,
                    detail,
                })
            },
        )
        .collect()
}

/// An address SMTP can carry: one `@` inside, no spaces, brackets or line breaks.
pub fn usable(address: &str) -> bool {
    address.matches('@').count() == 1
        && !address.starts_with('@')
        && !address.ends_with('@')
        && !address.contains(['<', '>', ' ', ',', '"', '\r', '\n'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_addresses_are_dropped() {
        assert!(usable("ann@example.org"));
        for bad in ["", "ann", "@x", "a@", "a@b@c", "a b@x", "a@x\r\nBcc: e@x"] {
            assert!(!usable(bad), "{bad:?}");
        }
    }
}
