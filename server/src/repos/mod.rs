//! Registered repositories, their server-side mirrors, and the commits the
//! server has resolved in them.
//!
//! Users name commits the way they think of them (`master`, `v6.12`,
//! `d5387224`); every such name goes through [`resolve_commit`], which asks
//! the mirror, fetches once if the name is new to it, and stores the commit's
//! metadata so reports and the dashboard never need git again.

pub mod git;
pub mod pages;
pub mod routes;
pub mod serve;
mod store;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

pub use store::{
    commit_by_id, commits_by_ids, get_repo, list_repos, repo_by_id, RepoRow, StoredCommit,
};

use crate::error::{Error, Result};
use crate::state::AppState;
use crate::web::without_credentials;
use git::{GitError, Mirror};
use kbot_api::repos::{RepoCreate, RepoView};

/// Longest a clone or fetch may take; a first clone of linux.git over a slow
/// link is the worst case this has to allow.
const GIT_TIMEOUT: Duration = Duration::from_secs(3 * 3600);

/// The mirror of a registered repo, under `<artifact dir>/mirrors/<name>.git`.
/// Its `git am` of mailed patches runs under the server's limits
/// (`KBOT_AM_*`).
pub fn mirror_for(state: &AppState, repo_name: &str) -> Mirror {
    Mirror::at(mirror_path(state, repo_name), GIT_TIMEOUT).with_am_limits(state.config.lists.am)
}

fn mirror_path(state: &AppState, repo_name: &str) -> PathBuf {
    state
        .config
        .artifact_dir
        .join("mirrors")
        .join(format!("{repo_name}.git"))
}

/// Serialises clones and fetches of one mirror within this process: two
/// concurrent `git clone`s into one directory would fail, and two fetches
/// would do the same work twice.
fn sync_lock(path: &std::path::Path) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    locks.entry(path.to_path_buf()).or_default().clone()
}

/// Clones or fetches the mirror, one sync per mirror at a time.
pub async fn sync_mirror(state: &AppState, repo: &RepoRow) -> Result<(), GitError> {
    let mirror = mirror_for(state, &repo.name);
    let lock = sync_lock(mirror.path());
    let _guard = lock.lock().await;
    mirror.sync(&repo.url).await
}

/// The `git patch-id` of commit `sha` of `repo_name`, the key that finds
/// the same change on another commit; `None` (logged) when git gives none.
/// A report still goes out without it; only the de-duplication by patch-id
/// is lost for that commit.
pub async fn patch_id(state: &AppState, repo_name: &str, sha: &str) -> Option<String> {
    match mirror_for(state, repo_name).patch_id(sha).await {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!(repo = repo_name, %sha, error = %e, "no patch-id");
            None
        }
    }
}

/// Deletes refs of the mirror of `repo_name` and compacts it
/// ([`Mirror::delete_refs`]), not while it is being fetched.
pub async fn delete_refs(
    state: &AppState,
    repo_name: &str,
    names: &[String],
) -> Result<(), GitError> {
    let mirror = mirror_for(state, repo_name);
    let lock = sync_lock(mirror.path());
    let _guard = lock.lock().await;
    mirror.delete_refs(names).await
}

/// Registers a repo: checks the name, mirrors the URL (so a wrong URL is
/// refused now rather than at the first submission), and stores it.
pub async fn register(state: &AppState, req: RepoCreate) -> Result<RepoView> {
    validate_name(&req.name)?;
    let url = req.url.trim();
    if url.is_empty() || url.starts_with('-') {
        return Err(Error::BadRequest(format!(
            "repo URL {:?} must be a git URL or a path",
            without_credentials(&req.url)
        )));
    }
    if store::find_repo(state.db.read(), &req.name)
        .await?
        .is_some()
    {
        return Err(Error::Conflict(format!(
            "repo {:?} is already registered",
            req.name
        )));
    }
    let mirror = mirror_for(state, &req.name);
    {
        let lock = sync_lock(mirror.path());
        let _guard = lock.lock().await;
        mirror
            .sync(url)
            .await
            .map_err(|source| Error::RepoUnreachable {
                url: without_credentials(url),
                source,
            })?;
    }
    let default_branch = match req.default_branch {
        Some(branch) => {
            mirror.resolve(&branch).await?;
            branch
        }
        None => mirror.default_branch().await?,
    };
    let row = store::insert_repo(&state.db, &req.name, url, &default_branch).await?;
    tracing::info!(repo = %row.name, url = %without_credentials(&row.url), "repo registered");
    Ok(row.view())
}

/// Resolves a branch, tag or (short) sha in `repo` to a stored commit,
/// fetching the mirror once when the name is unknown to it (a branch pushed
/// since the last fetch).
pub async fn resolve_commit(state: &AppState, repo: &RepoRow, rev: &str) -> Result<StoredCommit> {
    let mirror = mirror_for(state, &repo.name);
    let sha = match mirror.resolve(rev).await {
        Ok(sha) => sha,
        Err(GitError::UnknownRevision { .. } | GitError::Failed { .. }) => {
            sync_mirror(state, repo).await?;
            mirror.resolve(rev).await?
        }
        Err(e) => return Err(e.into()),
    };
    let info = mirror.commit_info(&sha).await?;
    store::upsert_commit(&state.db, repo.id, &info).await
}

/// The commits in `base..head`, oldest first (bisection candidates).
pub async fn rev_list(
    state: &AppState,
    repo: &RepoRow,
    base: &str,
    head: &str,
    first_parent: bool,
) -> Result<Vec<String>> {
    let base = resolve_commit(state, repo, base).await?;
    let head = resolve_commit(state, repo, head).await?;
    let mirror = mirror_for(state, &repo.name);
    Ok(mirror.rev_list(&base.sha, &head.sha, first_parent).await?)
}

fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Error::BadRequest(format!(
            "repo name {name:?} must be 1-64 characters of [A-Za-z0-9._-], not starting with '.'"
        )))
    }
}

/// The tree as a reader can fetch it: its URL without credentials, or the
/// server's own `/git/` URL when the repository was registered from a path
/// on the server's disk.
pub fn public_tree(config: &crate::config::MailConfig, repo_name: &str, url: &str) -> String {
    let networked = url.contains("://") || url.contains('@');
    if networked {
        crate::web::without_credentials(url)
    } else {
        config.git_url(repo_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_names_are_path_safe() {
        for good in ["linux", "tip", "linux-next", "net_next.git2"] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "../x", "a/b", "a b", &"x".repeat(65)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }
}
