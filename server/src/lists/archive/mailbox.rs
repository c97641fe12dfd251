//! Local mail files: an mbox (mboxrd, read from a byte offset) and a
//! Maildir (`new/` and `cur/`, in file-name order).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::{Cursor, RawMessage};
use crate::error::{Error, Result};
use crate::lists::message::MAX_MESSAGE_BYTES;

/// Most bytes of one mbox line read at once.
const MAX_LINE_PIECE: u64 = 64 << 10;

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
    /// Adds a body line (or the next piece of a long one: `whole` is false),
    /// unquoting `>From ` (mboxrd, and mboxo alike) at a line's start; a
    /// message past the size limit keeps one byte more than the limit, so
    /// the parser refuses it without this holding all of it.
    fn push(&mut self, line: &[u8], whole: bool) {
        let quoted = line.iter().take_while(|&&b| b == b'>').count();
        let line = if whole && quoted > 0 && line[quoted..].starts_with(b"From ") {
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
pub(super) fn read_mbox(
    path: &Path,
    cursor: &Cursor,
    limit: usize,
) -> Result<(Vec<RawMessage>, Cursor)> {
    let start = mbox_offset(cursor)?;
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let mut reader = BufReader::new(file);
    let (mut out, mut pos, mut next) = (Vec::new(), start, start);
    let (mut pending, mut prev_blank): (Option<Pending>, bool) = (None, true);
    let mut line = Vec::new();
    // Whether `line` starts a line: a line longer than MAX_LINE_PIECE is
    // read in pieces, so one huge line is never held whole.
    let mut at_start = true;
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE_PIECE)
            .read_until(b'\n', &mut line)?;
        if read == 0 {
            break;
        }
        let whole = at_start;
        at_start = line.ends_with(b"\n");
        if whole && prev_blank && line.starts_with(b"From ") {
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
            p.push(&line, whole);
        }
        prev_blank = whole && is_blank(&line);
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
pub(super) fn read_maildir(
    path: &Path,
    cursor: &Cursor,
    limit: usize,
) -> Result<(Vec<RawMessage>, Cursor)> {
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
        match read_bounded(&file) {
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

/// A Maildir file, or its first [`MAX_MESSAGE_BYTES`] + 1 bytes when it is
/// larger (the parser refuses it): its size is checked before it is read,
/// and the read stops at the limit even if the file grew meanwhile.
fn read_bounded(file: &Path) -> std::io::Result<Vec<u8>> {
    let limit = MAX_MESSAGE_BYTES as u64 + 1;
    let len = std::fs::metadata(file)?.len();
    let mut bytes = Vec::with_capacity(usize::try_from(len.min(limit)).unwrap_or(0));
    std::fs::File::open(file)?
        .take(limit)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

pub(super) fn maildir_tip(path: &Path) -> Result<Cursor> {
    Ok(Cursor(
        maildir_files(path)?
            .into_keys()
            .next_back()
            .unwrap_or_default(),
    ))
}
