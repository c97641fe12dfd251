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

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};

mod inbox;
mod mailbox;

use inbox::{head_of, read_v1, read_v2, v1_git_dir, v2_tip};
use mailbox::{maildir_tip, read_maildir, read_mbox};

pub use kbot_api::lists::ArchiveKind;

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

#[cfg(test)]
mod tests {
    use super::inbox::read_batch;
    use super::*;
    use crate::lists::message::MAX_MESSAGE_BYTES;

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

    #[tokio::test]
    async fn batch_output_with_missing_objects() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let out = format!("{sha} blob 3\nabc\nx:m missing\n{sha} tree 0\n\n{sha} blob 0\n\n");
        let objects = read_batch(&mut out.as_bytes(), 4).await.expect("parses");
        assert_eq!(
            objects,
            [Some(b"abc".to_vec()), None, None, Some(Vec::new())]
        );
        let cut = format!("{sha} blob 9\nabc\n");
        assert!(read_batch(&mut cut.as_bytes(), 1).await.is_err());
    }

    /// A blob larger than a message may be keeps one byte past the limit
    /// (the parser refuses it), and the object after it is read whole.
    #[tokio::test]
    async fn a_huge_blob_is_cut_at_the_limit() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let huge = MAX_MESSAGE_BYTES * 3;
        let mut out = format!("{sha} blob {huge}\n").into_bytes();
        out.resize(out.len() + huge, b'x');
        out.extend_from_slice(format!("\n{sha} blob 2\nok\n").as_bytes());
        let objects = read_batch(&mut out.as_slice(), 2).await.expect("parses");
        assert_eq!(
            objects[0].as_ref().map(Vec::len),
            Some(MAX_MESSAGE_BYTES + 1)
        );
        assert_eq!(objects[1].as_deref(), Some(&b"ok"[..]));
    }
}
