//! A public-inbox v2 archive written the way public-inbox writes one, for
//! the list-reading tests: epochs `git/N.git`, each a bare repository whose
//! `refs/heads/master` gets one commit per message, the message stored as
//! the blob `m` (a deletion as the blob `d`) of a one-file tree.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A plain-text reply in a list's thread, as a mail client writes it.
pub struct Reply<'a> {
    /// `Name <address>`.
    pub from: &'a str,
    /// The list.
    pub to: &'a str,
    /// Its Message-ID, without `<>`.
    pub id: &'a str,
    pub parent_id: &'a str,
    pub parent_subject: &'a str,
    pub body: &'a str,
}

impl Reply<'_> {
    /// The mail: `Re: ` once before the parent's subject, a fixed date,
    /// the body ending in a newline.
    pub fn mail(&self) -> String {
        let subject = self.parent_subject.trim_start_matches("Re: ");
        let newline = if self.body.ends_with('\n') { "" } else { "\n" };
        format!(
            "From: {}\nTo: {}\nSubject: Re: {subject}\nDate: Wed, 02 Dec 2026 09:00:00 +0000\n\
             Message-ID: <{}>\nIn-Reply-To: <{p}>\nReferences: <{p}>\n\
             MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n{}{newline}",
            self.from,
            self.to,
            self.id,
            self.body,
            p = self.parent_id,
        )
    }
}

/// A v2 inbox in a test's directory.
#[derive(Debug)]
pub struct PublicInbox {
    root: PathBuf,
    /// The epoch new messages go to.
    epoch: u32,
}

impl PublicInbox {
    /// Creates an inbox at `root` with its first epoch `git/0.git`.
    pub fn create_v2(root: &Path) -> PublicInbox {
        let inbox = PublicInbox {
            root: root.to_owned(),
            epoch: 0,
        };
        inbox.init_epoch();
        inbox
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The bare repository of the current epoch.
    pub fn epoch_dir(&self) -> PathBuf {
        self.root.join(format!("git/{}.git", self.epoch))
    }

    /// Starts the next epoch, as public-inbox does when one grows past its
    /// size limit: later messages go to `git/N+1.git`.
    pub fn next_epoch(&mut self) {
        self.epoch += 1;
        self.init_epoch();
    }

    /// Commits `raw` as the blob `m` on the current epoch's master; returns
    /// the commit.
    pub fn append(&self, raw: &[u8]) -> String {
        self.commit_file("m", raw)
    }

    /// Records the deletion of `raw` (public-inbox commits it as `d`);
    /// returns the commit.
    pub fn delete(&self, raw: &[u8]) -> String {
        self.commit_file("d", raw)
    }

    fn init_epoch(&self) {
        let dir = self.epoch_dir();
        std::fs::create_dir_all(&dir).expect("mkdir epoch");
        git(&dir, &["init", "-q", "--bare"], None);
        // public-inbox's HEAD names master whatever git's default is.
        git(&dir, &["symbolic-ref", "HEAD", "refs/heads/master"], None);
    }

    fn commit_file(&self, name: &str, raw: &[u8]) -> String {
        let dir = self.epoch_dir();
        let blob = git(&dir, &["hash-object", "-w", "--stdin"], Some(raw));
        let entry = format!("100644 blob {blob}\t{name}\n");
        let tree = git(&dir, &["mktree"], Some(entry.as_bytes()));
        let parent = git_ok(&dir, &["rev-parse", "--verify", "-q", "refs/heads/master"]);
        let mut args = vec!["commit-tree", tree.as_str(), "-m", name];
        if let Some(parent) = &parent {
            args.extend(["-p", parent.as_str()]);
        }
        let commit = git(&dir, &args, None);
        let mut update = vec!["update-ref", "refs/heads/master", commit.as_str()];
        if let Some(parent) = &parent {
            update.push(parent.as_str());
        }
        git(&dir, &update, None);
        commit
    }
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Ann Author")
        .env("GIT_AUTHOR_EMAIL", "ann@example.org")
        .env("GIT_COMMITTER_NAME", "public-inbox")
        .env("GIT_COMMITTER_EMAIL", "public-inbox@example.org");
    cmd
}

/// Runs git on the bare repository `dir` with `input` on stdin; its
/// trimmed output; panics on failure.
fn git(dir: &Path, args: &[&str], input: Option<&[u8]>) -> String {
    let mut child = command(dir, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("git runs");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(input.unwrap_or_default())
        .expect("git input");
    drop(stdin);
    let out = child.wait_with_output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Runs git; its trimmed output, or None when it fails.
fn git_ok(dir: &Path, args: &[&str]) -> Option<String> {
    let out = command(dir, args).output().expect("git runs");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
