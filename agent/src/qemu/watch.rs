//! Watching one boot from the host: the guest's console (QEMU's stdout) read
//! whole, with the progress markers and fatal lines forwarded as they
//! appear, and [`Watch`], what watching the boot saw. What the markers and
//! fatal lines are is [`crate::console`]'s.

use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::Duration;

use crate::console::{first_fatal_line, DONE_MARKER, INIT_MARKER, MEASURE_MARKER};
use crate::monitors::HostSample;

/// Progress seen on the console.
pub(super) enum ConsoleEvent {
    Init,
    Measure,
    Fatal(String),
    Done,
}

/// Reads the console, forwarding progress; returns the whole text.
pub(super) fn read_console(stdout: impl std::io::Read, tx: mpsc::Sender<ConsoleEvent>) -> String {
    let mut all = String::new();
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    while matches!(reader.read_until(b'\n', &mut buf), Ok(n) if n > 0) {
        let line = String::from_utf8_lossy(&buf).replace('\r', "");
        buf.clear();
        let trimmed = line.trim_end();
        let event = if trimmed == INIT_MARKER {
            Some(ConsoleEvent::Init)
        } else if trimmed == MEASURE_MARKER {
            Some(ConsoleEvent::Measure)
        } else if trimmed == DONE_MARKER {
            Some(ConsoleEvent::Done)
        } else {
            first_fatal_line(trimmed).map(|l| ConsoleEvent::Fatal(l.to_string()))
        };
        all.push_str(&line);
        if let Some(e) = event {
            let _ = tx.send(e);
        }
    }
    all
}

/// What watching one boot saw.
#[derive(Debug, Default)]
pub(super) struct Watch {
    pub(super) console: String,
    pub(super) init_after: Option<Duration>,
    pub(super) fatal: Option<String>,
    pub(super) done: bool,
    /// The limit that passed, when the guest hung (QEMU was killed then).
    pub(super) timed_out: Option<Duration>,
    pub(super) wall: Duration,
    /// The host at the start and the end of the measured runs.
    pub(super) host_before: Option<HostSample>,
    pub(super) host_after: Option<HostSample>,
    /// Where the vCPU threads ran.
    pub(super) pinned: String,
}
