//! SQL of lists and their events and reads; their messages, series and
//! commands are in the submodules, re-exported here.

use crate::db::schedule::{EventLog, Schedule};
use crate::db::{Db, Tx};
use crate::error::{Error, Result};
use crate::jobs::truncate;
use crate::mail;
use crate::time::now_ms;
use crate::web::without_credentials;
use kbot_api::lists::{ArchiveKind, ListEvent, ListEventKind, ListView};

mod commands;
mod messages;
mod series;

pub use commands::*;
pub use messages::*;
pub use series::*;

pub use kbot_api::lists::{SeriesState, SourceState as ListState};

/// Longest error, series detail or command outcome kept (git's stderr can
/// be long); an event's detail has the schedule's bound.
const MAX_DETAIL_BYTES: usize = 8192;

/// A `lists` row with its repo's name.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ListRow {
    pub id: i64,
    pub name: String,
    pub archive: String,
    #[sqlx(try_from = "String")]
    pub archive_kind: ArchiveKind,
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
    /// 1: a mail without any DKIM signature counts as an unverified sender
    /// (see `lists::trust`).
    pub accept_unsigned: i64,
    /// Addresses, one a line, that may command about every report of the
    /// list's patches.
    pub maintainers: String,
    /// One `TAG=REPO:BRANCH` a line: the trees a subject tag names.
    pub tree_tags: String,
    /// The patchwork instance that gets checks (its token is read by the
    /// sender only).
    pub patchwork_url: Option<String>,
}

const LIST_SELECT: &str = "SELECT l.id, l.name, l.archive, l.archive_kind, l.address, \
     l.web_url, l.repo_id, r.name AS repo_name, l.branch, l.job_name, l.job_file, l.tbox_group, \
     l.runs_cap, l.interval_secs, l.wait_secs, l.user_id, l.state, l.cursor, l.messages_read, \
     l.next_check_at, l.checked_at, l.last_error, l.created_at, l.accept_unsigned, \
     l.maintainers, l.tree_tags, l.patchwork_url FROM lists l JOIN repos r ON r.id = l.repo_id";

impl ListRow {
    /// The list as the API, the CLI and the page show it: every URL
    /// without credentials (the stored archive keeps them, to read with).
    /// The subject tags and the trees (`REPO:BRANCH`) they name.
    pub fn tree_tags(&self) -> Vec<(String, String)> {
        self.tree_tags
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(t, s)| (t.trim().to_owned(), s.trim().to_owned()))
            .collect()
    }

    pub fn view(&self) -> ListView {
        ListView {
            id: self.id,
            name: self.name.clone(),
            archive: without_credentials(&self.archive),
            archive_kind: self.archive_kind,
            address: self.address.clone(),
            web_url: self.web_url.as_deref().map(without_credentials),
            repo: self.repo_name.clone(),
            branch: self.branch.clone(),
            job_name: self.job_name.clone(),
            tbox_group: self.tbox_group.clone(),
            interval_secs: u32::try_from(self.interval_secs).unwrap_or(u32::MAX),
            wait_secs: u32::try_from(self.wait_secs).unwrap_or(u32::MAX),
            max_runs: u32::try_from(self.runs_cap).unwrap_or(0),
            state: self.state,
            messages_read: self.messages_read,
            last_error: self.last_error.as_deref().map(without_credentials),
            checked_at: self.checked_at,
            created_at: self.created_at,
            accept_unsigned: self.accept_unsigned != 0,
            maintainers: self
                .maintainers
                .lines()
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
            tree_tags: self.tree_tags().into_iter().collect(),
            patchwork_url: self.patchwork_url.as_deref().map(without_credentials),
        }
    }
}

pub async fn get(db: &Db, id: i64) -> Result<ListRow> {
    SCHEDULE.get(db, id, "list").await
}

pub async fn list(db: &Db) -> Result<Vec<ListRow>> {
    SCHEDULE.all(db).await
}

/// Lists are read on their interval, while active; a reply posted or a
/// test makes one due now ([`Schedule::poke`]).
pub const SCHEDULE: Schedule = Schedule {
    table: "lists",
    select: LIST_SELECT,
    alias: "l",
    events: EventLog {
        table: "list_events",
        row: "list_id",
    },
};

pub struct NewList<'a> {
    pub name: &'a str,
    pub archive: &'a str,
    pub archive_kind: ArchiveKind,
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
    pub accept_unsigned: bool,
    /// One address a line.
    pub maintainers: &'a str,
    /// One `TAG=REPO:BRANCH` a line.
    pub tree_tags: &'a str,
    /// Patchwork's URL, project and token.
    pub patchwork: Option<(&'a str, &'a str, &'a str)>,
}

/// The list's name among those who follow a tree by mail: a landed fix's
/// answer is Cc'd to the lists of the branches holding it.
fn follower(id: i64) -> String {
    format!("list/{id}")
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
             next_check_at, created_at, cursor, accept_unsigned, maintainers, tree_tags, \
             patchwork_url, patchwork_project, patchwork_token) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
             $18, $19, $20, $21, $22, $23) \
         RETURNING id",
    )
    .bind(l.name)
    .bind(l.archive)
    .bind(l.archive_kind.as_str())
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
    .bind(i64::from(l.accept_unsigned))
    .bind(l.maintainers)
    .bind(l.tree_tags)
    .bind(l.patchwork.map(|p| p.0))
    .bind(l.patchwork.map(|p| p.1))
    .bind(l.patchwork.map(|p| p.2))
    .fetch_one(&mut *tx)
    .await?;
    if let Some(address) = l.address {
        mail::followers::follow(&mut tx, &follower(id), l.repo_id, l.branch, address).await?;
    }
    event(
        &mut tx,
        id,
        ListEventKind::Created,
        &format!("reading {} ({})", l.archive, l.archive_kind),
    )
    .await?;
    tx.commit().await?;
    Ok(id)
}

pub async fn remove(db: &Db, id: i64, by: &str) -> Result<()> {
    let mut tx = db.begin().await?;
    if SCHEDULE.remove(&mut tx, id).await? {
        mail::followers::unfollow(&mut tx, &follower(id)).await?;
        event(
            &mut tx,
            id,
            ListEventKind::Removed,
            &format!("removed by {by}"),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn event(tx: &mut Tx, list_id: i64, kind: ListEventKind, detail: &str) -> Result<()> {
    SCHEDULE.event(tx, list_id, kind.as_str(), detail).await
}

pub async fn events(db: &Db, list_id: i64, limit: i64) -> Result<Vec<ListEvent>> {
    let events = SCHEDULE.events(db, list_id, limit).await?;
    Ok(events
        .into_iter()
        .map(|(at, kind, detail)| ListEvent { at, kind, detail })
        .collect())
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
        .bind(truncate(&without_credentials(why), MAX_DETAIL_BYTES))
        .bind(now_ms())
        .bind(id)
        .execute(&mut *tx)
        .await?;
    event(&mut tx, id, ListEventKind::ReadFailed, why).await?;
    tx.commit().await?;
    Ok(())
}
