//! The patch author's repository and the list archive: commits made with
//! git's plumbing on fixed dates (the same commits, so the same cached
//! kernels, on every run), posted as `git format-patch --thread --base`
//! mails into a public-inbox v2 archive.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kbot_testkit::inbox::Reply;
use kbot_testkit::smtp_sink::header;
use kbot_testkit::PublicInbox;

use crate::lab::KernelRepo;

/// The author's name and address of commits nobody in particular made.
pub const NOBODY: (&str, &str) = ("kbot e2e", "kbot-e2e@localhost");
/// The date of every commit but those made "now".
const FIXED_DATE: &str = "2026-11-02T00:01:00Z";

/// A bare clone of the kernel repository sharing its objects, with its own
/// index: the series commits are made here, so the only way they reach an
/// agent is the server's git (kbot applies the mails itself).
#[derive(Clone)]
pub struct Author {
    git_dir: PathBuf,
    index: PathBuf,
    committer: (String, String),
}

/// What a commit made by [`Author::commit_index`] is.
pub struct Commit<'a> {
    pub parent: &'a str,
    pub message: &'a str,
    pub author: (&'a str, &'a str),
    /// `None`: the fixed date.
    pub date: Option<String>,
}

impl Author {
    pub fn clone_of(repo: &KernelRepo, work: &Path) -> Author {
        let git_dir = work.join("author.git");
        let status = Command::new("git")
            .args(["clone", "-q", "--bare", "--shared"])
            .arg(&repo.dir)
            .arg(&git_dir)
            .status()
            .expect("git clone");
        assert!(status.success(), "cloning the kernel repository");
        Author {
            git_dir,
            index: work.join("index"),
            committer: (NOBODY.0.into(), NOBODY.1.into()),
        }
    }

    /// Commits to the repository at `git_dir` through the index file
    /// `index`, as nobody in particular.
    pub fn at(git_dir: &Path, index: &Path) -> Author {
        Author {
            git_dir: git_dir.to_path_buf(),
            index: index.to_path_buf(),
            committer: (NOBODY.0.into(), NOBODY.1.into()),
        }
    }

    /// The same repository, committed to by `name <email>`.
    pub fn as_committer(&self, name: &str, email: &str) -> Author {
        Author {
            committer: (name.to_owned(), email.to_owned()),
            ..self.clone()
        }
    }

    /// Runs git with `stdin`; its output as is.
    pub fn git_raw(&self, args: &[&str], env: &[(&str, &str)], stdin: &[u8]) -> String {
        let mut child = Command::new("git")
            .arg("--git-dir")
            .arg(&self.git_dir)
            .args(args)
            // The test's own index and committer: set for the whole process,
            // they would reach the server's and the agent's git too.
            .env("GIT_INDEX_FILE", &self.index)
            .env("GIT_COMMITTER_NAME", &self.committer.0)
            .env("GIT_COMMITTER_EMAIL", &self.committer.1)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("git starts");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin)
            .expect("git's input");
        let out = child.wait_with_output().expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    /// Runs git; its trimmed output.
    pub fn git(&self, args: &[&str]) -> String {
        self.git_raw(args, &[], b"").trim().to_owned()
    }

    /// Commits the index; the commit.
    pub fn commit_index(&self, c: Commit<'_>) -> String {
        let tree = self.git(&["write-tree"]);
        let date = c.date.unwrap_or_else(|| FIXED_DATE.to_owned());
        self.git_raw(
            &["commit-tree", &tree, "-p", c.parent, "-m", c.message],
            &[
                ("GIT_AUTHOR_DATE", &date),
                ("GIT_COMMITTER_DATE", &date),
                ("GIT_AUTHOR_NAME", c.author.0),
                ("GIT_AUTHOR_EMAIL", c.author.1),
            ],
            b"",
        )
        .trim()
        .to_owned()
    }

    /// `c.parent` with the change of commit `change` (its diff against its
    /// parent) applied.
    pub fn on(&self, change: &str, c: Commit<'_>) -> String {
        self.git(&["read-tree", c.parent]);
        let diff = self.git_raw(&["diff", &format!("{change}^"), change], &[], b"");
        self.git_raw(&["apply", "--cached", "-"], &[], diff.as_bytes());
        self.commit_index(c)
    }

    /// The tree of commit `from` with the file at `path` replaced by `edit`
    /// of its text, committed on `c.parent`.
    pub fn edited(
        &self,
        from: &str,
        path: &str,
        edit: impl Fn(&str) -> String,
        c: Commit<'_>,
    ) -> String {
        self.git(&["read-tree", from]);
        let text = self.git_raw(&["show", &format!("{from}:{path}")], &[], b"");
        let blob = self.git_raw(
            &["hash-object", "-w", "--stdin"],
            &[],
            edit(&text).as_bytes(),
        );
        let blob = blob.trim();
        self.git(&[
            "update-index",
            "--cacheinfo",
            &format!("100644,{blob},{path}"),
        ]);
        self.commit_index(c)
    }

    /// `git diff A B -- PATH`.
    pub fn diff(&self, a: &str, b: &str, path: &str) -> String {
        self.git_raw(&["diff", a, b, "--", path], &[], b"")
    }

    /// Moves `branch` of the repository at `to` to `commit`.
    pub fn push(&self, to: &Path, commit: &str, branch: &str) {
        self.git(&[
            "push",
            "-q",
            to.to_str().expect("utf-8 path"),
            &format!("{commit}:refs/heads/{branch}"),
        ]);
    }
}

/// A posted series: its mails as archived, cover letter first.
pub struct Posted {
    pub mails: Vec<String>,
}

impl Posted {
    /// The `i`th mail's Message-ID, without `<>` (0 is the cover letter
    /// when there is one).
    pub fn id(&self, i: usize) -> String {
        header(&self.mails[i], "Message-ID")
    }
}

/// The list archive and what posts to it.
pub struct Archive {
    pub inbox: PublicInbox,
    pub address: String,
    posts: u32,
}

impl Archive {
    pub fn create(dir: &Path, address: &str) -> Archive {
        Archive {
            inbox: PublicInbox::create_v2(dir),
            address: address.to_owned(),
            posts: 0,
        }
    }

    /// Formats the commits `range` with `git format-patch` (To: the list,
    /// its base named, every Message-ID this post's own) and archives them.
    pub fn post(&mut self, author: &Author, base: &str, extra: &[&str], range: &str) -> Posted {
        self.posts += 1;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos();
        let tag = format!("p{}-{nanos}", self.posts);
        let out = tempfile::tempdir().expect("tempdir");
        let mut args = vec![
            "format-patch".to_owned(),
            "-q".into(),
            "-o".into(),
            out.path().to_str().expect("utf-8").into(),
            "--thread=shallow".into(),
            format!("--to={}", self.address),
            format!("--base={base}"),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        args.push(range.to_owned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        author.git(&args);
        let mut files: Vec<PathBuf> = std::fs::read_dir(out.path())
            .expect("format-patch output")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        let mails: Vec<String> = files
            .iter()
            .map(|f| own_ids(&std::fs::read_to_string(f).expect("a patch mail"), &tag))
            .collect();
        for m in &mails {
            self.inbox.append(m.as_bytes());
        }
        Posted { mails }
    }

    /// Archives a plain-text reply by `from` to the mail `parent_id`
    /// whose subject is `parent_subject`; its Message-ID is `id`.
    pub fn reply(&self, from: &str, id: &str, parent_id: &str, parent_subject: &str, body: &str) {
        let mail = Reply {
            from,
            to: &self.address,
            id,
            parent_id,
            parent_subject,
            body,
        };
        self.inbox.append(mail.mail().as_bytes());
    }
}

/// A format-patch mail as posted: no mbox `From ` line, the cover letter's
/// placeholders filled, and every Message-ID, In-Reply-To and References id
/// prefixed with `tag` (format-patch names ids by the second it ran in).
fn own_ids(text: &str, tag: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.lines().enumerate() {
        if i == 0 && line.starts_with("From ") {
            continue;
        }
        let field = line.split_once(": <").filter(|(name, _)| {
            ["Message-ID", "In-Reply-To", "References"]
                .iter()
                .any(|f| f.eq_ignore_ascii_case(name))
        });
        match field {
            Some((name, rest)) => out.push_str(&format!("{name}: <{tag}.{rest}")),
            None => out.push_str(
                &line
                    .replace(
                        "*** SUBJECT HERE ***",
                        "pipe: scratch pages for pipe writes",
                    )
                    .replace(
                        "*** BLURB HERE ***",
                        "This series changes how pipe writes use scratch pages.",
                    ),
            ),
        }
        out.push('\n');
    }
    out
}
