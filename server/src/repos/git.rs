//! A server-side bare mirror of one registered repository, driven through the
//! git command line.
//!
//! The mirror lets users name branches, tags or short shas and lets the server
//! read subjects, authors and the commit graph without asking the agents.
//! Every git call runs as a child process on the async runtime
//! (`tokio::process`), with terminal prompts disabled so a URL that wants
//! credentials fails instead of hanging.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

pub use crate::error::GitError;

/// One commit as read from the mirror.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommitInfo {
    /// Full 40-hex id.
    pub sha: String,
    /// Parent ids, first parent first; empty for a root commit.
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

/// A bare mirror (`git clone --mirror`) on the server's disk.
#[derive(Debug, Clone)]
pub struct Mirror {
    path: PathBuf,
    timeout: Duration,
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
        let result = run_git(
            None,
            &["clone", "--mirror", "--quiet", "--", url, &tmp_str],
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
    pub async fn commit_info(&self, sha: &str) -> Result<CommitInfo, GitError> {
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
        let out = run_git_with_input(
            Some(&self.path),
            &["patch-id", "--stable"],
            diff.into_bytes(),
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

    /// Applies `mbox` (patches in order, mboxrd) on `base` with `git am -3`
    /// in a temporary worktree whose sparse checkout holds only the files
    /// the patches touch (`paths`), so a kernel-sized tree costs a few files.
    /// Commits are made by `committer`, dated as authored, so the same
    /// series on the same base always gives the same commits. `Ok(Err)`
    /// carries git am's own words when the series does not apply.
    pub async fn am(
        &self,
        base: &str,
        mbox: Vec<u8>,
        paths: &[String],
        committer: (&str, &str),
    ) -> Result<Result<String, String>, GitError> {
        let base = checked_sha(base)?;
        let dir = self
            .path
            .with_extension(format!("am-{}", std::process::id()));
        let dir = dir.with_file_name(format!(
            "{}-{}",
            dir.file_name().and_then(|n| n.to_str()).unwrap_or("am"),
            rand_suffix()
        ));
        let dir_str = dir.to_string_lossy().into_owned();
        self.git(&[
            "worktree",
            "add",
            "--detach",
            "--no-checkout",
            &dir_str,
            base,
        ])
        .await?;
        let result = am_in(&dir, base, mbox, paths, committer, self.timeout).await;
        // Best effort: a worktree left behind is pruned by the next add.
        let _ = self.git(&["worktree", "remove", "--force", &dir_str]).await;
        let _ = tokio::fs::remove_dir_all(&dir).await;
        let _ = self.git(&["worktree", "prune"]).await;
        result
    }

    async fn git(&self, args: &[&str]) -> Result<String, GitError> {
        run_git(Some(&self.path), args, self.timeout).await
    }
}

/// The `git am` run inside the worktree at `dir`.
async fn am_in(
    dir: &Path,
    base: &str,
    mbox: Vec<u8>,
    paths: &[String],
    (name, email): (&str, &str),
    timeout: Duration,
) -> Result<Result<String, String>, GitError> {
    let at = |args: Vec<String>| {
        let mut all = vec!["-C".to_owned(), dir.to_string_lossy().into_owned()];
        all.extend(args);
        all
    };
    let own = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut sparse = own(&["sparse-checkout", "set", "--no-cone", "--"]);
    // Anchored literal paths; a pattern character in a path would widen the
    // checkout, never narrow it below what the patch touches.
    sparse.extend(paths.iter().map(|p| format!("/{p}")));
    run_git(None, &strs(&at(sparse)), timeout).await?;
    run_git(
        None,
        &strs(&at(own(&["read-tree", "-mu", "HEAD"]))),
        timeout,
    )
    .await?;
    let identity = [format!("user.name={name}"), format!("user.email={email}")];
    let mut am = vec![
        "-c".to_owned(),
        identity[0].clone(),
        "-c".to_owned(),
        identity[1].clone(),
    ];
    am.extend(own(&[
        "am",
        "-3",
        "--committer-date-is-author-date",
        "--patch-format=mboxrd",
    ]));
    if let Some(why) = am_failure(&strs(&at(am)), mbox, timeout).await? {
        let _ = run_git(None, &strs(&at(own(&["am", "--abort"]))), timeout).await;
        return Ok(Err(why));
    }
    let tip = run_git(None, &strs(&at(own(&["rev-parse", "HEAD"]))), timeout).await?;
    let tip = tip.trim().to_owned();
    if tip == base {
        return Ok(Err("git am made no commit".into()));
    }
    Ok(Ok(tip))
}

/// Runs `git am` with the mbox on its input; `Some` of what it said (both
/// streams: "Patch failed at" goes to stdout, the hunk errors to stderr)
/// when it stopped.
async fn am_failure(
    args: &[&str],
    mbox: Vec<u8>,
    timeout: Duration,
) -> Result<Option<String>, GitError> {
    use tokio::io::AsyncWriteExt;
    let mut cmd = git_command(None, args);
    cmd.stdin(Stdio::piped());
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        tokio::spawn(async move {
            let _ = stdin.write_all(&mbox).await;
        });
    }
    let output = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .map_err(|_| GitError::Timeout {
            command: "am".into(),
            secs: timeout.as_secs(),
        })??;
    if output.status.success() {
        return Ok(None);
    }
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(Some(said.trim().to_owned()))
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A short random suffix for a temporary directory's name.
fn rand_suffix() -> String {
    format!("{:08x}", rand::random::<u32>())
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

/// Runs git with `input` on its standard input (written from a separate
/// task, so a large diff cannot deadlock against a full output pipe).
async fn run_git_with_input(
    dir: Option<&Path>,
    args: &[&str],
    input: Vec<u8>,
    timeout: Duration,
) -> Result<String, GitError> {
    use tokio::io::AsyncWriteExt;
    let mut cmd = git_command(dir, args);
    cmd.stdin(Stdio::piped());
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        tokio::spawn(async move {
            // A git that exits early closes the pipe; its status tells why.
            let _ = stdin.write_all(&input).await;
        });
    }
    finish(args, child.wait_with_output(), timeout).await
}

async fn run_git(dir: Option<&Path>, args: &[&str], timeout: Duration) -> Result<String, GitError> {
    let mut cmd = git_command(dir, args);
    cmd.stdin(Stdio::null());
    finish(args, cmd.output(), timeout).await
}

fn git_command(dir: Option<&Path>, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    if let Some(dir) = dir {
        cmd.arg("--git-dir").arg(dir);
    }
    cmd.args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .env("LC_ALL", "C")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Waits for a git child within `timeout`; its stdout, or why it failed.
async fn finish(
    args: &[&str],
    output: impl std::future::Future<Output = std::io::Result<std::process::Output>>,
    timeout: Duration,
) -> Result<String, GitError> {
    let command = args.first().copied().unwrap_or_default().to_owned();
    let output = match tokio::time::timeout(timeout, output).await {
        Ok(out) => out?,
        Err(_) => {
            return Err(GitError::Timeout {
                command,
                secs: timeout.as_secs(),
            })
        }
    };
    if !output.status.success() {
        return Err(GitError::Failed {
            command,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
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

fn parse_commit_line(line: &str) -> Result<CommitInfo, GitError> {
    let bad = |detail| GitError::Parse {
        command: "show".into(),
        detail,
    };
    let fields: Vec<&str> = line.splitn(9, FIELD_SEP).collect();
    let [sha, parents, an, ae, cn, ce, at, ct, subject] = fields[..] else {
        return Err(bad("expected 9 fields"));
    };
    Ok(CommitInfo {
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
