//! The commits planted on Debian's linux-source base, written with git's
//! plumbing into a bare clone (no 78k-file checkout). Oldest first, on
//! `master`:
//!
//! | name | what |
//! |---|---|
//! | `h0` | Documentation only: the branch head when a watch starts |
//! | `doc1`..`doc3` | Documentation only |
//! | `break` | kernel/sys.c: a helper that does not compile |
//! | `fix` | kernel/sys.c: the helper builds |
//! | `slow` | fs/pipe.c: zeroed pages allocated and freed under `pipe->mutex` on every write (the planted regression), author Pat Pipe |
//! | `doc4` | Documentation only |
//! | `comment` | fs/pipe.c: a comment only (harmless, after the regression) |
//!
//! and branches on h0:
//!
//! | name | what |
//! |---|---|
//! | `ring` | fs/pipe.c: a new pipe's ring has 2 slots instead of 16 (a change of another kind: a writer of 64 KiB blocks every 8 KiB, so context switches multiply) |
//! | `contend` | fs/pipe.c: pipe_write releases and takes `pipe->mutex` once more after it first takes it (the seed report's change in miniature: it costs only when a reader and a writer on different CPUs contend for the mutex) |
//! | `panic` | init/main.c: the kernel builds and panics before it starts init (a kernel that does not come back, for the kexec lab) |
//! | `hang` | init/main.c: the kernel builds and spins before it starts init, silent (a kernel that hangs) |
//!
//! Commit dates are fixed, a minute apart, so the commits (and the agents'
//! build cache keys) are the same on every run. `master` is left at h0;
//! the final head is kept as `refs/kbot/final`.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use crate::author::{Author, Commit, NOBODY};

const PAT: (&str, &str) = ("Pat Pipe", "pat@example.org");

/// Makes the repository at `dir` (removed first) from the base repository
/// `src`, the slowdown zeroing `pages` pages a write; its commits by name,
/// `base` among them.
pub fn plant(src: &Path, dir: &Path, pages: u32) -> HashMap<String, String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    let status = Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(src)
        .arg(dir)
        .status()
        .expect("git clone");
    assert!(status.success(), "cloning {}", src.display());
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let git = Author::at(dir, &scratch.path().join("index"));
    git.git(&["config", "gc.auto", "0"]);
    let base = git.git(&["rev-parse", "HEAD^{commit}"]);
    let mut p = Planter {
        git,
        minute: 0,
        head: base.clone(),
        commits: HashMap::from([("base".to_owned(), base)]),
    };

    p.doc(
        "h0",
        "a note on filesystems",
        "Documentation/filesystems/index.rst",
    );
    let h0 = p.head.clone();
    p.doc(
        "doc1",
        "a note on the development process",
        "Documentation/process/index.rst",
    );
    p.doc(
        "doc2",
        "a note on the admin guide",
        "Documentation/admin-guide/index.rst",
    );
    p.doc(
        "doc3",
        "a second note on filesystems",
        "Documentation/filesystems/index.rst",
    );
    // A build break in a file every config compiles, fixed by the next commit.
    p.edit(
        "break",
        "kernel/sys.c",
        "kernel/sys: add kbot_e2e_helper()",
        NOBODY,
        |t| {
            format!(
                "{t}\n/* kbot e2e: a helper for the robot's end-to-end scenario */\n\
             static int __maybe_unused kbot_e2e_helper(void)\n{{\n\treturn kbot_e2e_limit;\n}}\n"
            )
        },
    );
    p.edit(
        "fix",
        "kernel/sys.c",
        "kernel/sys: fix the build of kbot_e2e_helper()",
        NOBODY,
        |t| replace_once(t, "\n\treturn kbot_e2e_limit;\n", "\n\treturn 0;\n"),
    );
    p.edit(
        "slow",
        "fs/pipe.c",
        "fs/pipe: zero scratch pages under pipe->mutex in pipe_write()",
        PAT,
        |t| zero_pages_under_the_lock(t, pages),
    );
    p.doc(
        "doc4",
        "a note on the kernel API",
        "Documentation/core-api/index.rst",
    );
    p.edit(
        "comment",
        "fs/pipe.c",
        "fs/pipe: a comment at the end of the file",
        NOBODY,
        |t| format!("{t}\n/* kbot e2e: a harmless comment */\n"),
    );
    let last = p.head.clone();

    p.branch(
        &h0,
        "ring",
        "fs/pipe.c",
        "fs/pipe: a two-slot default pipe ring",
        |t| {
            let line = "\n\tunsigned long pipe_bufs = PIPE_DEF_BUFFERS;\n";
            assert!(t.contains(line), "fs/pipe.c has no default ring size line");
            t.replace(line, "\n\tunsigned long pipe_bufs = 2;\n")
        },
    );
    p.branch(
        &h0,
        "contend",
        "fs/pipe.c",
        "fs/pipe: release and retake the pipe mutex once more per write",
        // The first lock in pipe_write, before it reads any pipe state:
        // dropping and retaking the mutex there is correct, and costs a
        // hand-off under contention.
        |t| {
            let lock = "\n\t__pipe_lock(pipe);\n";
            let at = after(t, "\npipe_write(", lock);
            format!(
                "{}\t__pipe_unlock(pipe);\n\t__pipe_lock(pipe);\n{}",
                &t[..at],
                &t[at..]
            )
        },
    );
    for (name, subject, planted) in [
        (
            "panic",
            "init: panic before init (a kernel that does not boot)",
            r#"panic("kbot e2e: a planted boot failure");"#,
        ),
        (
            "hang",
            "init: spin before init (a kernel that hangs)",
            r#"pr_emerg("kbot e2e: a planted hang\n"); for (;;) cpu_relax();"#,
        ),
    ] {
        p.branch(&h0, name, "init/main.c", subject, |t| {
            let anchor = "\tdo_sysctl_args();\n\n\tif (ramdisk_execute_command) {";
            replace_once(t, anchor, &format!("\t{planted}\n{anchor}"))
        });
    }
    p.git.git(&["update-ref", "refs/kbot/final", &last]);
    p.git.git(&["update-ref", "refs/heads/master", &h0]);
    p.git.git(&["symbolic-ref", "HEAD", "refs/heads/master"]);
    p.commits
}

/// The commits made so far and the one the next goes on.
struct Planter {
    git: Author,
    /// Of the last commit's date.
    minute: u32,
    head: String,
    commits: HashMap<String, String>,
}

impl Planter {
    /// Commits on the head the file at `path` changed by `change`.
    fn edit(
        &mut self,
        name: &str,
        path: &str,
        subject: &str,
        author: (&str, &str),
        change: impl Fn(&str) -> String,
    ) {
        self.minute += 1;
        let commit = Commit {
            parent: &self.head,
            message: subject,
            author,
            date: Some(format!("2026-11-01T00:{:02}:00Z", self.minute)),
        };
        self.head = self.git.edited(&self.head, path, change, commit);
        self.commits.insert(name.to_owned(), self.head.clone());
    }

    /// A harmless note at the end of a Documentation file.
    fn doc(&mut self, name: &str, what: &str, path: &str) {
        let subject = format!("Documentation: {what}");
        self.edit(name, path, &subject, NOBODY, |t| {
            format!("{t}\n.. kbot e2e: {what} (harmless)\n")
        });
    }

    /// Branch `name` of one commit on `on`.
    fn branch(
        &mut self,
        on: &str,
        name: &str,
        path: &str,
        subject: &str,
        change: impl Fn(&str) -> String,
    ) {
        self.head = on.to_owned();
        self.edit(name, path, subject, NOBODY, change);
        let head = self.head.clone();
        self.git
            .git(&["update-ref", &format!("refs/heads/{name}"), &head]);
    }
}

/// `text` with its one `from` replaced by `to`.
fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(
        text.matches(from).count(),
        1,
        "{from:?} is not in the file once"
    );
    text.replacen(from, to, 1)
}

/// Where the first `what` after `start` ends.
fn after(text: &str, start: &str, what: &str) -> usize {
    let from = text.find(start).unwrap_or_else(|| panic!("no {start:?}"));
    from + text[from..]
        .find(what)
        .unwrap_or_else(|| panic!("no {what:?} after {start:?}"))
        + what.len()
}

/// The regression: `pages` zeroed pages allocated and freed under
/// `pipe->mutex` on every write.
fn zero_pages_under_the_lock(text: &str, pages: u32) -> String {
    let at = after(
        text,
        "pipe_write(struct kiocb *iocb, struct iov_iter *from)",
        "\t__pipe_lock(pipe);\n",
    );
    let slow = format!(
        "\n\t/* kbot e2e: allocate and zero scratch pages under pipe->mutex on every write */\n\
         \t{{\n\
         \t\tint kbot_i;\n\
         \n\
         \t\tfor (kbot_i = 0; kbot_i < {pages}; kbot_i++) {{\n\
         \t\t\tstruct page *kbot_page = alloc_page(GFP_KERNEL | __GFP_ZERO);\n\
         \n\
         \t\t\tif (kbot_page)\n\
         \t\t\t\t__free_page(kbot_page);\n\
         \t\t}}\n\
         \t}}\n"
    );
    format!("{}{slow}{}", &text[..at], &text[at..])
}
