//! SQL for the `repos` and `commits` tables.

use sqlx::AnyPool;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::time::now_ms;
use crate::web::without_credentials;
use kbot_api::repos::{CommitView, RepoView};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RepoRow {
    pub id: i64,
    pub name: String,
    pub url: String,
    pub default_branch: String,
    pub created_at: i64,
}

impl RepoRow {
    /// The repo as the API and the CLI show it: its URL without
    /// credentials (the stored one keeps them, to fetch with).
    pub fn view(&self) -> RepoView {
        RepoView {
            id: self.id,
            name: self.name.clone(),
            url: without_credentials(&self.url),
            default_branch: self.default_branch.clone(),
            created_at: self.created_at,
        }
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
    Ok(
        sqlx::query_as::<_, RepoRow>(&format!("SELECT {REPO_COLUMNS} FROM repos WHERE name = $1"))
            .bind(name)
            .fetch_optional(pool)
            .await?,
    )
}

/// The registered repo called `name`, or `unknown_repo`.
pub async fn get_repo(db: &Db, name: &str) -> Result<RepoRow> {
    find_repo(db.read(), name)
        .await?
        .ok_or_else(|| Error::UnknownRepo(name.to_owned()))
}

/// The registered repo with this id.
pub async fn repo_by_id(db: &Db, id: i64) -> Result<RepoRow> {
    sqlx::query_as::<_, RepoRow>(&format!("SELECT {REPO_COLUMNS} FROM repos WHERE id = $1"))
        .bind(id)
        .fetch_optional(db.read())
        .await?
        .ok_or_else(|| Error::not_found("repo", id))
}

pub async fn list_repos(db: &Db) -> Result<Vec<RepoRow>> {
    Ok(
        sqlx::query_as::<_, RepoRow>(&format!("SELECT {REPO_COLUMNS} FROM repos ORDER BY name"))
            .fetch_all(db.read())
            .await?,
    )
}

pub(super) async fn insert_repo(
    db: &Db,
    name: &str,
    url: &str,
    default_branch: &str,
) -> Result<RepoRow> {
    let row = sqlx::query_as::<_, RepoRow>(&format!(
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
        Some(row) => Ok(row),
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
    info: &CommitView,
) -> Result<StoredCommit> {
    let row = sqlx::query_as::<_, CommitRecord>(&format!(
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
    Ok(row.into())
}

pub async fn commit_by_id(pool: &AnyPool, id: i64) -> Result<StoredCommit> {
    sqlx::query_as::<_, CommitRecord>(&format!(
        "SELECT {COMMIT_COLUMNS} FROM commits WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?
    .map(StoredCommit::from)
    .ok_or_else(|| Error::not_found("commit", id))
}

/// The commits of `ids` that exist, by id, in one query (a page listing
/// pairs reads its commits at once, not two a row).
pub async fn commits_by_ids(
    pool: &AnyPool,
    ids: &[i64],
) -> Result<std::collections::HashMap<i64, StoredCommit>> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let sql = format!(
        "SELECT {COMMIT_COLUMNS} FROM commits WHERE id IN ({})",
        crate::db::placeholders(1, ids.len())
    );
    let mut query = sqlx::query_as::<_, CommitRecord>(&sql);
    for id in ids {
        query = query.bind(id);
    }
    let rows = query.fetch_all(pool).await?;
    Ok(rows
        .into_iter()
        .map(StoredCommit::from)
        .map(|c| (c.id, c))
        .collect())
}

/// A `commits` row as [`COMMIT_COLUMNS`] reads it.
#[derive(sqlx::FromRow)]
struct CommitRecord {
    id: i64,
    repo_id: i64,
    sha: String,
    /// Space-separated shas.
    parents: String,
    subject: String,
    author_name: String,
    author_email: String,
    committer_name: String,
    committer_email: String,
    /// Unix milliseconds.
    authored_at: i64,
    committed_at: i64,
}

impl From<CommitRecord> for StoredCommit {
    fn from(r: CommitRecord) -> StoredCommit {
        StoredCommit {
            id: r.id,
            repo_id: r.repo_id,
            sha: r.sha.clone(),
            view: CommitView {
                sha: r.sha,
                parents: r.parents.split_whitespace().map(str::to_owned).collect(),
                subject: r.subject,
                author_name: r.author_name,
                author_email: r.author_email,
                committer_name: r.committer_name,
                committer_email: r.committer_email,
                author_time: r.authored_at / 1000,
                commit_time: r.committed_at / 1000,
            },
        }
    }
}
