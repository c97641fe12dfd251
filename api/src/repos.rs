//! Wire types of registered repositories and their commits, shared by the
//! REST handlers and the `kbot-server` user CLI.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /api/v1/repos`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RepoCreate {
    /// Short name users refer to the repo by (`linux`, `tip`).
    pub name: String,
    /// A git URL or a path on the server's disk.
    pub url: String,
    /// Defaults to the branch the remote's `HEAD` points at.
    pub default_branch: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RepoView {
    pub id: i64,
    pub name: String,
    pub url: String,
    pub default_branch: String,
    /// Unix milliseconds.
    pub created_at: i64,
}

/// A commit as stored by the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CommitView {
    pub sha: String,
    pub parents: Vec<String>,
    pub subject: String,
    pub author_name: String,
    pub author_email: String,
    pub committer_name: String,
    pub committer_email: String,
    /// Author date, Unix seconds.
    pub author_time: i64,
    /// Committer date, Unix seconds.
    pub commit_time: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RevList {
    pub base: String,
    pub head: String,
    /// `git rev-list --reverse base..head`: oldest first.
    pub commits: Vec<String>,
}
