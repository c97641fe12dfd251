//! SQL of watches and their events.

use crate::db::schedule::{EventLog, Schedule};
use crate::db::{Db, Tx};
use crate::error::{Error, Result};
use crate::jobs::truncate;
use crate::jobs::SubmissionState;
use crate::time::now_ms;
use kbot_api::watches::{WatchEvent, WatchEventKind, WatchView};

pub use kbot_api::watches::SourceState as WatchState;

/// Longest fetch error kept on a watch (git's stderr can be long); its
/// event's detail has the schedule's bound.
const MAX_ERROR_BYTES: usize = 4096;

/// A `watches` row with its repo's name and the shas of its commits.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WatchRow {
    pub id: i64,
    pub repo_id: i64,
    pub repo_name: String,
    pub branch: String,
    pub job_name: String,
    pub job_file: String,
    pub tbox_group: Option<String>,
    pub interval_secs: i64,
    pub runs_cap: i64,
    #[sqlx(try_from = "String")]
    pub state: WatchState,
    pub last_seen_sha: Option<String>,
    pub last_tested_sha: Option<String>,
    pub last_good_commit_id: Option<i64>,
    pub last_good_sha: Option<String>,
    pub current_submission_id: Option<i64>,
    pub next_check_at: i64,
    pub checked_at: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
}

const WATCH_SELECT: &str = "SELECT w.id, w.repo_id, r.name AS repo_name, w.branch, w.job_name, \
     w.job_file, w.tbox_group, w.interval_secs, w.runs_cap, w.state, w.last_seen_sha, \
     t.sha AS last_tested_sha, w.last_good_commit_id, g.sha AS last_good_sha, \
     w.current_submission_id, w.next_check_at, w.checked_at, w.last_error, w.created_at \
     FROM watches w JOIN repos r ON r.id = w.repo_id \
     LEFT JOIN commits t ON t.id = w.last_tested_commit_id \
     LEFT JOIN commits g ON g.id = w.last_good_commit_id";

impl WatchRow {
    pub fn view(&self) -> WatchView {
        WatchView {
            id: self.id,
            repo: self.repo_name.clone(),
            branch: self.branch.clone(),
            job_name: self.job_name.clone(),
            tbox_group: self.tbox_group.clone(),
            interval_secs: u32::try_from(self.interval_secs).unwrap_or(u32::MAX),
            max_runs: u32::try_from(self.runs_cap).unwrap_or(0),
            state: self.state,
            last_seen: self.last_seen_sha.clone(),
            last_tested: self.last_tested_sha.clone(),
            last_good: self.last_good_sha.clone(),
            current_submission: self.current_submission_id,
            last_error: self.last_error.clone(),
            checked_at: self.checked_at,
            created_at: self.created_at,
        }
    }
}

pub async fn get(db: &Db, id: i64) -> Result<WatchRow> {
    SCHEDULE.get(db, id, "watch").await
}

pub async fn list(db: &Db) -> Result<Vec<WatchRow>> {
    SCHEDULE.all(db).await
}

/// Watches are looked at on their interval, while active.
pub const SCHEDULE: Schedule = Schedule {
    table: "watches",
    select: WATCH_SELECT,
    alias: "w",
    events: EventLog {
        table: "watch_events",
        row: "watch_id",
    },
};

pub struct NewWatch<'a> {
    pub repo_id: i64,
    pub branch: &'a str,
    pub job_name: &'a str,
    pub job_file: &'a str,
    pub tbox_group: Option<&'a str>,
    pub interval_secs: i64,
    pub runs_cap: i64,
    pub user_id: i64,
}

pub async fn insert(db: &Db, w: &NewWatch<'_>) -> Result<i64> {
    let now = now_ms();
    let mut tx = db.begin().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO watches (repo_id, branch, job_name, job_file, tbox_group, interval_secs, \
             runs_cap, user_id, next_check_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
    )
    .bind(w.repo_id)
    .bind(w.branch)
    .bind(w.job_name)
    .bind(w.job_file)
    .bind(w.tbox_group)
    .bind(w.interval_secs)
    .bind(w.runs_cap)
    .bind(w.user_id)
    .bind(now)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    event(
        &mut tx,
        id,
        WatchEventKind::Created,
        &format!("watching {}", w.branch),
    )
    .await?;
    tx.commit().await?;
    Ok(id)
}

pub async fn remove(db: &Db, id: i64, by: &str) -> Result<()> {
    let mut tx = db.begin().await?;
    if SCHEDULE.remove(&mut tx, id).await? {
        event(
            &mut tx,
            id,
            WatchEventKind::Removed,
            &format!("removed by {by}"),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn event(tx: &mut Tx, watch_id: i64, kind: WatchEventKind, detail: &str) -> Result<()> {
    SCHEDULE.event(tx, watch_id, kind.as_str(), detail).await
}

/// Records what a fetch found (or why it failed), with an event on failure.
pub async fn fetched(db: &Db, id: i64, seen: Result<&str, &str>) -> Result<()> {
    let mut tx = db.begin().await?;
    let (sha, error) = match seen {
        Ok(sha) => (Some(sha), None),
        Err(e) => (None, Some(e)),
    };
    sqlx::query(
        "UPDATE watches SET last_seen_sha = COALESCE($1, last_seen_sha), last_error = $2, \
         checked_at = $3 WHERE id = $4",
    )
    .bind(sha)
    .bind(error.map(|e| truncate(e, MAX_ERROR_BYTES)))
    .bind(now_ms())
    .bind(id)
    .execute(&mut *tx)
    .await?;
    if let Some(e) = error {
        event(&mut tx, id, WatchEventKind::FetchFailed, e).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The watch whose running pair is `submission_id`, if any.
pub async fn by_current_submission(db: &Db, submission_id: i64) -> Result<Option<WatchRow>> {
    Ok(sqlx::query_as::<_, WatchRow>(&format!(
        "{WATCH_SELECT} WHERE w.current_submission_id = $1"
    ))
    .bind(submission_id)
    .fetch_optional(db.read())
    .await?)
}

/// Ends the watch's running pair `submission_id` (the head that ran is the
/// next base) and makes the watch due at `now`; false when it was ended
/// already.
pub async fn pair_ended(
    tx: &mut Tx,
    id: i64,
    submission_id: i64,
    good_commit_id: Option<i64>,
    now: i64,
) -> Result<bool> {
    let ended = sqlx::query(
        "UPDATE watches SET current_submission_id = NULL, \
         last_good_commit_id = COALESCE($1, last_good_commit_id), \
         next_check_at = CASE WHEN next_check_at > $2 THEN $3 ELSE next_check_at END \
         WHERE id = $4 AND current_submission_id = $5",
    )
    .bind(good_commit_id)
    .bind(now)
    .bind(now)
    .bind(id)
    .bind(submission_id)
    .execute(&mut **tx)
    .await?;
    Ok(ended.rows_affected() == 1)
}

pub async fn pair_started(
    tx: &mut Tx,
    id: i64,
    submission_id: i64,
    head_commit_id: i64,
) -> Result<()> {
    sqlx::query(
        "UPDATE watches SET current_submission_id = $1, last_tested_commit_id = $2 WHERE id = $3",
    )
    .bind(submission_id)
    .bind(head_commit_id)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn events(db: &Db, watch_id: i64, limit: i64) -> Result<Vec<WatchEvent>> {
    let events = SCHEDULE.events(db, watch_id, limit).await?;
    Ok(events
        .into_iter()
        .map(|(at, kind, detail)| WatchEvent { at, kind, detail })
        .collect())
}

/// A watch pair's outcome: its stored state, its head, and how the head's
/// runs went (finished, failed, the first failure's kind).
#[derive(sqlx::FromRow)]
pub struct PairOutcome {
    #[sqlx(try_from = "String")]
    pub state: SubmissionState,
    pub head_commit_id: i64,
    pub head_finished: i64,
    pub head_failure: Option<String>,
}

pub async fn pair_outcome(db: &Db, submission_id: i64) -> Result<PairOutcome> {
    sqlx::query_as::<_, PairOutcome>(
        "SELECT s.state, s.head_commit_id, \
             (SELECT COUNT(*) FROM jobs j WHERE j.submission_id = s.id AND j.side = 'head' \
              AND j.state = 'finished') AS head_finished, \
             (SELECT MIN(j.failure) FROM jobs j WHERE j.submission_id = s.id \
              AND j.side = 'head' AND j.state = 'failed') AS head_failure \
         FROM submissions s WHERE s.id = $1",
    )
    .bind(submission_id)
    .fetch_optional(db.read())
    .await?
    .ok_or_else(|| Error::not_found("submission", submission_id))
}
