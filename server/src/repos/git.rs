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

pub use crate::config::AmLimits;
pub use crate::error::GitError;
use crate::web::without_credentials;

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

    /// Applies `mbox` (patches in order, mboxrd) on `base` with `git am -3`
    /// in a temporary worktree whose sparse checkout holds only the files
    /// the patches touch (`paths`, taken literally), so a kernel-sized tree
    /// costs a few files. Commits are made by `committer`, dated as
    /// authored, so the same series on the same base always gives the same
    /// commits. [`Am::Refused`] carries git am's own words when the series
    /// does not apply, or why it was not tried: binary patches that declare
    /// more than the limit (an inflate bomb of a few MB can write GBs). The
    /// patches come from anyone who can post to a list, so `git am` runs
    /// under an address-space limit and a time limit ([`AmLimits`]).
    pub async fn am(
        &self,
        base: &str,
        mbox: Vec<u8>,
        paths: &[String],
        committer: (&str, &str),
    ) -> Result<Am, GitError> {
        let base = checked_sha(base)?;
        let declared = binary_bytes(&mbox);
        if declared > self.am_limits.max_binary_bytes {
            return Ok(Am::Refused(format!(
                "binary patches declare {declared} bytes, larger than the {} bytes kbot applies",
                self.am_limits.max_binary_bytes
            )));
        }
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
        let result = am_in(&dir, base, mbox, paths, committer, self.am_limits).await;
        // Best effort: a worktree left behind is pruned by the next add.
        let _ = self.git(&["worktree", "remove", "--force", &dir_str]).await;
        let _ = tokio::fs::remove_dir_all(&dir).await;
        let _ = self.git(&["worktree", "prune"]).await;
        result
    }

    async fn git(&self, args: &[&str]) -> Result<String, GitError> {
        run_text(Some(&self.path), args, None, self.timeout).await
    }
}

/// What `git am` made of a series on a base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Am {
    /// Every patch applied: the tip commit.
    Applied(String),
    /// Not applied: git am's own words, or why it was not tried. The
    /// series' answer, not a fault of kbot's.
    Refused(String),
}

/// The `git am` run inside the worktree at `dir`.
async fn am_in(
    dir: &Path,
    base: &str,
    mbox: Vec<u8>,
    paths: &[String],
    (name, email): (&str, &str),
    limits: AmLimits,
) -> Result<Am, GitError> {
    let timeout = limits.timeout;
    let at = |args: Vec<String>| {
        let mut all = vec!["-C".to_owned(), dir.to_string_lossy().into_owned()];
        all.extend(args);
        all
    };
    let own = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let sparse = own(&["sparse-checkout", "set", "--no-cone", "--stdin"]);
    // Anchored literal paths, one a line on the input (a mail may name more
    // than a command line holds).
    let patterns: String = paths.iter().map(|p| sparse_pattern(p) + "\n").collect();
    run_text(
        None,
        &strs(&at(sparse)),
        Some(patterns.into_bytes()),
        timeout,
    )
    .await?;
    run_text(
        None,
        &strs(&at(own(&["read-tree", "-mu", "HEAD"]))),
        None,
        timeout,
    )
    .await?;
    let identity = [format!("user.name={name}"), format!("user.email={email}")];
    let mut am = Vec::new();
    // Pack windows are mmapped: kept well under the address-space limit, so
    // a large repository does not trip it.
    for c in [&identity[0], &identity[1], PACK_WINDOW, PACK_LIMIT] {
        am.extend(["-c".to_owned(), c.to_owned()]);
    }
    am.extend(own(&[
        "am",
        "-3",
        "--committer-date-is-author-date",
        "--patch-format=mboxrd",
    ]));
    if let Some(why) = am_failure(&strs(&at(am)), mbox, limits).await? {
        let _ = run_text(None, &strs(&at(own(&["am", "--abort"]))), None, timeout).await;
        return Ok(Am::Refused(why));
    }
    let tip = run_text(None, &strs(&at(own(&["rev-parse", "HEAD"]))), None, timeout).await?;
    let tip = tip.trim().to_owned();
    if tip == base {
        return Ok(Am::Refused("git am made no commit".into()));
    }
    Ok(Am::Applied(tip))
}

/// Runs `git am` with the mbox on its input; `Some` of what it said (both
/// streams: "Patch failed at" goes to stdout, the hunk errors to stderr)
/// when it stopped.
async fn am_failure(
    args: &[&str],
    mbox: Vec<u8>,
    limits: AmLimits,
) -> Result<Option<String>, GitError> {
    use tokio::io::AsyncWriteExt;
    let timeout = limits.timeout;
    let mut cmd = git_command(None, args);
    cmd.stdin(Stdio::piped());
    let memory = limits.memory_bytes;
    // SAFETY: the closure runs between fork and exec and makes one
    // async-signal-safe system call (setrlimit), allocating nothing.
    unsafe {
        cmd.pre_exec(move || {
            use nix::sys::resource::{setrlimit, Resource};
            setrlimit(Resource::RLIMIT_AS, memory, memory).map_err(std::io::Error::from)
        });
    }
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

/// `git am`'s pack mmap window and total (git's defaults on 64-bit are
/// 1 GiB and 32 GiB).
const PACK_WINDOW: &str = "core.packedGitWindowSize=64m";
const PACK_LIMIT: &str = "core.packedGitLimit=512m";

/// The sizes the `literal N` and `delta N` lines of an mbox's binary
/// patches (`GIT binary patch`) declare, summed: what `git am` would
/// inflate and write. Diff lines start with a blank, `+` or `-`, so no line
/// of a text patch reads as one.
pub fn binary_bytes(mbox: &[u8]) -> u64 {
    mbox.split(|&b| b == b'\n')
        .filter_map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let n = line
                .strip_prefix(b"literal ")
                .or_else(|| line.strip_prefix(b"delta "))?;
            let digits = std::str::from_utf8(n).ok()?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // More digits than a u64 holds is more than any limit.
            Some(digits.parse::<u64>().unwrap_or(u64::MAX))
        })
        .fold(0u64, u64::saturating_add)
}

/// A path as a sparse-checkout pattern that matches that path only:
/// anchored with `/`, and every character gitignore patterns give a meaning
/// (`* ? [ ] \ !` and `#`, and a trailing blank) escaped with a backslash.
/// A path `*` would otherwise check out the whole tree.
pub fn sparse_pattern(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 8);
    out.push('/');
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '!' | '#' | ' ' | '\t') {
            out.push('\\');
        }
        out.push(c);
    }
    out
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

/// [`run`] within `timeout`, its output as text.
async fn run_text(
    dir: Option<&Path>,
    args: &[&str],
    input: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<String, GitError> {
    let out = run(dir, args, input, Some(timeout)).await?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The server's one git runner: git on the repository `dir` (its git
/// directory; none for a command run inside a worktree), `input` on its
/// standard input, ended after `timeout` (or by dropping the future, for
/// callers with a timeout of their own). Its standard output as bytes (an
/// archive's messages need not be UTF-8), or why it failed.
pub async fn run(
    dir: Option<&Path>,
    args: &[&str],
    input: Option<Vec<u8>>,
    timeout: Option<Duration>,
) -> Result<Vec<u8>, GitError> {
    let output = spawn(dir, args, input)?.wait_with_output();
    let output = match timeout {
        None => output.await?,
        Some(timeout) => match tokio::time::timeout(timeout, output).await {
            Ok(out) => out?,
            Err(_) => {
                return Err(GitError::Timeout {
                    command: command_name(args),
                    secs: timeout.as_secs(),
                })
            }
        },
    };
    outcome(args, output)
}

/// Starts git as [`run`] does, for a caller that streams its output
/// (then [`outcome`] of `wait_with_output`).
pub fn spawn(
    dir: Option<&Path>,
    args: &[&str],
    input: Option<Vec<u8>>,
) -> Result<tokio::process::Child, GitError> {
    use tokio::io::AsyncWriteExt;
    let mut cmd = git_command(dir, args);
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn()?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // From a separate task, so a large input cannot deadlock against a
        // full output pipe; a git that exits early closes the pipe, and its
        // status tells why.
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
    }
    Ok(child)
}

/// A finished git's standard output, or why it failed.
pub fn outcome(args: &[&str], output: std::process::Output) -> Result<Vec<u8>, GitError> {
    if !output.status.success() {
        // git may quote the URL it was given, credentials and all, and
        // its words reach pages, events and API errors.
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(GitError::Failed {
            command: command_name(args),
            stderr: without_credentials(stderr.trim()),
        });
    }
    Ok(output.stdout)
}

fn command_name(args: &[&str]) -> String {
    args.first().copied().unwrap_or_default().to_owned()
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
