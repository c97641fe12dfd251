//! SQL for the `repos` and `commits` tables.

use sqlx::any::AnyRow;
use sqlx::{AnyPool, Row};

use crate::db::Db;
use crate::error::{Error, Result};
use crate::repos::git::CommitInfo;
use crate::time::now_ms;
use kbot_api::repos::{CommitView, RepoView};

#[derive(Debug, Clone)]
pub struct RepoRow {
    pub id: i64,
    pub name: String,
    pub url: String,
    pub default_branch: String,
    pub created_at: i64,
}

impl RepoRow {
    pub fn view(&self) -> RepoView {
        RepoView {
            id: self.id,
            name: self.name.clone(),
            url: self.url.clone(),
            default_branch: self.default_branch.clone(),
            created_at: self.created_at,
        }
    }

    fn from_row(row: &AnyRow) -> Result<RepoRow> {
        Ok(RepoRow {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            url: row.try_get("url")?,
            default_branch: row.try_get("default_branch")?,
            created_at: row.try_get("created_at")?,
        })
    }
}

/// A commit row: its id in `commits` plus what git said about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCommit {
    pub id: i64,
    pub repo_id: i64,
    pub sha: String,
    pub view: CommitView,
}

impl StoredCommit {
    /// The commit as tables and reports name it.
    pub fn commit_ref(&self) -> kbot_core::table::CommitRef {
        kbot_core::table::CommitRef {
            sha: self.sha.clone(),
            subject: self.view.subject.clone(),
        }
    }
}

const REPO_COLUMNS: &str = "id, name, url, default_branch, created_at";
const COMMIT_COLUMNS: &str = "id, repo_id, sha, parents, subject, author_name, author_email, \
     committer_name, committer_email, authored_at, committed_at";

pub(super) async fn find_repo(pool: &AnyPool, name: &str) -> Result<Option<RepoRow>> {
    let row = sqlx::query(&format!("SELECT {REPO_COLUMNS} FROM repos WHERE name = $1"))
        .bind(name)
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(RepoRow::from_row).transpose()
}

/// The registered repo called `name`, or `unknown_repo`.
pub async fn get_repo(db: &Db, name: &str) -> Result<RepoRow> {
    find_repo(db.read(), name)
        .await?
        .ok_or_else(|| Error::UnknownRepo(name.to_owned()))
}

/// The registered repo with this id.
pub async fn repo_by_id(db: &Db, id: i64) -> Result<RepoRow> {
    let row = sqlx::query(&format!("SELECT {REPO_COLUMNS} FROM repos WHERE id = $1"))
        .bind(id)
        .fetch_optional(db.read())
        .await?
        .ok_or_else(|| Error::not_found("repo", id))?;
    RepoRow::from_row(&row)
}

pub async fn list_repos(db: &Db) -> Result<Vec<RepoRow>> {
    let rows = sqlx::query(&format!("SELECT {REPO_COLUMNS} FROM repos ORDER BY name"))
        .fetch_all(db.read())
        .await?;
    rows.iter().map(RepoRow::from_row).collect()
}

pub(super) async fn insert_repo(
    db: &Db,
    name: &str,
    url: &str,
    default_branch: &str,
) -> Result<RepoRow> {
    let row = sqlx::query(&format!(
        "INSERT INTO repos (name, url, default_branch, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (name) DO NOTHING RETURNING {REPO_COLUMNS}"
    ))
    .bind(name)
    .bind(url)
    .bind(default_branch)
    .bind(now_ms())
    .fetch_optional(db.write())
    .await?;
    match row {
        Some(row) => RepoRow::from_row(&row),
        // Lost a race with a concurrent registration of the same name.
        None => Err(Error::Conflict(format!(
            "repo {name:?} is already registered"
        ))),
    }
}

/// Stores (or refreshes) a commit read from the mirror; returns its row.
pub(super) async fn upsert_commit(
    db: &Db,
    repo_id: i64,
    info: &CommitInfo,
) -> Result<StoredCommit> {
    let row = sqlx::query(&format!(
        "INSERT INTO commits (repo_id, sha, parents, subject, author_name, author_email, \
             committer_name, committer_email, authored_at, committed_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
         ON CONFLICT (repo_id, sha) DO UPDATE SET committer_name = excluded.committer_name, \
             committer_email = excluded.committer_email \
         RETURNING {COMMIT_COLUMNS}"
    ))
    .bind(repo_id)
    .bind(&info.sha)
    .bind(info.parents.join(" "))
    .bind(&info.subject)
    .bind(&info.author_name)
    .bind(&info.author_email)
    .bind(&info.committer_name)
    .bind(&info.committer_email)
    .bind(info.author_time.saturating_mul(1000))
    .bind(info.commit_time.saturating_mul(1000))
    .fetch_one(db.write())
    .await?;
    commit_from_row(&row)
}

pub async fn commit_by_id(pool: &AnyPool, id: i64) -> Result<StoredCommit> {
    let row = sqlx::query(&format!(
        "SELECT {COMMIT_COLUMNS} FROM commits WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| Error::not_found("commit", id))?;
    commit_from_row(&row)
}

fn commit_from_row(row: &AnyRow) -> Result<StoredCommit> {
    let parents: String = row.try_get("parents")?;
    let authored_at: i64 = row.try_get("authored_at")?;
    let committed_at: i64 = row.try_get("committed_at")?;
    let sha: String = row.try_get("sha")?;
    Ok(StoredCommit {
        id: row.try_get("id")?,
        repo_id: row.try_get("repo_id")?,
        sha: sha.clone(),
        view: CommitView {
            sha,
            parents: parents.split_whitespace().map(str::to_owned).collect(),
            subject: row.try_get("subject")?,
            author_name: row.try_get("author_name")?,
            author_email: row.try_get("author_email")?,
            committer_name: row.try_get("committer_name")?,
            committer_email: row.try_get("committer_email")?,
            author_time: authored_at / 1000,
            commit_time: committed_at / 1000,
        },
    })
}
