//! Child processes with a log file, a time limit and cancellation.
//!
//! Every child the agent starts for a job goes through [`spawn_tied`]: it dies
//! with the agent, even when the agent is SIGKILLed (see `tied.rs`).

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::error::{AgentError, Result};

pub use crate::tied::{describe, spawn_tied, TiedChild};

/// Set by the heartbeat task when the server cancels the job.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// How a supervised child ended.
#[derive(Debug)]
pub enum Finished {
    Exited(ExitStatus),
    TimedOut,
}

/// Runs `cmd` with stdout and stderr appended to `log`, killing its whole
/// process group after `limit` or on cancellation (make spawns many children).
pub fn run_logged(
    cmd: &mut Command,
    log: &Path,
    limit: Duration,
    cancel: &Cancel,
) -> Result<Finished> {
    let out = File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| AgentError::io(format!("opening {}", log.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| AgentError::io("cloning the log handle", e))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    let child = spawn_tied(cmd)?;
    supervise(child, limit, cancel)
}

/// Waits for `child` (a process-group leader) within `limit`.
pub fn supervise(mut child: TiedChild, limit: Duration, cancel: &Cancel) -> Result<Finished> {
    let start = Instant::now();
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| AgentError::io("waiting for a child", e))?
        {
            return Ok(Finished::Exited(status));
        }
        let cancelled = cancel.is_cancelled();
        if cancelled || start.elapsed() >= limit {
            kill_group(&mut child);
            return if cancelled {
                Err(AgentError::Cancelled)
            } else {
                Ok(Finished::TimedOut)
            };
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGKILLs the child's process group and reaps the child.
pub fn kill_group(child: &mut std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // The group may already be gone; nothing else to do then.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Runs a short command and returns its stdout; a non-zero exit is an error
/// carrying stderr.
pub fn output(cmd: &mut Command) -> Result<String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = spawn_tied(cmd)?;
    // stderr is drained beside stdout so neither pipe fills and stalls the child.
    let stderr = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = e.read_to_end(&mut text);
            text
        })
    });
    let mut stdout = Vec::new();
    if let Some(mut o) = child.stdout.take() {
        o.read_to_end(&mut stdout)
            .map_err(|e| AgentError::io(format!("reading `{}`", describe(cmd)), e))?;
    }
    let status = child
        .wait()
        .map_err(|e| AgentError::io(format!("waiting for `{}`", describe(cmd)), e))?;
    let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    if !status.success() {
        return Err(AgentError::Command {
            command: describe(cmd),
            detail: format!("{status}: {}", String::from_utf8_lossy(&stderr).trim()),
        });
    }
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

/// Whether `program` is found on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// The end of a file, at most `max` bytes of it, as text (empty when it
/// cannot be read): a log's tail without reading a log of any size whole.
pub fn tail_of_file(path: &Path, max: u64) -> String {
    use std::io::{Seek, SeekFrom};
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut bytes = Vec::new();
    if f.seek(SeekFrom::Start(len.saturating_sub(max))).is_err()
        || f.take(max).read_to_end(&mut bytes).is_err()
    {
        return String::new();
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The start of a file, at most `max` bytes of it, as text (empty when it
/// cannot be read).
pub fn head_of_file(path: &Path, max: u64) -> String {
    let mut bytes = Vec::new();
    match File::open(path).and_then(|f| f.take(max).read_to_end(&mut bytes)) {
        Ok(_) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => String::new(),
    }
}

pub use kbot_core::text::last_lines as tail;

/// For unit tests whose tool or binary is missing here: the test says so
/// and returns; under CI (`CI` set), where `scripts/test` installs
/// everything, a missing part is a failure.
#[cfg(test)]
pub(crate) fn skip_outside_ci(why: &str) {
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipping: {why}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_past_its_limit_is_killed_with_its_group() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let log = dir.path().join("log");
        let start = Instant::now();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; sleep 30 & sleep 30"]);
        let end = run_logged(&mut cmd, &log, Duration::from_millis(500), &Cancel::new())?;
        assert!(matches!(end, Finished::TimedOut));
        assert!(start.elapsed() < Duration::from_secs(10));
        let text = std::fs::read_to_string(&log).map_err(|e| AgentError::io("log", e))?;
        assert_eq!(text, "started\n");
        Ok(())
    }

    #[test]
    fn cancellation_stops_the_child() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let cancel = Cancel::new();
        cancel.cancel();
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let end = run_logged(
            &mut cmd,
            &dir.path().join("log"),
            Duration::from_secs(60),
            &cancel,
        );
        assert!(matches!(end, Err(AgentError::Cancelled)));
        Ok(())
    }

    #[test]
    fn output_reports_failures_with_stderr() {
        let err = output(Command::new("sh").args(["-c", "echo oops >&2; exit 3"]));
        let msg = err.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.contains("oops") && msg.contains("exit status: 3"),
            "{msg}"
        );
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
    }
}
