//! public-inbox archives: v2 (epochs `git/N.git`, one commit per message,
//! the message as the blob `m`, a deletion as `d`) and v1 (one repository),
//! read through git's plumbing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{epochs, is_bare_repo, Cursor, RawMessage};
use crate::error::{Error, GitError, Result};
use crate::lists::message::MAX_MESSAGE_BYTES;

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
/// one that does not exist or is not a blob: one `git cat-file --batch`,
/// read as it streams. A blob over the message limit keeps its first
/// [`MAX_MESSAGE_BYTES`] + 1 bytes (the parser then refuses it) and the
/// rest is skipped, so an archive's huge blob never sits in memory.
async fn cat_blobs(dir: &Path, specs: &[String]) -> Result<Vec<Option<Vec<u8>>>> {
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    let input = specs.iter().map(|s| format!("{s}\n")).collect::<String>();
    let args = ["cat-file", "--batch"];
    let mut child = crate::repos::git::spawn(Some(dir), &args, Some(input.into_bytes()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("git cat-file has no output pipe"))?;
    let objects = read_batch(&mut tokio::io::BufReader::new(stdout), specs.len()).await?;
    crate::repos::git::outcome(&args, child.wait_with_output().await?)?;
    Ok(objects)
}

/// Longest header line of `git cat-file --batch` read (`<spec> missing`
/// echoes the spec, an object id and a size are short).
const MAX_BATCH_HEADER: u64 = 4096;

/// Reads `count` objects of `git cat-file --batch` output: per object
/// `<oid> <type> <size>\n`, the content and `\n`, or `<spec> missing\n`.
/// At most [`MAX_MESSAGE_BYTES`] + 1 bytes of an object are kept.
pub(super) async fn read_batch<R>(out: &mut R, count: usize) -> Result<Vec<Option<Vec<u8>>>>
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let unexpected = |detail| {
        Error::Git(GitError::Parse {
            command: "cat-file".into(),
            detail,
        })
    };
    let mut objects = Vec::with_capacity(count);
    let mut line = Vec::new();
    while objects.len() < count {
        line.clear();
        (&mut *out)
            .take(MAX_BATCH_HEADER)
            .read_until(b'\n', &mut line)
            .await?;
        if line.pop() != Some(b'\n') {
            return Err(unexpected("a header line is cut short"));
        }
        let header = String::from_utf8_lossy(&line).into_owned();
        let words: Vec<&str> = header.split(' ').collect();
        let [oid, kind, size] = words.as_slice() else {
            objects.push(None);
            continue;
        };
        if !is_sha(oid) {
            objects.push(None);
            continue;
        }
        let size: u64 = size
            .parse()
            .map_err(|_| unexpected("a size is no number"))?;
        let kept = size.min(MAX_MESSAGE_BYTES as u64 + 1);
        let mut body = Vec::new();
        (&mut *out).take(kept).read_to_end(&mut body).await?;
        let skipped =
            tokio::io::copy(&mut (&mut *out).take(size - kept), &mut tokio::io::sink()).await?;
        let mut end = [0u8; 1];
        if body.len() as u64 + skipped < size || out.read_exact(&mut end).await.is_err() {
            return Err(unexpected("an object is cut short"));
        }
        objects.push((*kind == "blob").then_some(body));
    }
    Ok(objects)
}

/// Runs git on the repository `dir`, optionally feeding it `input`; its
/// standard output as bytes (messages need not be UTF-8). The archive
/// reader's timeout ends it.
async fn git(dir: &Path, args: &[&str], input: Option<Vec<u8>>) -> Result<Vec<u8>, GitError> {
    crate::repos::git::run(Some(dir), args, input, None).await
}

fn is_sha(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

// ---- mbox ----
