//! Git repositories shaped for bisection tests, and `git bisect` itself as
//! the oracle: what it tests and what it blames on the same history.

use std::path::Path;
use std::process::Command;

use tempfile::TempDir;

use kbot_testkit::gitrepo::git;

/// A repository in a temp dir whose every commit adds its own file (named
/// after the subject), so a cherry-pick applies cleanly and keeps its
/// patch-id. Starts with one commit on `main`: [`Repo::base`].
pub struct Repo {
    dir: TempDir,
    pub base: String,
}

/// What `git bisect` is told about a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Good,
    Bad,
    Skip,
}

/// How a `git bisect` session ended.
#[derive(Debug, Clone, Default)]
pub struct GitBisect {
    /// The commits it asked about, in order.
    pub tested: Vec<String>,
    pub first_bad: Option<String>,
    /// When only skipped commits were left: the candidates it listed.
    pub remaining: Vec<String>,
}

impl Repo {
    pub fn new() -> Repo {
        let dir = tempfile::tempdir().expect("tempdir");
        git(dir.path(), &["init", "-q", "-b", "main"]);
        let mut repo = Repo {
            dir,
            base: String::new(),
        };
        repo.base = repo.commit("pipe: base");
        repo
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn url(&self) -> &str {
        self.path().to_str().expect("utf-8 temp path")
    }

    pub fn git(&self, args: &[&str]) -> String {
        git(self.path(), args)
    }

    /// A commit on the current branch by the default author.
    pub fn commit(&self, subject: &str) -> String {
        self.commit_by(subject, None)
    }

    /// A commit on the current branch, by `author` ("Name <mail>") if given.
    pub fn commit_by(&self, subject: &str, author: Option<&str>) -> String {
        let file: String = subject
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        std::fs::write(
            self.path().join(format!("{file}.c")),
            format!("{subject}\n"),
        )
        .expect("write");
        self.git(&["add", "-A"]);
        let author = author.map(|a| format!("--author={a}"));
        let mut args = vec!["commit", "-q", "-m", subject];
        args.extend(author.as_deref());
        self.git(&args);
        self.git(&["rev-parse", "HEAD"])
    }

    /// `n` commits `pipe: <name> 1` .. `pipe: <name> n` on the current branch.
    pub fn commits(&self, name: &str, n: usize) -> Vec<String> {
        (1..=n)
            .map(|i| self.commit(&format!("pipe: {name} {i}")))
            .collect()
    }

    /// Creates branch `name` at `at` and checks it out.
    pub fn branch_at(&self, name: &str, at: &str) {
        self.git(&["checkout", "-q", "-b", name, at]);
    }

    pub fn checkout(&self, name: &str) {
        self.git(&["checkout", "-q", name]);
    }

    /// Merges `branch` into the current branch with a merge commit.
    pub fn merge(&self, branch: &str, subject: &str) -> String {
        self.git(&["merge", "-q", "--no-ff", "-m", subject, branch]);
        self.git(&["rev-parse", "HEAD"])
    }

    pub fn cherry_pick(&self, sha: &str) -> String {
        self.git(&["cherry-pick", sha]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// `sha` and every commit of any branch that contains it.
    pub fn descendants(&self, sha: &str) -> Vec<String> {
        let not = format!("^{sha}");
        let out = self.git(&["rev-list", "--all", "--ancestry-path", &not]);
        std::iter::once(sha.to_owned())
            .chain(out.lines().map(str::to_owned))
            .collect()
    }

    /// Runs `git bisect` from `good` to `bad` without touching the work
    /// tree, asking `mark` about each commit it picks.
    pub fn bisect(&self, good: &str, bad: &str, mark: impl Fn(&str) -> Mark) -> GitBisect {
        let mut out = self.bisect_cmd(&["start", "--no-checkout", bad, good]);
        let mut session = GitBisect::default();
        loop {
            if let Some(line) = out
                .lines()
                .find(|l| l.ends_with(" is the first bad commit"))
            {
                session.first_bad = line.split_whitespace().next().map(str::to_owned);
                break;
            }
            if out.contains("could be any of:") {
                session.remaining = out
                    .lines()
                    .filter(|l| l.len() == 40 && l.chars().all(|c| c.is_ascii_hexdigit()))
                    .map(str::to_owned)
                    .collect();
                break;
            }
            let current = self.git(&["rev-parse", "BISECT_HEAD"]);
            let verb = match mark(&current) {
                Mark::Good => "good",
                Mark::Bad => "bad",
                Mark::Skip => "skip",
            };
            out = self.bisect_cmd(&[verb, &current]);
            session.tested.push(current);
        }
        self.bisect_cmd(&["reset"]);
        session
    }

    /// `git bisect ARGS`: its output, whatever the exit status (it exits
    /// non-zero when only skipped commits are left).
    fn bisect_cmd(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(self.path())
            .arg("bisect")
            .args(args)
            .output()
            .expect("git bisect runs");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}
