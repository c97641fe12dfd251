//! A server-side bare mirror of one registered repository, driven through the
//! git command line.
//!
//! The mirror lets users name branches, tags or short shas and lets the server
//! read subjects, authors and the commit graph without asking the agents.
//! Every git call runs as a child process on the async runtime
//! (`tokio::process`), with terminal prompts disabled so a URL that wants
//! credentials fails instead of hanging ([`run`]). A mailed series is
//! applied with `git am` in a throw-away worktree of the mirror ([`Mirror::am`]).

mod am;
mod run;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::config::AmLimits;
pub use crate::error::GitError;
pub use am::{binary_bytes, sparse_pattern, Am};
/// One commit as read from the mirror: the wire's view of a commit, as
/// the store keeps it.
pub use kbot_api::repos::CommitView;
use run::run_text;
pub use run::{outcome, run, spawn};

/// A bare mirror (`git clone --mirror`) on the server's disk.
#[derive(Debug, Clone)]
pub struct Mirror {
    path: PathBuf,
    timeout: Duration,
    /// What [`Mirror::am`] may cost: it applies mailed patches.
    am_limits: AmLimits,
}

/// Separates the fields of `git show --format`; NUL never occurs in them.
const FIELD_SEP: char = '\u{0}';
const COMMIT_FORMAT: &str = "--format=%H%x00%P%x00%an%x00%ae%x00%cn%x00%ce%x00%at%x00%ct%x00%s";

impl Mirror {
    /// The mirror at `path`, whether or not it exists yet.
    pub fn at(path: impl Into<PathBuf>, timeout: Duration) -> Mirror {
        Mirror {
            path: path.into(),
            timeout,
            am_limits: AmLimits::default(),
        }
    }

    /// The same mirror, whose [`Mirror::am`] runs under `limits`.
    pub fn with_am_limits(self, limits: AmLimits) -> Mirror {
        Mirror {
            am_limits: limits,
            ..self
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Clones `url` (a URL or a local path) into the mirror if it is not there
    /// yet, otherwise fetches every ref with pruning.
    pub async fn sync(&self, url: &str) -> Result<(), GitError> {
        if self.path.join("HEAD").is_file() {
            // Branches and tags only: pruning every ref (`remote update
            // --prune` on a `--mirror` clone) would delete the series kbot
            // applied under `refs/kbot/`.
            self.git(&[
                "fetch",
                "--prune",
                "--quiet",
                "origin",
                "+refs/heads/*:refs/heads/*",
                "+refs/tags/*:refs/tags/*",
            ])
            .await?;
            return Ok(());
        }
        if let Some(parent) = self.path.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        // Clone into a temporary sibling and rename, so a failed or interrupted
        // clone never leaves a half-made mirror that looks valid.
        let tmp = self.path.with_extension("cloning");
        if tmp.exists() {
            tokio::fs::remove_dir_all(&tmp).await?;
        }
        let tmp_str = tmp.to_string_lossy().into_owned();
        let result = run_text(
            None,
            &["clone", "--mirror", "--quiet", "--", url, &tmp_str],
            None,
            self.timeout,
        )
        .await;
        if let Err(e) = result {
            let _ = tokio::fs::remove_dir_all(&tmp).await;
            return Err(e);
        }
        tokio::fs::rename(&tmp, &self.path).await?;
        Ok(())
    }

    /// Resolves a branch, tag, short sha or any `rev-parse` revision to the
    /// full id of the commit it names.
    pub async fn resolve(&self, rev: &str) -> Result<String, GitError> {
        validate_rev(rev)?;
        let spec = format!("{rev}^{{commit}}");
        match self
            .git(&[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &spec,
            ])
            .await
        {
            Ok(out) => {
                let sha = out.trim();
                if is_full_sha(sha) {
                    Ok(sha.to_owned())
                } else {
                    Err(GitError::Parse {
                        command: "rev-parse".into(),
                        detail: "not a 40-hex commit id",
                    })
                }
            }
            // `--verify --quiet` exits 1 without output for an unknown name.
            Err(GitError::Failed { .. }) => Err(GitError::UnknownRevision { rev: rev.into() }),
            Err(e) => Err(e),
        }
    }

    /// Reads one commit's parents, subject, author and committer.
    pub async fn commit_info(&self, sha: &str) -> Result<CommitView, GitError> {
        let full = self.resolve(sha).await?;
        let out = self
            .git(&["show", "-s", "--no-show-signature", COMMIT_FORMAT, &full])
            .await?;
        parse_commit_line(out.trim_end_matches('\n'))
    }

    /// The commits reachable from `head` but not from `base`, oldest first
    /// (`git rev-list --reverse base..head`): the candidates of a bisection.
    pub async fn rev_list(
        &self,
        base: &str,
        head: &str,
        first_parent: bool,
    ) -> Result<Vec<String>, GitError> {
        let base = self.resolve(base).await?;
        let head = self.resolve(head).await?;
        let range = format!("{base}..{head}");
        let mut args = vec!["rev-list", "--reverse"];
        if first_parent {
            args.push("--first-parent");
        }
        args.push(&range);
        let out = self.git(&args).await?;
        Ok(out.lines().map(str::to_owned).collect())
    }

    /// The branch the mirror's `HEAD` points at (the remote's default branch).
    pub async fn default_branch(&self) -> Result<String, GitError> {
        let out = self.git(&["symbolic-ref", "--short", "HEAD"]).await?;
        Ok(out.trim().to_owned())
    }

    /// Whether `ancestor` is reachable from `descendant`.
    pub async fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Result<bool, GitError> {
        let a = self.resolve(ancestor).await?;
        let d = self.resolve(descendant).await?;
        match self.git(&["merge-base", "--is-ancestor", &a, &d]).await {
            Ok(_) => Ok(true),
            Err(GitError::Failed { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The commits a bisection may still test: reachable from `bad` but from
    /// none of `goods`, `bad` itself excluded. `best_first` orders them as
    /// `git bisect` would pick them (`--bisect-all`: the commit that halves
    /// the range first); otherwise in topological order, newest first.
    /// Every argument must be a full sha.
    pub async fn bisect_candidates(
        &self,
        bad: &str,
        goods: &[String],
        best_first: bool,
    ) -> Result<Vec<String>, GitError> {
        let mut args = vec!["rev-list".to_owned()];
        args.push(
            if best_first {
                "--bisect-all"
            } else {
                "--topo-order"
            }
            .to_owned(),
        );
        args.push(checked_sha(bad)?.to_owned());
        for good in goods {
            args.push(format!("^{}", checked_sha(good)?));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.git(&args).await?;
        Ok(out
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .filter(|sha| *sha != bad)
            .map(str::to_owned)
            .collect())
    }

    /// `git patch-id --stable` of a commit's diff against its first parent:
    /// the same change rebased or cherry-picked elsewhere has the same id.
    /// `None` for a commit without a diff (an empty commit or a clean merge).
    pub async fn patch_id(&self, sha: &str) -> Result<Option<String>, GitError> {
        let sha = checked_sha(sha)?;
        let diff = self
            .git(&[
                "diff-tree",
                "-p",
                "--no-color",
                "--first-parent",
                "--root",
                sha,
            ])
            .await?;
        let out = run_text(
            Some(&self.path),
            &["patch-id", "--stable"],
            Some(diff.into_bytes()),
            self.timeout,
        )
        .await?;
        Ok(out.split_whitespace().next().map(str::to_owned))
    }

    /// The newest commit on `branch`'s first-parent line committed at or
    /// before `unix_secs`: the branch head when a mail was posted.
    pub async fn head_at(&self, branch: &str, unix_secs: i64) -> Result<String, GitError> {
        let head = self.resolve(branch).await?;
        let before = format!("--before={unix_secs}");
        let out = self
            .git(&["rev-list", "-1", "--first-parent", &before, &head])
            .await?;
        let sha = out.trim();
        if is_full_sha(sha) {
            Ok(sha.to_owned())
        } else {
            Err(GitError::UnknownRevision {
                rev: format!("{branch}@{unix_secs}"),
            })
        }
    }

    /// Commits on `branch` committed since `since_secs` whose message holds
    /// `needle` (a fixed string), newest first.
    pub async fn grep_log(
        &self,
        branch: &str,
        since_secs: i64,
        needle: &str,
    ) -> Result<Vec<String>, GitError> {
        let head = self.resolve(branch).await?;
        let since = format!("--since={since_secs}");
        let grep = format!("--grep={needle}");
        let out = self
            .git(&["log", "-F", &grep, &since, "--format=%H", &head])
            .await?;
        Ok(out
            .lines()
            .map(str::trim)
            .filter(|l| is_full_sha(l))
            .map(str::to_owned)
            .collect())
    }

    /// Commits on `branch` committed since `since_secs` whose subject line
    /// is exactly `title`, newest first (a `#kbot fix:` names a title, as
    /// syzbot's `#syz fix:` does: equality, never a search of the message).
    pub async fn titled(
        &self,
        branch: &str,
        since_secs: i64,
        title: &str,
    ) -> Result<Vec<String>, GitError> {
        let head = self.resolve(branch).await?;
        let since = format!("--since={since_secs}");
        let out = self
            .git(&["log", &since, "--format=%H%x00%s", &head])
            .await?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once('\0'))
            .filter(|(sha, subject)| is_full_sha(sha) && *subject == title)
            .map(|(sha, _)| sha.to_owned())
            .collect())
    }

    /// The text of `path` at commit `sha`; `None` when the commit has no
    /// such file.
    pub async fn file_at(&self, sha: &str, path: &str) -> Result<Option<String>, GitError> {
        if !is_full_sha(sha) {
            return Err(GitError::UnknownRevision { rev: sha.into() });
        }
        let spec = format!("{sha}:{path}");
        match self.git(&["show", "--end-of-options", &spec]).await {
            Ok(text) => Ok(Some(text)),
            Err(GitError::Failed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The paths commit `sha` changes against its first parent.
    pub async fn touched_files(&self, sha: &str) -> Result<Vec<String>, GitError> {
        if !is_full_sha(sha) {
            return Err(GitError::UnknownRevision { rev: sha.into() });
        }
        let out = self
            .git(&[
                "diff-tree",
                "--root",
                "--no-commit-id",
                "--name-only",
                "-r",
                "-z",
                sha,
            ])
            .await?;
        Ok(out
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// `git show` of commit `sha` for people: its header, message, diffstat
    /// and patch, without colour.
    pub async fn show(&self, sha: &str) -> Result<String, GitError> {
        if !is_full_sha(sha) {
            return Err(GitError::UnknownRevision { rev: sha.into() });
        }
        self.git(&[
            "show",
            "--format=fuller",
            "--stat",
            "--patch",
            "--no-color",
            "--end-of-options",
            sha,
        ])
        .await
    }

    /// Whether the mirror has `sha` as a commit (no fetch).
    pub async fn has_commit(&self, sha: &str) -> bool {
        let spec = format!("{sha}^{{commit}}");
        is_full_sha(sha) && self.git(&["cat-file", "-e", &spec]).await.is_ok()
    }

    /// Points `name` (a `refs/kbot/...` ref) at `sha`, and refreshes the
    /// files git's dumb HTTP transport reads, so the ref can be fetched
    /// from the server.
    pub async fn set_ref(&self, name: &str, sha: &str) -> Result<(), GitError> {
        if !name.starts_with("refs/kbot/") {
            return Err(GitError::InvalidRevision {
                rev: name.into(),
                reason: "kbot writes refs under refs/kbot/ only",
            });
        }
        self.git(&["update-ref", name, checked_sha(sha)?]).await?;
        self.update_server_info().await
    }

    /// `git update-server-info`: `info/refs` and `objects/info/packs`.
    pub async fn update_server_info(&self) -> Result<(), GitError> {
        self.git(&["update-server-info"]).await.map(drop)
    }

    /// Fetches `branch` (or every branch, `*`) of the mirror `other` into
    /// `refs/kbot/trees/NAME/`; the local ref of `branch`.
    pub async fn fetch_trees(
        &self,
        other: &Mirror,
        name: &str,
        branch: &str,
    ) -> Result<String, GitError> {
        if branch != "*" {
            validate_rev(branch)?;
        }
        validate_rev(name)?;
        let local = format!("refs/kbot/trees/{name}/{branch}");
        let refspec = format!("+refs/heads/{branch}:{local}");
        let from = other.path.to_string_lossy().into_owned();
        self.git(&["fetch", "--quiet", "--no-tags", &from, &refspec])
            .await?;
        Ok(local)
    }

    /// The branches (`refs/heads/`, short names) whose history holds `sha`,
    /// a full sha.
    pub async fn branches_containing(&self, sha: &str) -> Result<Vec<String>, GitError> {
        validate_rev(sha)?;
        let contains = format!("--contains={sha}");
        let out = self
            .git(&[
                "for-each-ref",
                "--format=%(refname:short)",
                &contains,
                "refs/heads/",
            ])
            .await?;
        Ok(out.lines().map(str::to_owned).collect())
    }

    /// The names of the refs under `prefix` (`refs/kbot/`).
    pub async fn ref_names(&self, prefix: &str) -> Result<Vec<String>, GitError> {
        let out = self
            .git(&["for-each-ref", "--format=%(refname)", prefix])
            .await?;
        Ok(out.lines().map(str::to_owned).collect())
    }

    /// Deletes `names` (refs under `refs/kbot/`) in one transaction, then
    /// packs the refs, lets git collect garbage if it is due (`gc --auto`:
    /// the deleted series' objects go once unreachable long enough) and
    /// refreshes the files of the dumb HTTP transport.
    pub async fn delete_refs(&self, names: &[String]) -> Result<(), GitError> {
        if let Some(bad) = names.iter().find(|n| !n.starts_with("refs/kbot/")) {
            return Err(GitError::InvalidRevision {
                rev: bad.clone(),
                reason: "kbot deletes refs under refs/kbot/ only",
            });
        }
        let script: String = names.iter().map(|n| format!("delete {n}\n")).collect();
        run_text(
            Some(&self.path),
            &["update-ref", "--stdin"],
            Some(script.into_bytes()),
            self.timeout,
        )
        .await?;
        self.git(&["pack-refs", "--all", "--prune"]).await?;
        self.git(&["gc", "--auto", "--quiet"]).await?;
        self.update_server_info().await
    }

    async fn git(&self, args: &[&str]) -> Result<String, GitError> {
        run_text(Some(&self.path), args, None, self.timeout).await
    }
}

fn checked_sha(sha: &str) -> Result<&str, GitError> {
    if is_full_sha(sha) {
        Ok(sha)
    } else {
        Err(GitError::InvalidRevision {
            rev: sha.into(),
            reason: "not a full 40-hex commit id",
        })
    }
}
/// Refuses revisions git would parse as an option, a range or a path, so user
/// input can only ever name a single commit.
pub fn validate_rev(rev: &str) -> Result<(), GitError> {
    let bad = |reason| {
        Err(GitError::InvalidRevision {
            rev: rev.into(),
            reason,
        })
    };
    if rev.is_empty() {
        return bad("empty");
    }
    if rev.len() > 256 {
        return bad("longer than 256 characters");
    }
    if rev.starts_with('-') {
        return bad("starts with '-'");
    }
    if rev.contains("..") {
        return bad("ranges are not accepted");
    }
    if rev
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == ':')
    {
        return bad("contains whitespace, control characters or ':'");
    }
    Ok(())
}

pub fn is_full_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn parse_commit_line(line: &str) -> Result<CommitView, GitError> {
    let bad = |detail| GitError::Parse {
        command: "show".into(),
        detail,
    };
    let fields: Vec<&str> = line.splitn(9, FIELD_SEP).collect();
    let [sha, parents, an, ae, cn, ce, at, ct, subject] = fields[..] else {
        return Err(bad("expected 9 fields"));
    };
    Ok(CommitView {
        sha: sha.to_owned(),
        parents: parents.split_whitespace().map(str::to_owned).collect(),
        subject: subject.to_owned(),
        author_name: an.to_owned(),
        author_email: ae.to_owned(),
        committer_name: cn.to_owned(),
        committer_email: ce.to_owned(),
        author_time: at.parse().map_err(|_| bad("author time"))?,
        commit_time: ct.parse().map_err(|_| bad("commit time"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_option_like_and_range_revisions() {
        for rev in ["", "-x", "--all", "a..b", "a b", "HEAD:file", "a\nb"] {
            assert!(
                matches!(validate_rev(rev), Err(GitError::InvalidRevision { .. })),
                "{rev:?} accepted"
            );
        }
        for rev in ["main", "v6.1", "abc1234", "HEAD~2", "feature/x", "v1^"] {
            assert!(validate_rev(rev).is_ok(), "{rev:?} refused");
        }
    }

    #[test]
    fn parses_show_line_with_two_parents() {
        let line = format!(
            "{a}\0{b} {c}\0Ann\0ann@x\0Cid\0cid@y\01700000000\01700000100\0Merge: pipe fix",
            a = "a".repeat(40),
            b = "b".repeat(40),
            c = "c".repeat(40)
        );
        let info = parse_commit_line(&line).expect("parses");
        assert_eq!(info.parents, vec!["b".repeat(40), "c".repeat(40)]);
        assert_eq!(info.subject, "Merge: pipe fix");
        assert_eq!(info.author_email, "ann@x");
        assert_eq!(info.commit_time, 1_700_000_100);
    }

    #[test]
    fn refuses_truncated_show_line() {
        assert!(matches!(
            parse_commit_line("abc\0def"),
            Err(GitError::Parse { .. })
        ));
    }
}
