//! Reading a list's archive: where it is (a local path, or a local copy of a
//! public-inbox served over HTTP), what is new since the stored cursor, and
//! keeping each message with its parsed headers.
//!
//! The cursor moves in the transaction that stores the messages it covers,
//! so a crash or a database error re-reads a batch, never skips one. A
//! message that cannot be parsed is recorded as an event and skipped: one
//! bad mail must not stop a list.

use kbot_api::lists::ListEventKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::archive::{self, ArchiveKind, Cursor};
use super::message::{self, ListMessage};
use super::store::{self, ListRow};
use super::subject;
use crate::error::{Error, Result};
use crate::repos::git::Mirror;
use crate::state::AppState;

/// Messages read per batch (one transaction each), and per look at a list.
const BATCH: usize = 200;
const MAX_PER_READ: usize = 5000;

/// Longest a git read of an archive, or a clone of an epoch, may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(3600);

/// How many epochs of a public-inbox served over HTTP kbot looks for.
const MAX_EPOCHS: u32 = 64;

/// What one read found.
pub struct Read {
    /// Messages that answer another message (command candidates), parsed.
    pub replies: Vec<ListMessage>,
}

fn is_url(archive: &str) -> bool {
    ["http://", "https://", "git://"]
        .iter()
        .any(|p| archive.starts_with(p))
}

/// Where a list's archive is read: the path given, or the local copy of a
/// URL under `<artifact dir>/lists/<name>`.
fn local_path(state: &AppState, name: &str, archive: &str) -> PathBuf {
    if is_url(archive) {
        state.config.artifact_dir.join("lists").join(name)
    } else {
        PathBuf::from(archive)
    }
}

/// Where a new list starts reading: the archive's current end, or (with
/// `from_start`) its first message.
pub async fn start_cursor(
    state: &AppState,
    name: &str,
    archive: &str,
    kind: ArchiveKind,
    from_start: bool,
) -> Result<Option<String>> {
    if from_start {
        return Ok(None);
    }
    let path = local_path(state, name, archive);
    Ok(Some(archive::tip(&path, kind, GIT_TIMEOUT).await?.0))
}

/// Checks the archive when a list is added: a path must exist and be of a
/// known kind; a URL must serve at least epoch 0 (which is copied now).
pub async fn prepare(state: &AppState, name: &str, archive: &str) -> Result<ArchiveKind> {
    if archive.is_empty() {
        return Err(Error::BadRequest(
            "archive: a path or a URL is needed".into(),
        ));
    }
    if is_url(archive) {
        sync_epochs(&local_path(state, name, archive), archive).await?;
        return Ok(ArchiveKind::PublicInboxV2);
    }
    let path = Path::new(archive);
    if !path.is_absolute() {
        return Err(Error::BadRequest(format!(
            "archive {archive:?}: give an absolute path on the server, or a URL"
        )));
    }
    archive::detect(path).map_err(|e| {
        Error::BadRequest(format!(
            "archive {archive:?}: {}",
            crate::error::error_chain(&e)
        ))
    })
}

/// Copies or refreshes every epoch `URL/N` of a public-inbox (as
/// lore.kernel.org serves them) into `dir/git/N.git`, stopping at the first
/// epoch the server does not have.
async fn sync_epochs(dir: &Path, url: &str) -> Result<()> {
    let base = url.trim_end_matches('/');
    for n in 0..MAX_EPOCHS {
        let mirror = Mirror::at(dir.join("git").join(format!("{n}.git")), GIT_TIMEOUT);
        let had = mirror.path().join("HEAD").is_file();
        match mirror.sync(&format!("{base}/{n}")).await {
            Ok(()) => {}
            Err(e) if n > 0 && !had => {
                tracing::debug!(epoch = n, error = %e, "no further epoch");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Reads what is new in the list's archive and keeps it.
pub async fn read(state: &AppState, l: &ListRow) -> Result<Read> {
    let kind = l.archive_kind;
    if is_url(&l.archive) {
        sync_epochs(&local_path(state, &l.name, &l.archive), &l.archive).await?;
    }
    let path = local_path(state, &l.name, &l.archive);
    let mut cursor = l.cursor.clone().map(Cursor);
    let mut replies = Vec::new();
    let mut total = 0;
    while total < MAX_PER_READ {
        let (batch, next) =
            archive::read_new(&path, kind, cursor.as_ref(), BATCH, GIT_TIMEOUT).await?;
        if batch.is_empty() {
            break;
        }
        total += batch.len();
        let parsed = parse_all(batch).await?;
        replies.extend(keep(state, l, parsed, &next).await?);
        cursor = Some(next);
    }
    if total == 0 {
        // Still record that the list was looked at.
        let mut tx = state.db.begin().await?;
        store::read_done(&mut tx, l.id, l.cursor.as_deref().unwrap_or_default(), 0).await?;
        tx.commit().await?;
    } else {
        tracing::info!(list = l.id, messages = total, "list read");
    }
    Ok(Read { replies })
}

/// A raw message and what parsing it gave.
type Parsed = (
    archive::RawMessage,
    std::result::Result<ListMessage, message::Unparsable>,
);

/// Parses a batch on the blocking pool: MIME parsing of up to 8 MiB a
/// message is CPU work that must not hold the async runtime.
async fn parse_all(batch: Vec<archive::RawMessage>) -> Result<Vec<Parsed>> {
    let parse = move || {
        batch
            .into_iter()
            .map(|raw| {
                let m = message::parse(&raw.bytes);
                (raw, m)
            })
            .collect()
    };
    Ok(tokio::task::spawn_blocking(parse)
        .await
        .map_err(|e| anyhow::anyhow!("parsing list mail failed: {e}"))?)
}

/// Stores one batch and moves the cursor past it; the batch's replies.
async fn keep(
    state: &AppState,
    l: &ListRow,
    batch: Vec<Parsed>,
    next: &Cursor,
) -> Result<Vec<ListMessage>> {
    let mut replies = Vec::new();
    let mut tx = state.db.begin().await?;
    let mut stored = 0i64;
    for (raw, parsed) in batch {
        let m = match parsed {
            Ok(m) => m,
            Err(e) => {
                let why = format!("{}: {e}", raw.origin);
                store::event(&mut tx, l.id, ListEventKind::BadMessage, &why).await?;
                continue;
            }
        };
        if store::insert_message(&mut tx, &new_message(l.id, &m, &raw)).await? {
            stored += 1;
            if m.in_reply_to.is_some() || !m.references.is_empty() {
                replies.push(m);
            }
        }
    }
    store::read_done(&mut tx, l.id, &next.0, stored).await?;
    tx.commit().await?;
    Ok(replies)
}

fn new_message<'a>(
    list_id: i64,
    m: &'a ListMessage,
    raw: &'a archive::RawMessage,
) -> store::NewMessage<'a> {
    let parsed = subject::parse(&m.subject);
    store::NewMessage {
        list_id,
        message_id: &m.message_id,
        in_reply_to: m.in_reply_to.as_deref(),
        references: &m.references,
        subject: &m.subject,
        from_name: m.from.name.as_deref().unwrap_or_default(),
        from_address: &m.from.address,
        recipients: m.to.iter().chain(&m.cc).cloned().collect::<Vec<_>>().into(),
        date_ms: m.date_ms.unwrap_or_else(crate::time::now_ms),
        is_patch: parsed.is_patch && !parsed.reply,
        has_diff: m.patch.is_some(),
        base_commit: m.base_commit.as_deref(),
        prerequisites: &m.prerequisite_patch_ids,
        change_id: m.change_id.as_deref(),
        raw: &raw.bytes,
        origin: &raw.origin,
    }
}
