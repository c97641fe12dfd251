//! Real git repositories built in temp dirs, for the repo and submission tests.

use std::path::Path;
use std::process::Command;

/// Runs git in `dir` with a fixed author and committer; panics on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Ann Author")
        .env("GIT_AUTHOR_EMAIL", "ann@example.org")
        .env("GIT_COMMITTER_NAME", "Cid Committer")
        .env("GIT_COMMITTER_EMAIL", "cid@example.org")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repo on branch `main` with one commit per subject; returns their shas.
pub fn linear_repo(dir: &Path, subjects: &[&str]) -> Vec<String> {
    std::fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q", "-b", "main"]);
    let mut shas = Vec::new();
    for (i, subject) in subjects.iter().enumerate() {
        std::fs::write(dir.join("f"), format!("{i}\n")).expect("write");
        git(dir, &["add", "f"]);
        git(dir, &["commit", "-q", "-m", subject]);
        shas.push(git(dir, &["rev-parse", "HEAD"]));
    }
    shas
}
