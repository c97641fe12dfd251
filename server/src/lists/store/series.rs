//! SQL of series: assembly, states, where they were applied, their parts.

use super::{SeriesState, MAX_DETAIL_BYTES};
use crate::db::{Db, Tx};
use crate::error::{Error, Result};
use crate::jobs::truncate;
use crate::mail::thread::PostedRow;
use crate::time::now_ms;
use kbot_api::lists::{SeriesPart, SeriesView};

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
    pub duplicate_of: Option<i64>,
    pub detail: Option<String>,
    pub posted_at: i64,
    pub last_part_at: i64,
    pub updated_at: i64,
    /// b4's `change-id:`, the same on every version.
    pub change_id: Option<String>,
}

const SERIES_SELECT: &str = "SELECT s.id, s.list_id, l.name AS list_name, s.series_key, \
     s.version, s.total, s.rfc, s.title, s.author_name, s.author_address, s.state, s.base_sha, \
     s.base_how, s.ref_name, s.tip_sha, s.submission_id, s.superseded_by, s.duplicate_of, s.detail, \
     s.posted_at, s.last_part_at, s.updated_at, s.change_id \
     FROM series s JOIN lists l ON l.id = s.list_id";

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
            state: self.state,
            base: self.base_sha.clone(),
            base_how: self.base_how.clone(),
            ref_name: self.ref_name.clone(),
            tip: self.tip_sha.clone(),
            submission: self.submission_id,
            superseded_by: self.superseded_by,
            duplicate_of: self.duplicate_of,
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

/// The `testing` series whose pair is `submission_id`, if any.
pub async fn testing_series_of(db: &Db, submission_id: i64) -> Result<Option<SeriesRow>> {
    Ok(sqlx::query_as::<_, SeriesRow>(&format!(
        "{SERIES_SELECT} WHERE s.submission_id = $1 AND s.state = $2"
    ))
    .bind(submission_id)
    .bind(SeriesState::Testing.as_str())
    .fetch_optional(db.read())
    .await?)
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
    pub change_id: Option<&'a str>,
}

/// Stores a new `waiting` series; its id.
pub async fn insert_series(tx: &mut Tx, s: &NewSeries<'_>) -> Result<i64> {
    let now = now_ms();
    Ok(sqlx::query_scalar(
        "INSERT INTO series (list_id, series_key, version, total, rfc, title, author_name, \
             author_address, state, posted_at, last_part_at, created_at, updated_at, change_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id",
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
    .bind(s.change_id)
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
    let detail = format!("superseded by series {by} before it started");
    end_linked(
        tx,
        id,
        SeriesState::Superseded,
        "superseded_by",
        by,
        &detail,
    )
    .await
}

/// Moves a `waiting` series to `to`, naming in the column `link` the series
/// it gives way to; `false` when another replica moved it first.
async fn end_linked(
    tx: &mut Tx,
    id: i64,
    to: SeriesState,
    link: &'static str,
    other: i64,
    detail: &str,
) -> Result<bool> {
    let done = sqlx::query(&format!(
        "UPDATE series SET state = $1, {link} = $2, detail = $3, updated_at = $4 \
         WHERE id = $5 AND state = $6"
    ))
    .bind(to.as_str())
    .bind(other)
    .bind(truncate(detail, MAX_DETAIL_BYTES))
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
    // Mail answers a report on one of these commits in its patch's thread.
    let posted = sqlx::query_as::<_, PostedRow>(
        "SELECT p.commit_sha, p.message_id, m.refs, m.subject, m.from_name, m.from_address, \
             m.recipients, l.address AS list_address, l.web_url, l.name AS list_name, \
             s.ref_name, s.base_sha, r.name AS repo_name, r.url AS repo_url, l.branch \
         FROM series_parts p JOIN series s ON s.id = p.series_id \
         JOIN lists l ON l.id = s.list_id JOIN repos r ON r.id = l.repo_id \
         JOIN list_messages m ON m.list_id = s.list_id AND m.message_id = p.message_id \
         WHERE s.id = $1 AND p.commit_sha IS NOT NULL ORDER BY p.idx",
    )
    .bind(id)
    .fetch_all(&mut **tx)
    .await?;
    crate::mail::thread::record_posted(tx, &posted).await
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

/// A series of the list, other than `except`, that was queued as a pair
/// with the same patches (patch-ids, in order) on the same base.
pub async fn tested_same(
    db: &Db,
    list_id: i64,
    base_sha: &str,
    patch_ids: &[String],
    except: i64,
) -> Result<Option<SeriesRow>> {
    let candidates = sqlx::query_as::<_, SeriesRow>(&format!(
        "{SERIES_SELECT} WHERE s.list_id = $1 AND s.base_sha = $2 AND s.id <> $3 \
         AND s.submission_id IS NOT NULL ORDER BY s.id"
    ))
    .bind(list_id)
    .bind(base_sha)
    .bind(except)
    .fetch_all(db.read())
    .await?;
    for c in candidates {
        let theirs: Vec<Option<String>> = sqlx::query_scalar(
            "SELECT patch_id FROM series_parts WHERE series_id = $1 AND idx > 0 ORDER BY idx",
        )
        .bind(c.id)
        .fetch_all(db.read())
        .await?;
        let same = theirs.len() == patch_ids.len()
            && theirs
                .iter()
                .zip(patch_ids)
                .all(|(t, ours)| t.as_deref() == Some(ours.as_str()));
        if same {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

/// Moves a `waiting` series to `duplicate` of `of`; `false` when another
/// replica moved it first.
pub async fn duplicate(tx: &mut Tx, id: i64, of: i64, detail: &str) -> Result<bool> {
    end_linked(tx, id, SeriesState::Duplicate, "duplicate_of", of, detail).await
}

/// Pairs the list's series queued since `since`; only those of `sender`'s
/// series (any case) when given.
pub async fn pairs_since(db: &Db, list_id: i64, sender: Option<&str>, since: i64) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT COUNT(*) FROM series s JOIN submissions p ON p.id = s.submission_id \
         WHERE s.list_id = $1 AND p.created_at >= $2 \
         AND ($3 IS NULL OR lower(s.author_address) = lower($4))",
    )
    .bind(list_id)
    .bind(since)
    .bind(sender)
    .bind(sender)
    .fetch_one(db.read())
    .await?)
}

/// Records that `sender` was told of their quota on `day` (days since the
/// epoch); `false` when they were told that day already.
pub async fn quota_noticed(tx: &mut Tx, list_id: i64, sender: &str, day: i64) -> Result<bool> {
    let done = sqlx::query(
        "INSERT INTO list_quota_notices (list_id, sender, day) VALUES ($1, $2, $3) \
         ON CONFLICT DO NOTHING",
    )
    .bind(list_id)
    .bind(sender.to_lowercase())
    .bind(day)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}
