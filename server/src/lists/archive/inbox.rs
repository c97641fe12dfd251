//! public-inbox archives: v2 (epochs `git/N.git`, one commit per message,
//! the message as the blob `m`, a deletion as `d`) and v1 (one repository),
//! read through git's plumbing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::{epochs, is_bare_repo, Cursor, RawMessage};
use crate::error::{Error, GitError, Result};

/// The v2 cursor as epoch -> last commit read.
fn v2_cursor(cursor: &Cursor) -> Result<BTreeMap<u32, String>> {
    cursor
        .0
        .split_whitespace()
        .map(|pair| {
            let (epoch, sha) = pair.split_once(':').unwrap_or(("", ""));
            match (epoch.parse::<u32>(), is_sha(sha)) {
                (Ok(epoch), true) => Ok((epoch, sha.to_owned())),
                _ => Err(Error::BadRequest(format!(
                    "bad public-inbox cursor {pair:?}"
                ))),
            }
        })
        .collect()
}

fn v2_text(done: &BTreeMap<u32, String>) -> Cursor {
    let pairs: Vec<String> = done.iter().map(|(e, sha)| format!("{e}:{sha}")).collect();
    Cursor(pairs.join(" "))
}

const MASTER: &str = "refs/heads/master";

pub(super) async fn read_v2(
    path: &Path,
    cursor: &Cursor,
    limit: usize,
) -> Result<(Vec<RawMessage>, Cursor)> {
    let mut done = v2_cursor(cursor)?;
    let mut out = Vec::new();
    for (epoch, dir) in epochs(path)? {
        if out.len() >= limit {
            break;
        }
        let commits = new_commits(&dir, MASTER, done.get(&epoch)).await?;
        let mut at = 0;
        while at < commits.len() && out.len() < limit {
            let chunk = &commits[at..commits.len().min(at + limit - out.len())];
            let specs: Vec<String> = chunk.iter().map(|c| format!("{c}:m")).collect();
            for (commit, blob) in chunk.iter().zip(cat_blobs(&dir, &specs).await?) {
                if let Some(bytes) = blob {
                    let origin = format!("{epoch}:{commit}");
                    out.push(RawMessage { bytes, origin });
                }
            }
            at += chunk.len();
            if let Some(last) = chunk.last() {
                done.insert(epoch, last.clone());
            }
        }
    }
    Ok((out, v2_text(&done)))
}

pub(super) async fn v2_tip(path: &Path) -> Result<Cursor> {
    let mut done = BTreeMap::new();
    for (epoch, dir) in epochs(path)? {
        if let Some(head) = head_of(&dir, MASTER).await? {
            done.insert(epoch, head);
        }
    }
    Ok(v2_text(&done))
}

// ---- public-inbox v1 ----

pub(super) fn v1_git_dir(path: &Path) -> PathBuf {
    if is_bare_repo(path) {
        path.to_owned()
    } else {
        path.join(".git")
    }
}

pub(super) async fn read_v1(
    path: &Path,
    cursor: &Cursor,
    limit: usize,
) -> Result<(Vec<RawMessage>, Cursor)> {
    let dir = v1_git_dir(path);
    let after = Some(cursor.0.trim()).filter(|c| !c.is_empty());
    if let Some(sha) = after.filter(|s| !is_sha(s)) {
        return Err(Error::BadRequest(format!(
            "bad public-inbox cursor {sha:?}"
        )));
    }
    let after = after.map(str::to_owned);
    let commits = new_commits(&dir, "HEAD", after.as_ref()).await?;
    let mut out = Vec::new();
    let mut last = after;
    let mut at = 0;
    while at < commits.len() && out.len() < limit {
        let chunk = &commits[at..commits.len().min(at + limit - out.len())];
        let added = added_blobs(&dir, chunk).await?;
        let specs: Vec<String> = chunk.iter().filter_map(|c| added.get(c).cloned()).collect();
        let mut blobs = cat_blobs(&dir, &specs).await?.into_iter();
        for commit in chunk {
            if added.contains_key(commit) {
                if let Some(Some(bytes)) = blobs.next() {
                    out.push(RawMessage {
                        bytes,
                        origin: commit.clone(),
                    });
                }
            }
        }
        at += chunk.len();
        last = chunk.last().cloned().or(last);
    }
    Ok((out, Cursor(last.unwrap_or_default())))
}

/// The blob each commit added (its first added file), by commit: one
/// `git diff-tree --stdin` for the whole chunk.
async fn added_blobs(dir: &Path, commits: &[String]) -> Result<BTreeMap<String, String>> {
    let input = commits.iter().map(|c| format!("{c}\n")).collect::<String>();
    let args = [
        "diff-tree",
        "--stdin",
        "-r",
        "--root",
        "--no-renames",
        "--diff-filter=A",
    ];
    let out = git(dir, &args, Some(input.into_bytes())).await?;
    let mut added = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in String::from_utf8_lossy(&out).lines() {
        if is_sha(line) {
            current = Some(line.to_owned());
        } else if let (Some(commit), Some(raw)) = (&current, line.strip_prefix(':')) {
            // `:000000 100644 <old> <new> A\tpath`
            let blob = raw.split_whitespace().nth(3).filter(|b| is_sha(b));
            if let Some(blob) = blob {
                added
                    .entry(commit.clone())
                    .or_insert_with(|| blob.to_owned());
            }
        }
    }
    Ok(added)
}

// ---- git ----

/// The commits of `reference` after `after` (all of them without one),
/// oldest first. An `after` the repository no longer has (history
/// rewritten by a purge and collected) restarts from the beginning: the
/// caller's store knows the messages it has by their ids.
async fn new_commits(dir: &Path, reference: &str, after: Option<&String>) -> Result<Vec<String>> {
    if head_of(dir, reference).await?.is_none() {
        return Ok(Vec::new());
    }
    let range = match after {
        Some(sha) if has_commit(dir, sha).await? => format!("{sha}..{reference}"),
        Some(sha) => {
            tracing::warn!(dir = %dir.display(), %sha, "archive cursor not in the repository; reading the epoch again");
            reference.to_owned()
        }
        None => reference.to_owned(),
    };
    let out = git(
        dir,
        &["rev-list", "--reverse", "--first-parent", &range],
        None,
    )
    .await?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| is_sha(l))
        .map(str::to_owned)
        .collect())
}

/// The commit `reference` names, or None when it does not exist (an empty
/// repository).
pub(super) async fn head_of(dir: &Path, reference: &str) -> Result<Option<String>> {
    let spec = format!("{reference}^{{commit}}");
    match git(dir, &["rev-parse", "--verify", "--quiet", &spec], None).await {
        Ok(out) => Ok(Some(String::from_utf8_lossy(&out).trim().to_owned())),
        Err(GitError::Failed { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

async fn has_commit(dir: &Path, sha: &str) -> Result<bool> {
    Ok(head_of(dir, sha).await?.is_some())
}

/// The contents of each object spec (`<commit>:m`, a blob id), None for
/// one that does not exist or is not a blob: one `git cat-file --batch`.
async fn cat_blobs(dir: &Path, specs: &[String]) -> Result<Vec<Option<Vec<u8>>>> {
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    let input = specs.iter().map(|s| format!("{s}\n")).collect::<String>();
    let out = git(dir, &["cat-file", "--batch"], Some(input.into_bytes())).await?;
    parse_batch(&out, specs.len())
}

/// Reads `git cat-file --batch` output: per object `<oid> <type> <size>\n`,
/// the content and `\n`, or `<spec> missing\n`.
pub(super) fn parse_batch(out: &[u8], count: usize) -> Result<Vec<Option<Vec<u8>>>> {
    let unexpected = |detail| {
        Error::Git(GitError::Parse {
            command: "cat-file".into(),
            detail,
        })
    };
    let mut objects = Vec::with_capacity(count);
    let mut rest = out;
    while objects.len() < count {
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| unexpected("a header line is cut short"))?;
        let header = String::from_utf8_lossy(&rest[..end]).into_owned();
        rest = &rest[end + 1..];
        let words: Vec<&str> = header.split(' ').collect();
        match words.as_slice() {
            [_, kind, size] if is_sha(words[0]) => {
                let size: usize = size
                    .parse()
                    .map_err(|_| unexpected("a size is no number"))?;
                let body = rest
                    .get(..size)
                    .ok_or_else(|| unexpected("an object is cut short"))?;
                objects.push((*kind == "blob").then(|| body.to_vec()));
                rest = rest.get(size + 1..).unwrap_or_default();
            }
            _ => objects.push(None),
        }
    }
    Ok(objects)
}

/// Runs git on the repository `dir`, optionally feeding it `input`; its
/// standard output as bytes (messages need not be UTF-8).
async fn git(dir: &Path, args: &[&str], input: Option<Vec<u8>>) -> Result<Vec<u8>, GitError> {
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
        // A separate task, so a large output cannot deadlock against the input.
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
    }
    let output = child.wait_with_output().await?;
    if !output.status.success() {
        return Err(GitError::Failed {
            command: args.first().copied().unwrap_or_default().to_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(output.stdout)
}

fn is_sha(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

// ---- mbox ----
