//! SQL of lists, their messages, series, commands and events.

use crate::db::{text_enum, Db, Tx};
use crate::error::{Error, Result};
use crate::jobs::truncate;
use crate::time::now_ms;
use kbot_api::lists::{ListCommand, ListEvent, ListView, SeriesPart, SeriesView};

text_enum! {
    /// `lists.state`.
    pub enum ListState {
        Active = "active",
        Removed = "removed",
    }
}

text_enum! {
    /// `series.state` (see [`SeriesView::state`]).
    pub enum SeriesState {
        Waiting = "waiting",
        Incomplete = "incomplete",
        Superseded = "superseded",
        CannotApply = "cannot_apply",
        Testing = "testing",
        Tested = "tested",
        BuildFailed = "build_failed",
        Failed = "failed",
    }
}

/// Longest event or detail text kept (git's stderr can be long).
const MAX_DETAIL_BYTES: usize = 8192;

/// A `lists` row with its repo's name.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ListRow {
    pub id: i64,
    pub name: String,
    pub archive: String,
    pub archive_kind: String,
    pub address: Option<String>,
    pub web_url: Option<String>,
    pub repo_id: i64,
    pub repo_name: String,
    pub branch: String,
    pub job_name: String,
    pub job_file: String,
    pub tbox_group: Option<String>,
    pub runs_cap: i64,
    pub interval_secs: i64,
    pub wait_secs: i64,
    pub user_id: i64,
    #[sqlx(try_from = "String")]
    pub state: ListState,
    pub cursor: Option<String>,
    pub messages_read: i64,
    pub next_check_at: i64,
    pub checked_at: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
}

const LIST_SELECT: &str = "SELECT l.id, l.name, l.archive, l.archive_kind, l.address, \
     l.web_url, l.repo_id, r.name AS repo_name, l.branch, l.job_name, l.job_file, l.tbox_group, \
     l.runs_cap, l.interval_secs, l.wait_secs, l.user_id, l.state, l.cursor, l.messages_read, \
     l.next_check_at, l.checked_at, l.last_error, l.created_at \
     FROM lists l JOIN repos r ON r.id = l.repo_id";

impl ListRow {
    pub fn view(&self) -> ListView {
        ListView {
            id: self.id,
            name: self.name.clone(),
            archive: self.archive.clone(),
            archive_kind: self.archive_kind.clone(),
            address: self.address.clone(),
            web_url: self.web_url.clone(),
            repo: self.repo_name.clone(),
            branch: self.branch.clone(),
            job_name: self.job_name.clone(),
            tbox_group: self.tbox_group.clone(),
            interval_secs: u32::try_from(self.interval_secs).unwrap_or(u32::MAX),
            wait_secs: u32::try_from(self.wait_secs).unwrap_or(u32::MAX),
            max_runs: u32::try_from(self.runs_cap).unwrap_or(0),
            state: self.state.as_str().to_owned(),
            messages_read: self.messages_read,
            last_error: self.last_error.clone(),
            checked_at: self.checked_at,
            created_at: self.created_at,
        }
    }
}

pub async fn get(db: &Db, id: i64) -> Result<ListRow> {
    sqlx::query_as::<_, ListRow>(&format!("{LIST_SELECT} WHERE l.id = $1"))
        .bind(id)
        .fetch_optional(db.read())
        .await?
        .ok_or_else(|| Error::not_found("list", id))
}

pub async fn list(db: &Db) -> Result<Vec<ListRow>> {
    Ok(
        sqlx::query_as::<_, ListRow>(&format!("{LIST_SELECT} ORDER BY l.id"))
            .fetch_all(db.read())
            .await?,
    )
}

/// Active lists whose next read is due.
pub async fn due(db: &Db, now: i64) -> Result<Vec<ListRow>> {
    Ok(sqlx::query_as::<_, ListRow>(&format!(
        "{LIST_SELECT} WHERE l.state = $1 AND l.next_check_at <= $2 ORDER BY l.next_check_at"
    ))
    .bind(ListState::Active.as_str())
    .bind(now)
    .fetch_all(db.read())
    .await?)
}

/// Claims a due read: moves the next one an interval on, unless another
/// replica did first.
pub async fn claim(db: &Db, l: &ListRow, now: i64) -> Result<bool> {
    let mut tx = db.begin_relaxed().await?;
    let done = sqlx::query(
        "UPDATE lists SET next_check_at = $1 WHERE id = $2 AND next_check_at = $3 AND state = $4",
    )
    .bind(now + l.interval_secs * 1000)
    .bind(l.id)
    .bind(l.next_check_at)
    .bind(ListState::Active.as_str())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(done.rows_affected() == 1)
}

/// Makes a list due now (after a reply was posted, a test asks for a read).
pub async fn poke(db: &Db, id: i64) -> Result<()> {
    sqlx::query("UPDATE lists SET next_check_at = $1 WHERE id = $2")
        .bind(now_ms())
        .bind(id)
        .execute(db.write())
        .await?;
    Ok(())
}

pub struct NewList<'a> {
    pub name: &'a str,
    pub archive: &'a str,
    pub archive_kind: &'a str,
    pub address: Option<&'a str>,
    pub web_url: Option<&'a str>,
    pub repo_id: i64,
    pub branch: &'a str,
    pub job_name: &'a str,
    pub job_file: &'a str,
    pub tbox_group: Option<&'a str>,
    pub runs_cap: i64,
    pub interval_secs: i64,
    pub wait_secs: i64,
    pub user_id: i64,
    /// Where reading starts (`None`: the archive's first message).
    pub cursor: Option<&'a str>,
}

pub async fn insert(db: &Db, l: &NewList<'_>) -> Result<i64> {
    let now = now_ms();
    let mut tx = db.begin().await?;
    let taken: Option<i64> = sqlx::query_scalar("SELECT id FROM lists WHERE name = $1")
        .bind(l.name)
        .fetch_optional(&mut *tx)
        .await?;
    if taken.is_some() {
        return Err(Error::Conflict(format!("a list named {} exists", l.name)));
    }
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO lists (name, archive, archive_kind, address, web_url, repo_id, branch, \
             job_name, job_file, tbox_group, runs_cap, interval_secs, wait_secs, user_id, \
             next_check_at, created_at, cursor) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) \
         RETURNING id",
    )
    .bind(l.name)
    .bind(l.archive)
    .bind(l.archive_kind)
    .bind(l.address)
    .bind(l.web_url)
    .bind(l.repo_id)
    .bind(l.branch)
    .bind(l.job_name)
    .bind(l.job_file)
    .bind(l.tbox_group)
    .bind(l.runs_cap)
    .bind(l.interval_secs)
    .bind(l.wait_secs)
    .bind(l.user_id)
    .bind(now)
    .bind(now)
    .bind(l.cursor)
    .fetch_one(&mut *tx)
    .await?;
    event(
        &mut tx,
        id,
        "created",
        &format!("reading {} ({})", l.archive, l.archive_kind),
    )
    .await?;
    tx.commit().await?;
    Ok(id)
}

pub async fn remove(db: &Db, id: i64, by: &str) -> Result<()> {
    let mut tx = db.begin().await?;
    let done = sqlx::query("UPDATE lists SET state = $1 WHERE id = $2 AND state = $3")
        .bind(ListState::Removed.as_str())
        .bind(id)
        .bind(ListState::Active.as_str())
        .execute(&mut *tx)
        .await?;
    if done.rows_affected() == 1 {
        event(&mut tx, id, "removed", &format!("removed by {by}")).await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn event(tx: &mut Tx, list_id: i64, kind: &str, detail: &str) -> Result<()> {
    sqlx::query("INSERT INTO list_events (list_id, at, kind, detail) VALUES ($1, $2, $3, $4)")
        .bind(list_id)
        .bind(now_ms())
        .bind(kind)
        .bind(truncate(detail, MAX_DETAIL_BYTES))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub async fn events(db: &Db, list_id: i64, limit: i64) -> Result<Vec<ListEvent>> {
    let rows: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT at, kind, detail FROM list_events WHERE list_id = $1 ORDER BY id DESC LIMIT $2",
    )
    .bind(list_id)
    .bind(limit)
    .fetch_all(db.read())
    .await?;
    let mut events: Vec<ListEvent> = rows
        .into_iter()
        .map(|(at, kind, detail)| ListEvent { at, kind, detail })
        .collect();
    events.reverse();
    Ok(events)
}

/// Records a read: the cursor moves only with the messages it covers, in
/// the caller's transaction, so a crash re-reads, never skips.
pub async fn read_done(tx: &mut Tx, id: i64, cursor: &str, read: i64) -> Result<()> {
    sqlx::query(
        "UPDATE lists SET cursor = $1, messages_read = messages_read + $2, last_error = NULL, \
         checked_at = $3 WHERE id = $4",
    )
    .bind(cursor)
    .bind(read)
    .bind(now_ms())
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn read_failed(db: &Db, id: i64, why: &str) -> Result<()> {
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE lists SET last_error = $1, checked_at = $2 WHERE id = $3")
        .bind(truncate(why, MAX_DETAIL_BYTES))
        .bind(now_ms())
        .bind(id)
        .execute(&mut *tx)
        .await?;
    event(&mut tx, id, "read_failed", why).await?;
    tx.commit().await?;
    Ok(())
}

/// A message to keep.
pub struct NewMessage<'a> {
    pub list_id: i64,
    pub message_id: &'a str,
    pub in_reply_to: Option<&'a str>,
    pub references: &'a [String],
    pub subject: &'a str,
    pub from_name: &'a str,
    pub from_address: &'a str,
    /// To and Cc, `Name <address>` each.
    pub recipients: Vec<String>,
    pub date_ms: i64,
    pub is_patch: bool,
    pub has_diff: bool,
    pub base_commit: Option<&'a str>,
    /// `prerequisite-patch-id:` values, in order.
    pub prerequisites: &'a [String],
    pub raw: &'a [u8],
    pub origin: &'a str,
}

/// Keeps a message; `false` when the list has it already (archives may
/// carry a message twice; the first copy wins).
pub async fn insert_message(tx: &mut Tx, m: &NewMessage<'_>) -> Result<bool> {
    let id: Option<i64> = sqlx::query_scalar(
        "INSERT INTO list_messages (list_id, message_id, in_reply_to, refs, subject, from_name, \
             from_address, recipients, date_ms, is_patch, has_diff, base_commit, raw, origin, \
             read_at, prerequisites) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
         ON CONFLICT (list_id, message_id) DO NOTHING RETURNING id",
    )
    .bind(m.list_id)
    .bind(m.message_id)
    .bind(m.in_reply_to)
    .bind(m.references.join("\n"))
    .bind(m.subject)
    .bind(m.from_name)
    .bind(m.from_address)
    .bind(m.recipients.join("\n"))
    .bind(m.date_ms)
    .bind(i64::from(m.is_patch))
    .bind(i64::from(m.has_diff))
    .bind(m.base_commit)
    .bind(m.raw.to_vec())
    .bind(m.origin)
    .bind(now_ms())
    .bind(m.prerequisites.join("\n"))
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
}

/// Patch mails of the list not yet placed in a series that left `waiting`,
/// read after `since` (older ones cannot complete a series any more).
pub async fn open_patch_messages(db: &Db, list_id: i64, since: i64) -> Result<Vec<MessageMetaRow>> {
    Ok(sqlx::query_as::<_, MessageMetaRow>(
        "SELECT m.message_id, m.in_reply_to, m.refs, m.subject, m.from_name, m.from_address, \
             m.date_ms, m.has_diff, m.base_commit, m.prerequisites \
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
    pub recipients: String,
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

/// A `series` row with its list's name.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SeriesRow {
    pub id: i64,
    pub list_id: i64,
    pub list_name: String,
    pub series_key: String,
    pub version: i64,
    pub total: i64,
    pub rfc: i64,
    pub title: String,
    pub author_name: String,
    pub author_address: String,
    #[sqlx(try_from = "String")]
    pub state: SeriesState,
    pub base_sha: Option<String>,
    pub base_how: Option<String>,
    pub ref_name: Option<String>,
    pub tip_sha: Option<String>,
    pub submission_id: Option<i64>,
    pub superseded_by: Option<i64>,
    pub detail: Option<String>,
    pub posted_at: i64,
    pub last_part_at: i64,
    pub updated_at: i64,
}

const SERIES_SELECT: &str = "SELECT s.id, s.list_id, l.name AS list_name, s.series_key, \
     s.version, s.total, s.rfc, s.title, s.author_name, s.author_address, s.state, s.base_sha, \
     s.base_how, s.ref_name, s.tip_sha, s.submission_id, s.superseded_by, s.detail, \
     s.posted_at, s.last_part_at, s.updated_at FROM series s JOIN lists l ON l.id = s.list_id";

impl SeriesRow {
    pub fn view(&self) -> SeriesView {
        SeriesView {
            id: self.id,
            list: self.list_name.clone(),
            key: self.series_key.clone(),
            version: u32::try_from(self.version).unwrap_or(0),
            total: u32::try_from(self.total).unwrap_or(0),
            rfc: self.rfc != 0,
            title: self.title.clone(),
            author: format!("{} <{}>", self.author_name, self.author_address),
            state: self.state.as_str().to_owned(),
            base: self.base_sha.clone(),
            base_how: self.base_how.clone(),
            ref_name: self.ref_name.clone(),
            tip: self.tip_sha.clone(),
            submission: self.submission_id,
            superseded_by: self.superseded_by,
            detail: self.detail.clone(),
            posted_at: self.posted_at,
            updated_at: self.updated_at,
        }
    }
}

pub async fn series(db: &Db, id: i64) -> Result<SeriesRow> {
    sqlx::query_as::<_, SeriesRow>(&format!("{SERIES_SELECT} WHERE s.id = $1"))
        .bind(id)
        .fetch_optional(db.read())
        .await?
        .ok_or_else(|| Error::not_found("series", id))
}

/// A list's series, newest first.
pub async fn series_of_list(db: &Db, list_id: i64, limit: i64) -> Result<Vec<SeriesRow>> {
    Ok(sqlx::query_as::<_, SeriesRow>(&format!(
        "{SERIES_SELECT} WHERE s.list_id = $1 ORDER BY s.id DESC LIMIT $2"
    ))
    .bind(list_id)
    .bind(limit)
    .fetch_all(db.read())
    .await?)
}

/// Every list's series in `state`.
pub async fn series_in_state(db: &Db, state: SeriesState) -> Result<Vec<SeriesRow>> {
    Ok(
        sqlx::query_as::<_, SeriesRow>(&format!(
            "{SERIES_SELECT} WHERE s.state = $1 ORDER BY s.id"
        ))
        .bind(state.as_str())
        .fetch_all(db.read())
        .await?,
    )
}

/// The list's series of this key and version, if stored.
pub async fn series_by_key(
    db: &Db,
    list_id: i64,
    key: &str,
    version: i64,
) -> Result<Option<SeriesRow>> {
    Ok(sqlx::query_as::<_, SeriesRow>(&format!(
        "{SERIES_SELECT} WHERE s.list_id = $1 AND s.series_key = $2 AND s.version = $3"
    ))
    .bind(list_id)
    .bind(key)
    .bind(version)
    .fetch_optional(db.read())
    .await?)
}

/// The list's series by `author` with an older version than `version`,
/// not yet started (candidates to supersede).
pub async fn older_waiting(
    db: &Db,
    list_id: i64,
    author: &str,
    version: i64,
) -> Result<Vec<SeriesRow>> {
    Ok(sqlx::query_as::<_, SeriesRow>(&format!(
        "{SERIES_SELECT} WHERE s.list_id = $1 AND s.author_address = $2 AND s.version < $3 \
         AND s.state = $4"
    ))
    .bind(list_id)
    .bind(author)
    .bind(version)
    .bind(SeriesState::Waiting.as_str())
    .fetch_all(db.read())
    .await?)
}

pub struct NewSeries<'a> {
    pub list_id: i64,
    pub key: &'a str,
    pub version: i64,
    pub total: i64,
    pub rfc: bool,
    pub title: &'a str,
    pub author_name: &'a str,
    pub author_address: &'a str,
    pub posted_at: i64,
    pub last_part_at: i64,
}

/// Stores a new `waiting` series; its id.
pub async fn insert_series(tx: &mut Tx, s: &NewSeries<'_>) -> Result<i64> {
    let now = now_ms();
    Ok(sqlx::query_scalar(
        "INSERT INTO series (list_id, series_key, version, total, rfc, title, author_name, \
             author_address, state, posted_at, last_part_at, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
    )
    .bind(s.list_id)
    .bind(s.key)
    .bind(s.version)
    .bind(s.total)
    .bind(i64::from(s.rfc))
    .bind(s.title)
    .bind(s.author_name)
    .bind(s.author_address)
    .bind(SeriesState::Waiting.as_str())
    .bind(s.posted_at)
    .bind(s.last_part_at)
    .bind(now)
    .bind(now)
    .fetch_one(&mut **tx)
    .await?)
}

/// Records a part (or moves it, when a later read placed it better).
pub async fn put_part(tx: &mut Tx, series_id: i64, index: i64, message_id: &str) -> Result<()> {
    sqlx::query(
        "INSERT INTO series_parts (series_id, idx, message_id) VALUES ($1, $2, $3) \
         ON CONFLICT (series_id, idx) DO UPDATE SET message_id = excluded.message_id",
    )
    .bind(series_id)
    .bind(index)
    .bind(message_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn touch_series(tx: &mut Tx, id: i64, last_part_at: i64) -> Result<()> {
    sqlx::query("UPDATE series SET last_part_at = $1, updated_at = $2 WHERE id = $3")
        .bind(last_part_at)
        .bind(now_ms())
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Moves a series from `from` to `to` with its detail; `false` when another
/// replica moved it first.
pub async fn set_state(
    tx: &mut Tx,
    id: i64,
    from: SeriesState,
    to: SeriesState,
    detail: Option<&str>,
) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE series SET state = $1, detail = COALESCE($2, detail), updated_at = $3 \
         WHERE id = $4 AND state = $5",
    )
    .bind(to.as_str())
    .bind(detail.map(|d| truncate(d, MAX_DETAIL_BYTES)))
    .bind(now_ms())
    .bind(id)
    .bind(from.as_str())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn superseded(tx: &mut Tx, id: i64, by: i64) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE series SET state = $1, superseded_by = $2, detail = $3, updated_at = $4 \
         WHERE id = $5 AND state = $6",
    )
    .bind(SeriesState::Superseded.as_str())
    .bind(by)
    .bind(format!("superseded by series {by} before it started"))
    .bind(now_ms())
    .bind(id)
    .bind(SeriesState::Waiting.as_str())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Where the series was applied.
pub struct Applied<'a> {
    pub base_sha: &'a str,
    pub base_how: &'a str,
    pub ref_name: &'a str,
    pub tip_sha: &'a str,
    /// `(index, commit, patch-id)` of each patch.
    pub commits: &'a [(i64, String, Option<String>)],
}

pub async fn applied(tx: &mut Tx, id: i64, a: &Applied<'_>) -> Result<()> {
    sqlx::query(
        "UPDATE series SET base_sha = $1, base_how = $2, ref_name = $3, tip_sha = $4, \
         updated_at = $5 WHERE id = $6",
    )
    .bind(a.base_sha)
    .bind(a.base_how)
    .bind(a.ref_name)
    .bind(a.tip_sha)
    .bind(now_ms())
    .bind(id)
    .execute(&mut **tx)
    .await?;
    for (index, commit, patch_id) in a.commits {
        sqlx::query(
            "UPDATE series_parts SET commit_sha = $1, patch_id = $2 \
             WHERE series_id = $3 AND idx = $4",
        )
        .bind(commit)
        .bind(patch_id.as_deref())
        .bind(id)
        .bind(index)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// The base a series was tried on, when it did not apply.
pub async fn set_base(tx: &mut Tx, id: i64, base_sha: &str, base_how: &str) -> Result<()> {
    sqlx::query("UPDATE series SET base_sha = $1, base_how = $2 WHERE id = $3")
        .bind(base_sha)
        .bind(base_how)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub async fn set_submission(tx: &mut Tx, id: i64, submission_id: i64) -> Result<()> {
    sqlx::query("UPDATE series SET submission_id = $1, updated_at = $2 WHERE id = $3")
        .bind(submission_id)
        .bind(now_ms())
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The parts of a series, with each part's subject.
pub async fn parts(db: &Db, series_id: i64) -> Result<Vec<SeriesPart>> {
    type PartRow = (i64, String, Option<String>, Option<String>, Option<String>);
    let rows: Vec<PartRow> = sqlx::query_as(
        "SELECT p.idx, p.message_id, m.subject, p.commit_sha, p.patch_id \
             FROM series_parts p JOIN series s ON s.id = p.series_id \
             LEFT JOIN list_messages m ON m.list_id = s.list_id AND m.message_id = p.message_id \
             WHERE p.series_id = $1 ORDER BY p.idx",
    )
    .bind(series_id)
    .fetch_all(db.read())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(idx, message_id, subject, commit, patch_id)| SeriesPart {
            index: u32::try_from(idx).unwrap_or(0),
            message_id,
            subject: subject.unwrap_or_default(),
            commit,
            patch_id,
        })
        .collect())
}

/// A command to record.
pub struct NewCommand<'a> {
    /// `None` for a fix found on a watched tree.
    pub list_id: Option<i64>,
    pub message_id: &'a str,
    pub sender: &'a str,
    pub command: &'a str,
    pub argument: &'a str,
    pub report_id: Option<i64>,
    pub regression_id: Option<i64>,
    pub state: &'a str,
    pub outcome: &'a str,
    pub submission_id: Option<i64>,
}

/// Records a command once; `None` when this mail's command was taken before.
pub async fn insert_command(tx: &mut Tx, c: &NewCommand<'_>) -> Result<Option<i64>> {
    Ok(sqlx::query_scalar(
        "INSERT INTO list_commands (list_id, message_id, sender, command, argument, report_id, \
             regression_id, state, outcome, submission_id, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (message_id, command) DO NOTHING RETURNING id",
    )
    .bind(c.list_id)
    .bind(c.message_id)
    .bind(c.sender)
    .bind(c.command)
    .bind(c.argument)
    .bind(c.report_id)
    .bind(c.regression_id)
    .bind(c.state)
    .bind(truncate(c.outcome, MAX_DETAIL_BYTES))
    .bind(c.submission_id)
    .bind(now_ms())
    .fetch_optional(&mut **tx)
    .await?)
}

pub async fn command_done(tx: &mut Tx, id: i64, state: &str, outcome: &str) -> Result<()> {
    sqlx::query("UPDATE list_commands SET state = $1, outcome = $2 WHERE id = $3")
        .bind(state)
        .bind(truncate(outcome, MAX_DETAIL_BYTES))
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[derive(sqlx::FromRow)]
struct CommandRecord {
    id: i64,
    message_id: String,
    sender: String,
    command: String,
    argument: String,
    state: String,
    outcome: String,
    regression_id: Option<i64>,
    submission_id: Option<i64>,
    created_at: i64,
}

impl From<CommandRecord> for ListCommand {
    fn from(r: CommandRecord) -> ListCommand {
        ListCommand {
            id: r.id,
            message_id: r.message_id,
            sender: r.sender,
            command: r.command,
            argument: r.argument,
            state: r.state,
            outcome: r.outcome,
            regression: r.regression_id,
            submission: r.submission_id,
            created_at: r.created_at,
        }
    }
}

const COMMAND_SELECT: &str = "SELECT id, message_id, sender, command, argument, state, outcome, \
     regression_id, submission_id, created_at FROM list_commands";

pub async fn commands(db: &Db, list_id: i64, limit: i64) -> Result<Vec<ListCommand>> {
    let rows = sqlx::query_as::<_, CommandRecord>(&format!(
        "{COMMAND_SELECT} WHERE list_id = $1 ORDER BY id DESC LIMIT $2"
    ))
    .bind(list_id)
    .bind(limit)
    .fetch_all(db.read())
    .await?;
    Ok(rows.into_iter().map(ListCommand::from).collect())
}

/// A command (or a found fix) whose pair is running.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RunningCommand {
    pub id: i64,
    pub list_id: Option<i64>,
    pub message_id: String,
    pub command: String,
    pub argument: String,
    pub regression_id: Option<i64>,
    pub submission_id: i64,
}

pub async fn running_commands(db: &Db) -> Result<Vec<RunningCommand>> {
    Ok(sqlx::query_as::<_, RunningCommand>(
        "SELECT id, list_id, message_id, command, argument, regression_id, submission_id          FROM list_commands WHERE state = 'testing' AND submission_id IS NOT NULL ORDER BY id",
    )
    .fetch_all(db.read())
    .await?)
}

/// Whether a command or found fix about this regression was recorded with
/// this argument (a `Closes:` commit is rechecked once).
pub async fn command_exists(
    db: &Db,
    regression_id: i64,
    command: &str,
    argument: &str,
) -> Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM list_commands WHERE regression_id = $1 AND command = $2          AND argument = $3",
    )
    .bind(regression_id)
    .bind(command)
    .bind(argument)
    .fetch_one(db.read())
    .await?;
    Ok(n > 0)
}

/// `#kbot fix:` subjects given for open regressions: `(regression, subject)`.
pub async fn fix_subjects(db: &Db) -> Result<Vec<(i64, String)>> {
    Ok(sqlx::query_as(
        "SELECT c.regression_id, c.argument FROM list_commands c          JOIN regressions g ON g.id = c.regression_id          WHERE c.command = 'fix' AND c.state = 'done'          AND g.state IN ('new', 'confirmed', 'reported') ORDER BY c.id",
    )
    .fetch_all(db.read())
    .await?)
}
