//! The list archive reader against a public-inbox v2 inbox laid out as
//! public-inbox writes it (`kbot_testkit::PublicInbox`), and a series
//! posted by `git format-patch` read back from it and assembled.

use std::path::Path;
use std::time::Duration;

use kbot_server::lists::archive::{self, ArchiveKind, Cursor, RawMessage};
use kbot_server::lists::assemble::{assemble, MessageMeta};
use kbot_server::lists::message;
use kbot_testkit::gitrepo::git;
use kbot_testkit::PublicInbox;

const TIMEOUT: Duration = Duration::from_secs(30);

fn mail(n: u32) -> Vec<u8> {
    format!(
        "From: Ann <ann@example.org>\nMessage-ID: <{n}@example.org>\nSubject: m{n}\n\nbody {n}\n"
    )
    .into_bytes()
}

fn ids(messages: &[RawMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| message::parse(&m.bytes).expect("parses").message_id)
        .collect()
}

async fn read(inbox: &Path, cursor: Option<&Cursor>, limit: usize) -> (Vec<RawMessage>, Cursor) {
    archive::read_new(inbox, ArchiveKind::PublicInboxV2, cursor, limit, TIMEOUT)
        .await
        .expect("reads")
}

#[tokio::test]
async fn v2_epochs_are_read_in_order_and_deletions_skipped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut inbox = PublicInbox::create_v2(tmp.path());
    let first = inbox.append(&mail(1));
    inbox.append(&mail(2));
    inbox.delete(&mail(2));
    inbox.append(&mail(3));
    inbox.next_epoch();
    inbox.append(&mail(4));
    inbox.append(&mail(5));
    assert_eq!(
        archive::detect(inbox.root()).expect("detects"),
        ArchiveKind::PublicInboxV2
    );

    let (batch, cursor) = read(inbox.root(), None, 2).await;
    assert_eq!(ids(&batch), ["1@example.org", "2@example.org"]);
    assert_eq!(batch[0].origin, format!("0:{first}"));
    let (batch, cursor) = read(inbox.root(), Some(&cursor), 2).await;
    assert_eq!(ids(&batch), ["3@example.org", "4@example.org"]);
    assert!(batch[1].origin.starts_with("1:"));
    let (batch, cursor) = read(inbox.root(), Some(&cursor), 2).await;
    assert_eq!(ids(&batch), ["5@example.org"]);
    let (batch, same) = read(inbox.root(), Some(&cursor), 2).await;
    assert!(batch.is_empty());
    assert_eq!(same, cursor);
    assert_eq!(
        archive::tip(inbox.root(), ArchiveKind::PublicInboxV2, TIMEOUT)
            .await
            .expect("tip"),
        cursor
    );

    // What arrives later is read from the stored cursor, and only that.
    inbox.append(&mail(6));
    let (batch, _) = read(inbox.root(), Some(&Cursor(cursor.0.clone())), 10).await;
    assert_eq!(ids(&batch), ["6@example.org"]);
    assert!(read_bad_cursor(inbox.root()).await);
}

async fn read_bad_cursor(inbox: &Path) -> bool {
    let bad = Cursor("zero:nothex".into());
    archive::read_new(inbox, ArchiveKind::PublicInboxV2, Some(&bad), 1, TIMEOUT)
        .await
        .is_err()
}

#[tokio::test]
async fn an_empty_epoch_reads_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let inbox = PublicInbox::create_v2(tmp.path());
    let (batch, cursor) = read(inbox.root(), None, 5).await;
    assert!(batch.is_empty());
    assert_eq!(cursor.0, "");
}

/// A v2 series posted with `git format-patch --cover-letter --thread`,
/// stored in an inbox, read back, parsed and assembled.
#[tokio::test]
async fn a_format_patch_series_through_an_inbox() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    let base = kbot_testkit::gitrepo::linear_repo(&repo, &["base"]).remove(0);
    for n in 1..=3 {
        std::fs::write(repo.join(format!("f{n}")), format!("{n}\n")).expect("write");
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-q", "-m", &format!("part {n}")]);
    }
    let out = tmp.path().join("out");
    let base_arg = format!("--base={base}");
    let out_arg = out.to_string_lossy().into_owned();
    git(
        &repo,
        &[
            "format-patch",
            "-q",
            "-v2",
            "--cover-letter",
            "--thread=shallow",
            &base_arg,
            "-o",
            &out_arg,
            "HEAD~3",
        ],
    );
    let mut files: Vec<_> = std::fs::read_dir(&out)
        .expect("patches")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 4);

    let inbox = PublicInbox::create_v2(&tmp.path().join("inbox"));
    // Posted out of order: the assembly does not care.
    for file in files.iter().rev() {
        inbox.append(&std::fs::read(file).expect("patch file"));
    }
    let (raw, _) = read(inbox.root(), None, 100).await;
    let parsed: Vec<_> = raw
        .iter()
        .map(|m| message::parse(&m.bytes).expect("parses"))
        .collect();
    let metas: Vec<MessageMeta> = parsed
        .iter()
        .enumerate()
        .map(|(i, m)| MessageMeta::new(m, m.date_ms.unwrap_or_default() + i as i64))
        .collect();
    let drafts = assemble(&metas);
    assert_eq!(drafts.len(), 1, "{drafts:#?}");
    let series = &drafts[0];
    assert!(series.complete());
    assert_eq!((series.version, series.total), (2, 3));
    let cover = parsed
        .iter()
        .find(|m| Some(&m.message_id) == series.cover.as_ref())
        .expect("the cover letter");
    assert_eq!(cover.base_commit.as_deref(), Some(base.as_str()));
    assert!(parsed
        .iter()
        .filter(|m| series.patches.values().any(|id| id == &m.message_id))
        .all(|m| m
            .patch
            .as_deref()
            .is_some_and(|p| p.starts_with("diff --git "))));
}
