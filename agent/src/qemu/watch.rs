//! Watching one boot from the host: the guest's console (QEMU's stdout) read
//! whole, with the progress markers and fatal lines forwarded as they
//! appear, and [`Watch`], what watching the boot saw. What the markers and
//! fatal lines are is [`crate::console`]'s.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
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

/// The longest console line looked at whole: a longer one is taken in
/// pieces of this size (a guest may print forever without a newline).
const MAX_LINE: u64 = 64 << 10;

/// Reads the console, forwarding progress; returns its text, at most the
/// first and the last `keep` bytes (the guest is the attacker's kernel and
/// may print at full speed until the run's time limit).
pub(super) fn read_console(
    stdout: impl std::io::Read,
    tx: mpsc::Sender<ConsoleEvent>,
    keep: usize,
) -> String {
    let mut all = KeptText::new(keep);
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    while matches!(reader.by_ref().take(MAX_LINE).read_until(b'\n', &mut buf), Ok(n) if n > 0) {
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
        all.push(line);
        if let Some(e) = event {
            let _ = tx.send(e);
        }
    }
    all.text()
}

/// Text kept within a bound: the first `keep` bytes whole, the last `keep`
/// bytes as whole lines, and a line saying how much was dropped between.
pub(super) struct KeptText {
    keep: usize,
    head: String,
    tail: VecDeque<String>,
    tail_bytes: usize,
    dropped: u64,
}

impl KeptText {
    pub(super) fn new(keep: usize) -> KeptText {
        KeptText {
            keep,
            head: String::new(),
            tail: VecDeque::new(),
            tail_bytes: 0,
            dropped: 0,
        }
    }

    pub(super) fn push(&mut self, line: String) {
        if self.tail.is_empty() && self.head.len() + line.len() <= self.keep {
            self.head.push_str(&line);
            return;
        }
        self.tail_bytes += line.len();
        self.tail.push_back(line);
        while self.tail_bytes > self.keep {
            let Some(old) = self.tail.pop_front() else {
                break;
            };
            self.tail_bytes -= old.len();
            self.dropped += old.len() as u64;
        }
    }

    pub(super) fn text(self) -> String {
        let mut text = self.head;
        if self.dropped > 0 {
            text.push_str(&format!(
                "\n[kbot: {} bytes of console output dropped here; the first and last {} bytes are kept]\n",
                self.dropped, self.keep
            ));
        }
        text.extend(self.tail);
        text
    }
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
    /// Why QEMU was killed for the guest's output (the results channel
    /// past its size limit).
    pub(super) overflow: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The agent's resident memory, in bytes.
    fn rss() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("VmRSS")
            << 10
    }

    /// A guest console: the /init marker, then `total` bytes of lines and
    /// one endless line without a newline, then the done marker; it notes
    /// the reader's peak RSS as it is read.
    struct Flood {
        total: u64,
        sent: u64,
        peak_rss: u64,
        tail: Vec<u8>,
    }

    impl Read for Flood {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.sent == 0 {
                let head = format!("{INIT_MARKER}\n");
                buf[..head.len()].copy_from_slice(head.as_bytes());
                self.sent = head.len() as u64;
                return Ok(head.len());
            }
            if self.sent >= self.total {
                let n = self.tail.len().min(buf.len());
                buf[..n].copy_from_slice(&self.tail[..n]);
                self.tail.drain(..n);
                return Ok(n);
            }
            if self.sent % (16 << 20) < buf.len() as u64 {
                self.peak_rss = self.peak_rss.max(rss());
            }
            let n = buf.len().min((self.total - self.sent) as usize);
            // The middle third is one line with no newline at all.
            let endless = (self.total / 3..2 * self.total / 3).contains(&self.sent);
            for (i, b) in buf[..n].iter_mut().enumerate() {
                *b = if !endless && (self.sent + i as u64) % 100 == 99 {
                    b'\n'
                } else {
                    b'x'
                };
            }
            self.sent += n as u64;
            Ok(n)
        }
    }

    /// 200 MiB of console from a guest: the agent keeps the first and last
    /// MiB with a note of what it dropped, still sees the markers, and its
    /// memory stays bounded while reading.
    /// The memory bound is the process's RSS, which other tests' threads
    /// share: the test runs again alone, in a process of its own.
    #[test]
    fn a_flooding_console_is_kept_within_its_bound() {
        const ALONE: &str = "KBOT_TEST_FLOOD_ALONE";
        if std::env::var_os(ALONE).is_none() {
            let exe = std::env::current_exe().expect("the test binary");
            let out = std::process::Command::new(exe)
                .args(["--exact", "--test-threads=1", "--nocapture"])
                .arg("qemu::watch::tests::a_flooding_console_is_kept_within_its_bound")
                .env(ALONE, "1")
                .output()
                .expect("running the test alone");
            let printed = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{printed}");
            assert!(printed.contains("1 passed"), "{printed}");
            return;
        }
        let keep = 1 << 20;
        let before = rss();
        let mut flood = Flood {
            total: 200 << 20,
            sent: 0,
            peak_rss: before,
            tail: format!("\nlast words\n{DONE_MARKER}\n").into_bytes(),
        };
        let (tx, rx) = mpsc::channel();
        let text = read_console(&mut flood, tx, keep);
        assert!(text.len() <= 2 * keep + 200, "{} bytes kept", text.len());
        assert!(text.starts_with(INIT_MARKER), "the start is kept");
        assert!(
            text.ends_with(&format!("last words\n{DONE_MARKER}\n")),
            "the end is kept"
        );
        assert!(
            text.contains("bytes of console output dropped here"),
            "the gap is marked"
        );
        let events: Vec<_> = rx.try_iter().collect();
        assert!(matches!(events.first(), Some(ConsoleEvent::Init)));
        assert!(matches!(events.last(), Some(ConsoleEvent::Done)));
        let grew = flood.peak_rss.saturating_sub(before);
        assert!(grew < 32 << 20, "RSS grew by {grew} bytes reading 200 MiB");
    }

    #[test]
    fn short_text_is_kept_whole() {
        let mut t = KeptText::new(10);
        for l in ["abc\n", "def\n"] {
            t.push(l.to_string());
        }
        assert_eq!(t.text(), "abc\ndef\n");
    }
}
