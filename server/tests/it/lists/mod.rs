//! Mailing lists end to end against simulated agents, on every backend: a
//! public-inbox v2 archive written by the test from `git format-patch
//! --cover-letter --thread --base` output of a real repository. This module
//! holds the harness (the author's repository, the archive's mails, the
//! list); each file one part of the conversation:
//!
//! - `threads`: series assembled, applied with `git am -3` into
//!   `refs/kbot/series/...`, tested, bisected inside the series and answered
//!   in the patch's thread at a real SMTP server; a series that does not
//!   apply and a tip that does not build answered; v2 tested clean; a
//!   discussion reply ignored; `#kbot test` with an inline fix and `#kbot
//!   invalid` from a stranger (recorded, not answered); what a maintainer
//!   sees of it (`maintainer`);
//! - `prerequisites`: a series on posted prerequisites, a build break
//!   answered in the patch that broke it;
//! - `archive`, `base`, `landed`, `limits`, `patchwork`, `trust`,
//!   `versions`: reading the archive, the base a series names, a fix that
//!   lands, bounds on hostile mail, patchwork checks, who may command the
//!   robot, a series' versions.
//!
//! The kernel-sized form of the same scenario is `agent/tests/e2e/series/`.

mod archive;
mod base;
mod landed;
mod limits;
mod maintainer;
mod patchwork;
mod prerequisites;
mod threads;
mod trust;
mod versions;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::sim::fleet::{Fleet, GOOD};
use crate::sim::{self, id, list, poll, str_of, Sim, World, DEADLINE, JOB, KPI, REPO};
use kbot_testkit::inbox::{PublicInbox, Reply};
use kbot_testkit::smtp_sink::{self, Received};
use kbot_testkit::{backends, gitrepo::git};

pub(crate) const PAT: &str = "Pat Pipe <pat@example.org>";
pub(crate) const LIST: &str = "fsdevel@lists.example.org";
const WEB: &str = "https://lore.example.org/fsdevel";

/// A posted series: the mails `git format-patch` wrote, cover first.
pub(crate) struct Posted {
    pub(crate) mails: Vec<String>,
}

impl Posted {
    pub(crate) fn message_id(&self, i: usize) -> String {
        header(&self.mails[i], "Message-ID")
    }

    pub(crate) fn subject(&self, i: usize) -> String {
        header(&self.mails[i], "Subject")
    }
}

pub(crate) use kbot_testkit::smtp_sink::header;

/// A working clone of the world's repository for the patch author.
pub(crate) struct Author {
    pub(crate) dir: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Author {
    pub(crate) fn new(world: &World) -> Author {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("work");
        git(
            tmp.path(),
            &[
                "clone",
                "-q",
                world.repo.url(),
                dir.to_str().expect("utf-8"),
            ],
        );
        for (k, v) in [("user.name", "Pat Pipe"), ("user.email", "pat@example.org")] {
            git(&dir, &["config", k, v]);
        }
        Author { dir, _tmp: tmp }
    }

    pub(crate) fn at(&self, rev: &str) {
        git(&self.dir, &["checkout", "-q", "--detach", rev]);
    }

    pub(crate) fn commit(&self, file: &str, text: &str, subject: &str) -> String {
        let path = self.dir.join(file);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, text).expect("write");
        git(&self.dir, &["add", "-A"]);
        git(
            &self.dir,
            &["commit", "-q", "-m", subject, &format!("--author={PAT}")],
        );
        git(&self.dir, &["rev-parse", "HEAD"])
    }

    /// `git format-patch` of the last `n` commits, as mails (no From_ line).
    pub(crate) fn post(&self, n: usize, version: u32, base: &str, extra: &[&str]) -> Posted {
        let tag = format!("v{version}-{}", rand_tag());
        let out = self.dir.join(format!("out-{tag}"));
        let mut args = vec![
            "format-patch".to_owned(),
            "-q".into(),
            format!("-{n}"),
            format!("-v{version}"),
            "--thread=shallow".into(),
            format!("--base={base}"),
            format!("--to={LIST}"),
            "--cc=Maint Ainer <maint@example.org>".into(),
            "-o".into(),
            out.to_string_lossy().into_owned(),
        ];
        if n > 1 {
            args.push("--cover-letter".into());
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        git(&self.dir, &args);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&out)
            .expect("read out")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        let mails = files
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(f).expect("read patch");
                let text = text
                    .split_once('\n')
                    .map(|(_, rest)| rest.to_owned())
                    .unwrap_or(text);
                // format-patch names a cover letter by the second it ran in:
                // versions made in one second would share one Message-ID.
                text.replace("<cover.", &format!("<cover-{tag}."))
                    .replace("*** SUBJECT HERE ***", "pipe: faster small writes")
                    .replace(
                        "*** BLURB HERE ***",
                        "This series makes small pipe writes faster.",
                    )
            })
            .collect();
        Posted { mails }
    }
}

fn rand_tag() -> u32 {
    rand::random::<u32>()
}

/// A reply to `parent` (id and subject) by `from` on the list, with `body`.
pub(crate) fn reply(
    from: &str,
    parent_id: &str,
    parent_subject: &str,
    id: &str,
    body: &str,
) -> String {
    Reply {
        from,
        to: LIST,
        id,
        parent_id,
        parent_subject,
        body,
    }
    .mail()
}

pub(crate) fn append(inbox: &PublicInbox, mails: &[String]) {
    for m in mails {
        inbox.append(m.as_bytes());
    }
}

/// The list's series, newest first.
pub(crate) async fn series(sim: &Sim<'_>) -> Vec<Value> {
    list(sim.get("/api/v1/series").await)
}

/// Waits until the series whose key is `key` satisfies `ready`.
pub(crate) async fn series_when(sim: &Sim<'_>, key: &str, ready: impl Fn(&Value) -> bool) -> Value {
    poll(DEADLINE, || async {
        let all = series(sim).await;
        match all.iter().find(|s| s["key"] == key) {
            Some(s) if ready(s) => Ok(s.clone()),
            Some(s) => Err(format!("{s} among {all:#?}")),
            None => Err(format!("no series {key}: {all:#?}")),
        }
    })
    .await
}

pub(crate) async fn mail_when(
    sink: &smtp_sink::Sink,
    what: &str,
    pick: impl Fn(&str) -> bool,
) -> Received {
    poll(DEADLINE, || async {
        let got = sink.received();
        got.iter()
            .find(|m| pick(&m.data.replace("\r\n", "\n")))
            .cloned()
            .ok_or_else(|| format!("no mail {what} among {} mails", got.len()))
    })
    .await
}

pub(crate) fn in_reply_to(data: &str, parent: &str) -> bool {
    data.contains(&format!("\nIn-Reply-To: <{parent}>\n"))
}

pub(crate) const BUILD_LOG: &str = "  CC      fs/splice.o\nfs/splice.c:1:1: error: unknown type name 'syntax'\n    1 | syntax error\n      | ^~~~~~\nmake[3]: *** [scripts/Makefile.build:250: fs/splice.o] Error 1\n";

pub(crate) async fn add_list(sim: &Sim<'_>, archive: &Path) -> i64 {
    add_list_with(sim, archive, json!({})).await
}

/// [`add_list`] with more settings (`extra`'s keys replace the defaults).
pub(crate) async fn add_list_with(sim: &Sim<'_>, archive: &Path, extra: Value) -> i64 {
    let mut body = json!({
        "name": "fsdevel",
        "archive": archive.to_string_lossy(),
        "repo": REPO,
        "branch": "main",
        "job_file": JOB,
        "address": LIST,
        "web_url": WEB,
        "interval_secs": 1,
        "wait_secs": 60,
        "from_start": true,
        // The replies here are unsigned: the list takes them as unverified
        // senders (DKIM is trust.rs's).
        "accept_unsigned": true,
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    id(&sim.post("/api/v1/lists", body, 201).await)
}
