//! `git am` of a mailed series on a base, in a throw-away sparse worktree
//! of the mirror, under the limits a stranger's patches need.

use std::path::Path;
use std::process::Stdio;

use super::run::{git_command, run_text};
use super::{checked_sha, AmLimits, GitError, Mirror};

impl Mirror {
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
