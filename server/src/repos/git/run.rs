//! Running git: one child process on the async runtime, within a time
//! limit, terminal prompts off, its failure as a [`GitError`] naming the
//! command.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::GitError;
use crate::web::without_credentials;

/// [`run`] within `timeout`, its output as text.
pub(super) async fn run_text(
    dir: Option<&Path>,
    args: &[&str],
    input: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<String, GitError> {
    let out = run(dir, args, input, Some(timeout)).await?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The server's one git runner: git on the repository `dir` (its git
/// directory; none for a command run inside a worktree), `input` on its
/// standard input, ended after `timeout` (or by dropping the future, for
/// callers with a timeout of their own). Its standard output as bytes (an
/// archive's messages need not be UTF-8), or why it failed.
pub async fn run(
    dir: Option<&Path>,
    args: &[&str],
    input: Option<Vec<u8>>,
    timeout: Option<Duration>,
) -> Result<Vec<u8>, GitError> {
    let output = spawn(dir, args, input)?.wait_with_output();
    let output = match timeout {
        None => output.await?,
        Some(timeout) => match tokio::time::timeout(timeout, output).await {
            Ok(out) => out?,
            Err(_) => {
                return Err(GitError::Timeout {
                    command: command_name(args),
                    secs: timeout.as_secs(),
                })
            }
        },
    };
    outcome(args, output)
}

/// Starts git as [`run`] does, for a caller that streams its output
/// (then [`outcome`] of `wait_with_output`).
pub fn spawn(
    dir: Option<&Path>,
    args: &[&str],
    input: Option<Vec<u8>>,
) -> Result<tokio::process::Child, GitError> {
    use tokio::io::AsyncWriteExt;
    let mut cmd = git_command(dir, args);
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn()?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // From a separate task, so a large input cannot deadlock against a
        // full output pipe; a git that exits early closes the pipe, and its
        // status tells why.
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
    }
    Ok(child)
}

/// A finished git's standard output, or why it failed.
pub fn outcome(args: &[&str], output: std::process::Output) -> Result<Vec<u8>, GitError> {
    if !output.status.success() {
        // git may quote the URL it was given, credentials and all, and
        // its words reach pages, events and API errors.
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(GitError::Failed {
            command: command_name(args),
            stderr: without_credentials(stderr.trim()),
        });
    }
    Ok(output.stdout)
}

fn command_name(args: &[&str]) -> String {
    args.first().copied().unwrap_or_default().to_owned()
}

pub(super) fn git_command(dir: Option<&Path>, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    if let Some(dir) = dir {
        cmd.arg("--git-dir").arg(dir);
    }
    cmd.args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .env("LC_ALL", "C")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}
