//! What a build reads: a git mirror per repository (a series commit
//! fetched from the server's git), a worktree at the commit, and whether
//! the commit is the watched tree's own.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use kbot_api::agent::RepoSpec;

use super::Builder;
use crate::error::{AgentError, Result};
use crate::process::output;

/// What a build reads: the worktree at the commit, the mirror its `.git`
/// points into, and whether the commit is the watched tree's own.
pub(super) struct Sources {
    pub(super) worktree: PathBuf,
    pub(super) mirror: PathBuf,
    pub(super) trusted: bool,
}

impl Builder {
    pub(super) fn repo_dir(&self, kind: &str, repo: &RepoSpec) -> PathBuf {
        let safe: String = repo
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.cfg.work_dir.join(kind).join(safe)
    }

    /// A bare mirror of the repository that contains `commit`.
    pub(super) fn mirror(&self, repo: &RepoSpec, commit: &str) -> Result<PathBuf> {
        let dir = self.repo_dir("mirrors", repo).with_extension("git");
        if !dir.join("HEAD").is_file() {
            fs::create_dir_all(self.cfg.work_dir.join("mirrors"))
                .map_err(|e| AgentError::io("creating mirrors/", e))?;
            output(
                Command::new("git")
                    .args(["clone", "--mirror", "--quiet", "--", &repo.url])
                    .arg(&dir),
            )?;
        } else if !has_commit(&dir, commit) {
            output(
                Command::new("git")
                    .arg("--git-dir")
                    .arg(&dir)
                    .args(["remote", "update", "--prune"]),
            )?;
        }
        if !has_commit(&dir, commit) {
            if let Some(url) = &repo.series_url {
                // A series kbot applied from a list lives in the server's git
                // only, which wants the agent's token: sent as a header set
                // through git's environment, so it is in no argument, log or
                // config file.
                let mut fetch = Command::new("git");
                fetch.arg("--git-dir").arg(&dir).args([
                    "fetch",
                    "--quiet",
                    "--",
                    url,
                    "+refs/kbot/*:refs/kbot/*",
                ]);
                let identity = self.cfg.work_dir.join("agent.json");
                let id = crate::build_cache::read_json::<crate::client::Identity>(&identity)?;
                if let Some(id) = id.filter(|_| url.starts_with("http")) {
                    fetch.envs([
                        ("GIT_CONFIG_COUNT", "1".to_owned()),
                        ("GIT_CONFIG_KEY_0", "http.extraHeader".to_owned()),
                        (
                            "GIT_CONFIG_VALUE_0",
                            format!("Authorization: Bearer {}", id.agent_token),
                        ),
                    ]);
                }
                output(&mut fetch)?;
            }
        }
        if !has_commit(&dir, commit) {
            return Err(AgentError::Command {
                command: "git cat-file".into(),
                detail: format!("{commit} is not in {}", repo.url),
            });
        }
        Ok(dir)
    }

    /// One worktree per repository, moved to `commit`: files that did not
    /// change keep their mtimes, so make rebuilds only what the commit touched.
    pub(super) fn worktree(&self, repo: &RepoSpec, mirror: &Path, commit: &str) -> Result<PathBuf> {
        let dir = self.repo_dir("worktrees", repo);
        if !dir.join(".git").exists() {
            fs::create_dir_all(self.cfg.work_dir.join("worktrees"))
                .map_err(|e| AgentError::io("creating worktrees/", e))?;
            output(
                Command::new("git")
                    .arg("--git-dir")
                    .arg(mirror)
                    .args(["worktree", "prune"]),
            )?;
            output(
                Command::new("git")
                    .arg("--git-dir")
                    .arg(mirror)
                    .args(["worktree", "add", "--detach", "--force"])
                    .arg(&dir)
                    .arg(commit),
            )?;
        } else {
            output(
                Command::new("git")
                    .arg("-C")
                    .arg(&dir)
                    .args(["checkout", "--quiet", "--detach", "--force", commit]),
            )?;
            output(
                Command::new("git")
                    .arg("-C")
                    .arg(&dir)
                    .args(["clean", "-fdq"]),
            )?;
        }
        Ok(dir)
    }
}

/// Whether `commit` is on the watched tree: reachable from a ref the mirror
/// has from the repository itself, not only from kbot's series refs
/// (`refs/kbot/`). In doubt (git fails), it is not.
pub(super) fn on_watched_tree(git_dir: &Path, commit: &str) -> bool {
    let refs = output(Command::new("git").arg("--git-dir").arg(git_dir).args([
        "for-each-ref",
        "--format=%(refname)",
        "--contains",
        commit,
    ]));
    refs.is_ok_and(|r| r.lines().any(|l| !l.starts_with("refs/kbot/")))
}

pub(super) fn has_commit(git_dir: &Path, commit: &str) -> bool {
    Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
