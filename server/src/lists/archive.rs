//! Reading a list archive incrementally: the messages added since a cursor,
//! oldest first, a bounded number per call.
//!
//! Four layouts are read. A public-inbox v2 inbox (what lore.kernel.org
//! serves and `public-inbox-clone` or grokmirror mirror) is a folder of
//! epochs `git/N.git`, each a git repository whose `refs/heads/master` has
//! one commit per message, the message being the blob `m` of the commit's
//! tree (a commit holding `d` instead records a deletion). A public-inbox
//! v1 inbox is one git repository whose commits each add the message as a
//! file `ab/cdef...`. An mbox file (mboxrd or mboxo) and a Maildir folder
//! are read too, for lists delivered to the robot by mail.
//!
//! git runs as a child process (killed when the read is dropped, which a
//! timeout does); files are read on the blocking pool. The cursor is text
//! the caller stores and hands back; what it holds depends on the layout
//! (see [`Cursor`]).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::message::MAX_MESSAGE_BYTES;
use crate::error::{Error, GitError, Result};

/// The layout of an archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveKind {
    PublicInboxV2,
    PublicInboxV1,
    Mbox,
    Maildir,
}

/// Where a reader stopped, as text to store: for v2 the last commit read
/// of each epoch (`0:<sha> 1:<sha>`), for v1 the last commit read, for an
/// mbox the byte offset of the first message not read, for a Maildir the
/// unique part of the last file name read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cursor(pub String);

/// One message as the archive holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawMessage {
    pub bytes: Vec<u8>,
    /// Where it is in the archive: v2 `N:<commit>`, v1 `<commit>`, mbox the
    /// byte offset of its `From ` line, Maildir its file name.
    pub origin: String,
}

/// The layout of the archive at `path`: a folder with `git/N.git` is v2,
/// a git repository (bare, or with `.git`) v1, a folder with `cur/` and
/// `new/` a Maildir, a file an mbox.
pub fn detect(path: &Path) -> Result<ArchiveKind> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::BadRequest(format!("no archive at {}: {e}", path.display())))?;
    if meta.is_file() {
        return Ok(ArchiveKind::Mbox);
    }
    if !epochs(path)?.is_empty() {
        Ok(ArchiveKind::PublicInboxV2)
    } else if is_bare_repo(path) || path.join(".git").exists() {
        Ok(ArchiveKind::PublicInboxV1)
    } else if path.join("cur").is_dir() && path.join("new").is_dir() {
        Ok(ArchiveKind::Maildir)
    } else {
        Err(Error::BadRequest(format!(
            "{} is neither a public-inbox, an mbox nor a Maildir",
            path.display()
        )))
    }
}

fn is_bare_repo(path: &Path) -> bool {
    path.join("HEAD").is_file() && path.join("objects").is_dir()
}

/// The epochs `git/N.git` of a v2 inbox, in numeric order.
fn epochs(path: &Path) -> Result<Vec<(u32, PathBuf)>> {
    let dir = path.join("git");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let epoch = name
            .to_str()
            .and_then(|n| n.strip_suffix(".git"))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok());
        if let Some(epoch) = epoch.filter(|_| entry.path().is_dir()) {
            out.push((epoch, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// The messages after `cursor` (from the start when there is none), oldest
/// first, at most `limit`, and the cursor after the last one. The whole
/// read must end within `timeout`.
pub async fn read_new(
    path: &Path,
    kind: ArchiveKind,
    cursor: Option<&Cursor>,
    limit: usize,
    timeout: Duration,
) -> Result<(Vec<RawMessage>, Cursor)> {
    let cursor = cursor.cloned().unwrap_or_default();
    if limit == 0 {
        return Ok((Vec::new(), cursor));
    }
    let read = async {
        match kind {
            ArchiveKind::PublicInboxV2 => read_v2(path, &cursor, limit).await,
            ArchiveKind::PublicInboxV1 => read_v1(path, &cursor, limit).await,
            ArchiveKind::Mbox => blocking(path, move |p| read_mbox(&p, &cursor, limit)).await,
            ArchiveKind::Maildir => blocking(path, move |p| read_maildir(&p, &cursor, limit)).await,
        }
    };
    within(path, timeout, read).await
}

/// The cursor at the archive's current end: reading from it returns only
/// messages added later (a list followed from now on, not from its start).
pub async fn tip(path: &Path, kind: ArchiveKind, timeout: Duration) -> Result<Cursor> {
    let read = async {
        match kind {
            ArchiveKind::PublicInboxV2 => v2_tip(path).await,
            ArchiveKind::PublicInboxV1 => Ok(Cursor(
                head_of(&v1_git_dir(path), "HEAD")
                    .await?
                    .unwrap_or_default(),
            )),
            ArchiveKind::Mbox => Ok(Cursor(std::fs::metadata(path)?.len().to_string())),
            ArchiveKind::Maildir => blocking(path, |p| maildir_tip(&p)).await,
        }
    };
    within(path, timeout, read).await
}

async fn within<T>(
    path: &Path,
    timeout: Duration,
    read: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    tokio::time::timeout(timeout, read).await.map_err(|_| {
        Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "reading the archive {} took longer than {}s",
                path.display(),
                timeout.as_secs()
            ),
        ))
    })?
}

/// Runs file reads on the blocking pool.
async fn blocking<T: Send + 'static>(
    path: &Path,
    read: impl FnOnce(PathBuf) -> Result<T> + Send + 'static,
) -> Result<T> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || read(path))
        .await
        .map_err(|e| Error::Other(anyhow::anyhow!("archive reader stopped: {e}")))?
}

// ---- public-inbox v2 ----

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

async fn read_v2(path: &Path, cursor: &Cursor, limit: usize) -> Result<(Vec<RawMessage>, Cursor)> {
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

async fn v2_tip(path: &Path) -> Result<Cursor> {
    let mut done = BTreeMap::new();
    for (epoch, dir) in epochs(path)? {
        if let Some(head) = head_of(&dir, MASTER).await? {
            done.insert(epoch, head);
        }
    }
    Ok(v2_text(&done))
}

// ---- public-inbox v1 ----

fn v1_git_dir(path: &Path) -> PathBuf {
    if is_bare_repo(path) {
        path.to_owned()
    } else {
        path.join(".git")
    }
}

async fn read_v1(path: &Path, cursor: &Cursor, limit: usize) -> Result<(Vec<RawMessage>, Cursor)> {
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
async fn head_of(dir: &Path, reference: &str) -> Result<Option<String>> {
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
fn parse_batch(out: &[u8], count: usize) -> Result<Vec<Option<Vec<u8>>>> {
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

fn mbox_offset(cursor: &Cursor) -> Result<u64> {
    let text = cursor.0.trim();
    if text.is_empty() {
        return Ok(0);
    }
    text.parse()
        .map_err(|_| Error::BadRequest(format!("bad mbox cursor {text:?}")))
}

/// One message being read from an mbox.
struct Pending {
    /// The offset of its `From ` line.
    start: u64,
    bytes: Vec<u8>,
}

impl Pending {
    /// Adds a body line, unquoting `>From ` (mboxrd, and mboxo alike); a
    /// message past the size limit keeps one byte more than the limit, so
    /// the parser refuses it without this holding all of it.
    fn push(&mut self, line: &[u8]) {
        let quoted = line.iter().take_while(|&&b| b == b'>').count();
        let line = if quoted > 0 && line[quoted..].starts_with(b"From ") {
            &line[1..]
        } else {
            line
        };
        let room = (MAX_MESSAGE_BYTES + 1).saturating_sub(self.bytes.len());
        self.bytes.extend_from_slice(&line[..line.len().min(room)]);
    }

    /// The message without the blank line that separates it from the next.
    fn finish(mut self) -> RawMessage {
        if self.bytes.ends_with(b"\r\n\r\n") {
            self.bytes.truncate(self.bytes.len() - 2);
        } else if self.bytes.ends_with(b"\n\n") {
            self.bytes.truncate(self.bytes.len() - 1);
        }
        RawMessage {
            bytes: self.bytes,
            origin: self.start.to_string(),
        }
    }
}

fn is_blank(line: &[u8]) -> bool {
    line == b"\n" || line == b"\r\n"
}

/// Reads mbox messages from the cursor's offset. A `From ` line starts a
/// message at the start of the file or after a blank line. The last
/// message is taken only when it ends with a blank line, as a finished
/// mbox message does: one being appended is read on a later call.
fn read_mbox(path: &Path, cursor: &Cursor, limit: usize) -> Result<(Vec<RawMessage>, Cursor)> {
    let start = mbox_offset(cursor)?;
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let mut reader = BufReader::new(file);
    let (mut out, mut pos, mut next) = (Vec::new(), start, start);
    let (mut pending, mut prev_blank): (Option<Pending>, bool) = (None, true);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line)?;
        if read == 0 {
            break;
        }
        if prev_blank && line.starts_with(b"From ") {
            if let Some(done) = pending.take() {
                out.push(done.finish());
                next = pos;
                if out.len() >= limit {
                    return Ok((out, Cursor(next.to_string())));
                }
            }
            pending = Some(Pending {
                start: pos,
                bytes: Vec::new(),
            });
        } else if let Some(p) = pending.as_mut() {
            p.push(&line);
        }
        prev_blank = is_blank(&line);
        pos += read as u64;
    }
    if let Some(p) = pending.filter(|_| prev_blank) {
        out.push(p.finish());
        next = pos;
    }
    Ok((out, Cursor(next.to_string())))
}

// ---- Maildir ----

/// The files of `new/` and `cur/` by their unique name (before `:2,`
/// flags, so a file moved to `cur/` and flagged is the same message).
fn maildir_files(path: &Path) -> Result<BTreeMap<String, PathBuf>> {
    let mut files = BTreeMap::new();
    for sub in ["new", "cur"] {
        for entry in std::fs::read_dir(path.join(sub))? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !entry.file_type()?.is_file() {
                continue;
            }
            let unique = name.split(':').next().unwrap_or_default().to_owned();
            files.entry(unique).or_insert_with(|| entry.path());
        }
    }
    Ok(files)
}

/// Reads the Maildir files named after the cursor, in name order (the
/// names start with the delivery time). A file delivered later under a
/// smaller name than the cursor's is not seen.
fn read_maildir(path: &Path, cursor: &Cursor, limit: usize) -> Result<(Vec<RawMessage>, Cursor)> {
    let after = cursor.0.as_str();
    let mut out = Vec::new();
    let mut last = after.to_owned();
    let newer = maildir_files(path)?
        .into_iter()
        .filter(|(name, _)| name.as_str() > after);
    for (name, file) in newer {
        if out.len() >= limit {
            break;
        }
        match std::fs::read(&file) {
            Ok(bytes) => out.push(RawMessage {
                bytes,
                origin: name.clone(),
            }),
            // Moved or deleted between the listing and the read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        last = name;
    }
    Ok((out, Cursor(last)))
}

fn maildir_tip(path: &Path) -> Result<Cursor> {
    Ok(Cursor(
        maildir_files(path)?
            .into_keys()
            .next_back()
            .unwrap_or_default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(30);

    fn mail(n: u32) -> String {
        format!("From: a@x\nMessage-ID: <{n}@x>\nSubject: m{n}\n\nbody {n}\nFrom the start\n")
    }

    #[test]
    fn detects_each_layout() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("box"), "").expect("write");
        assert_eq!(detect(&root.join("box")).expect("mbox"), ArchiveKind::Mbox);
        for sub in [
            "md/cur",
            "md/new",
            "md/tmp",
            "v2/git/0.git/objects",
            "v2/git/10.git",
            "bare/objects",
        ] {
            std::fs::create_dir_all(root.join(sub)).expect("mkdir");
        }
        std::fs::write(root.join("bare/HEAD"), "ref: refs/heads/master\n").expect("write");
        std::fs::create_dir_all(root.join("work/.git")).expect("mkdir");
        assert_eq!(detect(&root.join("md")).expect("md"), ArchiveKind::Maildir);
        assert_eq!(
            detect(&root.join("v2")).expect("v2"),
            ArchiveKind::PublicInboxV2
        );
        assert_eq!(
            detect(&root.join("bare")).expect("v1"),
            ArchiveKind::PublicInboxV1
        );
        assert_eq!(
            detect(&root.join("work")).expect("v1"),
            ArchiveKind::PublicInboxV1
        );
        let epochs: Vec<u32> = epochs(&root.join("v2"))
            .expect("epochs")
            .into_iter()
            .map(|e| e.0)
            .collect();
        assert_eq!(epochs, [0, 10]);
        assert!(detect(&root.join("v2/git")).is_err());
        assert!(detect(&root.join("absent")).is_err());
    }

    fn mbox_of(messages: &[String]) -> String {
        messages
            .iter()
            .map(|m| {
                format!(
                    "From a@x Mon Jan  1 00:00:00 2024\n{}\n",
                    m.replace("\nFrom ", "\n>From ")
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn mbox_reads_in_steps_and_waits_for_an_unfinished_message() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("list.mbox");
        let mails: Vec<String> = (1..=3).map(mail).collect();
        std::fs::write(&path, mbox_of(&mails)).expect("write");
        let (first, cursor) = read_new(&path, ArchiveKind::Mbox, None, 2, SECOND)
            .await
            .expect("read");
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].bytes, mails[0].as_bytes());
        assert_eq!(first[0].origin, "0");
        let (rest, cursor) = read_new(&path, ArchiveKind::Mbox, Some(&cursor), 10, SECOND)
            .await
            .expect("read");
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].bytes, mails[2].as_bytes());
        // A message being appended (no closing blank line yet) waits.
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str("From b@x Mon Jan  1 00:00:00 2024\nMessage-ID: <4@x>\n\npartial");
        std::fs::write(&path, &text).expect("write");
        let (none, same) = read_new(&path, ArchiveKind::Mbox, Some(&cursor), 10, SECOND)
            .await
            .expect("read");
        assert!(none.is_empty());
        assert_eq!(same, cursor);
        text.push_str(" done\n\n");
        std::fs::write(&path, &text).expect("write");
        let (last, end) = read_new(&path, ArchiveKind::Mbox, Some(&same), 10, SECOND)
            .await
            .expect("read");
        assert_eq!(last.len(), 1);
        assert_eq!(end.0, text.len().to_string());
        assert_eq!(
            tip(&path, ArchiveKind::Mbox, SECOND).await.expect("tip"),
            end
        );
        assert!(read_new(
            &path,
            ArchiveKind::Mbox,
            Some(&Cursor("x".into())),
            1,
            SECOND
        )
        .await
        .is_err());
    }

    #[tokio::test]
    async fn maildir_reads_new_and_cur_in_name_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let md = dir.path();
        for sub in ["new", "cur", "tmp"] {
            std::fs::create_dir(md.join(sub)).expect("mkdir");
        }
        std::fs::write(md.join("cur/1700000002.b.host:2,S"), mail(2)).expect("write");
        std::fs::write(md.join("new/1700000001.a.host"), mail(1)).expect("write");
        std::fs::write(md.join("new/1700000003.c.host"), mail(3)).expect("write");
        std::fs::write(md.join("tmp/1700000000.z.host"), mail(9)).expect("write");
        let (first, cursor) = read_new(md, ArchiveKind::Maildir, None, 2, SECOND)
            .await
            .expect("read");
        let origins: Vec<&str> = first.iter().map(|m| m.origin.as_str()).collect();
        assert_eq!(origins, ["1700000001.a.host", "1700000002.b.host"]);
        // Moving a read message to cur/ with flags does not read it again.
        std::fs::rename(
            md.join("new/1700000001.a.host"),
            md.join("cur/1700000001.a.host:2,S"),
        )
        .expect("mv");
        let (rest, cursor) = read_new(md, ArchiveKind::Maildir, Some(&cursor), 10, SECOND)
            .await
            .expect("read");
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].bytes, mail(3).as_bytes());
        let (none, _) = read_new(md, ArchiveKind::Maildir, Some(&cursor), 10, SECOND)
            .await
            .expect("read");
        assert!(none.is_empty());
        assert_eq!(
            tip(md, ArchiveKind::Maildir, SECOND).await.expect("tip"),
            cursor
        );
    }

    /// A v1 inbox made with git: each commit adds one message file, one
    /// removes one.
    fn v1_inbox(dir: &Path) {
        let run = |args: &[&str]| {
            let status = std::process::Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(args)
                .env("GIT_AUTHOR_NAME", "a")
                .env("GIT_AUTHOR_EMAIL", "a@x")
                .env("GIT_COMMITTER_NAME", "a")
                .env("GIT_COMMITTER_EMAIL", "a@x")
                .output()
                .expect("git");
            assert!(
                status.status.success(),
                "{:?}",
                String::from_utf8_lossy(&status.stderr)
            );
        };
        run(&["init", "-q", "-b", "master"]);
        for n in 1..=3 {
            let sub = dir.join(format!("0{n}"));
            std::fs::create_dir_all(&sub).expect("mkdir");
            std::fs::write(sub.join("abcdef"), mail(n)).expect("write");
            run(&["add", "."]);
            run(&["commit", "-q", "-m", &format!("m{n}")]);
        }
        run(&["rm", "-q", "02/abcdef"]);
        run(&["commit", "-q", "-m", "purge"]);
        std::fs::create_dir_all(dir.join("04")).expect("mkdir");
        std::fs::write(dir.join("04/abcdef"), mail(4)).expect("write");
        run(&["add", "."]);
        run(&["commit", "-q", "-m", "m4"]);
    }

    #[tokio::test]
    async fn v1_reads_each_added_message_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        v1_inbox(dir.path());
        let kind = detect(dir.path()).expect("detect");
        assert_eq!(kind, ArchiveKind::PublicInboxV1);
        let (first, cursor) = read_new(dir.path(), kind, None, 2, SECOND)
            .await
            .expect("read");
        assert_eq!(
            first.iter().map(|m| m.bytes.clone()).collect::<Vec<_>>(),
            [mail(1).into_bytes(), mail(2).into_bytes()]
        );
        let (rest, cursor) = read_new(dir.path(), kind, Some(&cursor), 10, SECOND)
            .await
            .expect("read");
        assert_eq!(
            rest.iter().map(|m| m.bytes.clone()).collect::<Vec<_>>(),
            [mail(3).into_bytes(), mail(4).into_bytes()]
        );
        let (none, again) = read_new(dir.path(), kind, Some(&cursor), 10, SECOND)
            .await
            .expect("read");
        assert!(none.is_empty());
        assert_eq!(again, cursor);
        assert_eq!(tip(dir.path(), kind, SECOND).await.expect("tip"), cursor);
    }

    #[test]
    fn batch_output_with_missing_objects() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let out = format!("{sha} blob 3\nabc\nx:m missing\n{sha} tree 0\n\n{sha} blob 0\n\n");
        let objects = parse_batch(out.as_bytes(), 4).expect("parses");
        assert_eq!(
            objects,
            [Some(b"abc".to_vec()), None, None, Some(Vec::new())]
        );
        assert!(parse_batch(format!("{sha} blob 9\nabc\n").as_bytes(), 1).is_err());
    }
}
