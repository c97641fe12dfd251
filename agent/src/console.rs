//! What a booted guest says: the kernel console (ttyS0), watched for boot
//! progress and for panics and oopses, and the results channel (ttyS1), a
//! sequence of `@@KBOT-BEGIN <name>` ... `@@KBOT-END <name> [rc=N]` sections
//! written by the initramfs's /init.

/// Printed on the console by /init once userspace runs (boot succeeded).
pub const INIT_MARKER: &str = "KBOT-INIT";
/// Printed on the console by /init when the measured runs start (after the
/// warm-up executions): the host is watched for interference from here.
pub const MEASURE_MARKER: &str = "KBOT-MEASURE";
/// Printed on the console by /init after the last workload.
pub const DONE_MARKER: &str = "KBOT-DONE";
pub use kbot_core::guest::{sections, Section, BEGIN, END};

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
