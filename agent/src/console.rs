//! What a booted guest says: the kernel console (ttyS0), watched for boot
//! progress and for panics and oopses, and the results channel (ttyS1), a
//! sequence of `@@KBOT-BEGIN <name>` ... `@@KBOT-END <name> [rc=N]` sections
//! written by the initramfs's /init.

use std::collections::BTreeMap;

/// Printed on the console by /init once userspace runs (boot succeeded).
pub const INIT_MARKER: &str = "KBOT-INIT";
/// Printed on the console by /init when the measured runs start (after the
/// warm-up executions): the host is watched for interference from here.
pub const MEASURE_MARKER: &str = "KBOT-MEASURE";
/// Printed on the console by /init after the last workload.
pub const DONE_MARKER: &str = "KBOT-DONE";
pub const BEGIN: &str = "@@KBOT-BEGIN ";
pub const END: &str = "@@KBOT-END ";

/// Console lines that mean the kernel is broken (LKP's dmesg error ids).
const FATAL_PATTERNS: &[&str] = &[
    "Kernel panic - not syncing",
    "Oops:",
    "BUG: unable to handle",
    "BUG: kernel NULL pointer dereference",
    "general protection fault",
    "kernel BUG at",
    "BUG: soft lockup",
    "watchdog: BUG:",
    "INFO: task hung",
    "RCU Stall",
    "rcu_sched self-detected stall",
];

/// The first fatal console line, if any.
pub fn first_fatal_line(console: &str) -> Option<&str> {
    console
        .lines()
        .find(|l| FATAL_PATTERNS.iter().any(|p| l.contains(p)))
        .map(str::trim)
}

/// One section of the results channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub body: String,
    /// `rc=N` on the END line: the exit code of the command that produced it.
    pub rc: Option<i32>,
    /// The END line was seen (a guest that died mid-section leaves it open).
    pub complete: bool,
}

/// Splits the results channel into named sections (carriage returns, which
/// the guest tty adds, removed). A name seen twice keeps the later body.
pub fn sections(channel: &str) -> BTreeMap<String, Section> {
    let mut out = BTreeMap::new();
    let mut open: Option<(String, String)> = None;
    for raw in channel.lines() {
        let line = raw.trim_end_matches('\r');
        if let Some(name) = line.strip_prefix(BEGIN) {
            if let Some((prev, body)) = open.take() {
                out.insert(
                    prev,
                    Section {
                        body,
                        rc: None,
                        complete: false,
                    },
                );
            }
            open = Some((name.trim().to_string(), String::new()));
        } else if let Some(rest) = line.strip_prefix(END) {
            let mut words = rest.split_whitespace();
            let name = words.next().unwrap_or_default();
            let rc = words.find_map(|w| w.strip_prefix("rc=")?.parse().ok());
            if let Some((open_name, body)) = open.take() {
                let complete = open_name == name;
                out.insert(open_name, Section { body, rc, complete });
            }
        } else if let Some((_, body)) = open.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((name, body)) = open {
        out.insert(
            name,
            Section {
                body,
                rc: None,
                complete: false,
            },
        );
    }
    out
}

/// Seconds since boot of the kernel's last printk line before `marker`
/// (`[    1.234567] ...`), as a boot-time figure.
pub fn printk_seconds_before(console: &str, marker: &str) -> Option<f64> {
    let upto = &console[..console.find(marker)?];
    upto.lines().rev().find_map(|l| {
        let inner = l.trim_start().strip_prefix('[')?;
        inner.split_once(']')?.0.trim().parse::<f64>().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_split_with_exit_codes() {
        let ch = "noise\r\n@@KBOT-BEGIN uname\r\n6.1.0\r\n@@KBOT-END uname\r\n@@KBOT-BEGIN output.0\r\n{\"a\":1}\r\n@@KBOT-END output.0 rc=3\r\n@@KBOT-BEGIN vmstat.after\r\npgfault 1\r\n";
        let s = sections(ch);
        assert_eq!(
            s["uname"],
            Section {
                body: "6.1.0\n".into(),
                rc: None,
                complete: true
            }
        );
        assert_eq!(s["output.0"].rc, Some(3));
        assert_eq!(s["output.0"].body, "{\"a\":1}\n");
        assert!(!s["vmstat.after"].complete);
        assert_eq!(s["vmstat.after"].body, "pgfault 1\n");
    }

    #[test]
    fn panics_and_oopses_are_found() {
        assert_eq!(
            first_fatal_line("[ 0.1] ok\n[ 2.0] Kernel panic - not syncing: VFS\n"),
            Some("[ 2.0] Kernel panic - not syncing: VFS")
        );
        assert!(
            first_fatal_line("[ 1.0] BUG: kernel NULL pointer dereference, address: 0\n").is_some()
        );
        assert!(first_fatal_line("[ 1.0] Run /init as init process\nKBOT-INIT\n").is_none());
    }

    #[test]
    fn boot_time_is_the_last_printk_stamp_before_init() {
        let c = "[    0.000000] Linux version 6.1\n[    1.250000] Run /init as init process\nKBOT-INIT\n[    9.0] later\n";
        assert_eq!(printk_seconds_before(c, INIT_MARKER), Some(1.25));
        assert_eq!(printk_seconds_before(c, "absent"), None);
    }
}
