//! Result assembly: what one boot's guest said (the console as watched, the
//! results channel's sections) becomes the upload, or the failure it shows.
//! The guest's own `uname -m` and page size are checked against the
//! fingerprint here.

use std::collections::BTreeMap;

use kbot_api::agent::{FailureKind, ResultUpload};
use kbot_core::conditions;
use kbot_core::guest::{body, executions};
use kbot_core::programs::Invocation;

use super::config::Topology;
use super::watch::Watch;
use super::TAIL_LINES;
use crate::console::{self, Section, INIT_MARKER};
use crate::guest_profile;
use crate::monitors::{self, Snapshot};
use crate::outcome::{now_ms, Failure, Outcome};
use crate::process::tail;
use crate::workload;

/// What one boot produced, with what the result records beside it.
pub(super) struct Assembly<'a> {
    pub(super) plan: &'a [Invocation],
    pub(super) watch: Watch,
    pub(super) channel: &'a str,
    pub(super) tuning: BTreeMap<String, String>,
    pub(super) topology: &'a Topology,
    pub(super) expect: Expected<'a>,
    pub(super) started_at: i64,
    /// Whether /init profiled an extra execution (the guest had perf).
    pub(super) profiled: bool,
}

/// The machine the agent's fingerprint promises: a guest that runs another
/// architecture or page size (a job's kconfig with 4K pages on the 64K tbox
/// group) must not report under it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Expected<'a> {
    pub(super) arch: &'a str,
    pub(super) page_size: u64,
}

/// The guest's own `uname -m` and page size against what the fingerprint
/// says; `Err` says what differs and where to look.
fn check_guest_machine(
    sections: &BTreeMap<String, Section>,
    expect: Expected,
) -> std::result::Result<(String, u64), String> {
    let machine = body(sections, "machine").trim().to_string();
    let page_text = body(sections, "page_size").trim().to_string();
    let page_size = page_text.parse::<u64>().ok();
    let (Some(page_size), false) = (page_size, machine.is_empty()) else {
        return Err(format!(
            "the guest did not report its architecture and page size \
             (uname -m: {machine:?}, page size: {page_text:?})"
        ));
    };
    if machine != expect.arch || page_size != expect.page_size {
        return Err(format!(
            "the guest runs {machine} with {page_size}-byte pages, but this agent's \
             fingerprint (its tbox group) is {} with {}-byte pages (KBOT_GUEST_ARCH, \
             KBOT_GUEST_PAGE_SIZE): the job's kernel is not one this tbox group measures \
             (its kconfig builds another page size, e.g. not CONFIG_ARM64_64K_PAGES for \
             64K), so its result would report under the wrong fingerprint",
            expect.arch, expect.page_size
        ));
    }
    Ok((machine, page_size))
}

/// Turns what the guest said into a result, or the failure it shows.
pub(super) fn assemble(a: Assembly) -> Outcome {
    let w = &a.watch;
    let console_tail = tail(&w.console, TAIL_LINES);
    let fail = |kind, why: String| {
        Outcome::Failed(Failure::new(
            kind,
            format!("{why}\n--- console tail ---\n{console_tail}"),
        ))
    };
    if let Some(why) = &w.overflow {
        return fail(FailureKind::Incomplete, why.clone());
    }
    let Some(init_after) = w.init_after else {
        return match &w.fatal {
            Some(line) => fail(
                FailureKind::BootFailed,
                format!("kernel died before /init: {line}"),
            ),
            None => match w.timed_out {
                Some(limit) => fail(
                    FailureKind::BootFailed,
                    format!(
                        "timed out after {} s in boot: no /init ran; QEMU was killed",
                        limit.as_secs()
                    ),
                ),
                None => fail(
                    FailureKind::BootFailed,
                    "QEMU ended before /init ran".to_string(),
                ),
            },
        };
    };
    if let Some(line) = &w.fatal {
        return fail(
            FailureKind::Incomplete,
            format!("kernel died during the workload: {line}"),
        );
    }
    if let Some(limit) = w.timed_out {
        return fail(
            FailureKind::Timeout,
            format!(
                "timed out after {} s in the workload; QEMU was killed",
                limit.as_secs()
            ),
        );
    }
    let sections = console::sections(a.channel);
    let runs = match executions(&sections) {
        Ok(runs) if w.done => runs,
        Ok(_) => {
            return fail(
                FailureKind::Incomplete,
                "the guest never finished the workload".to_string(),
            )
        }
        Err(why) => return fail(FailureKind::Incomplete, why),
    };
    let (machine, page_size) = match check_guest_machine(&sections, a.expect) {
        Ok(seen) => seen,
        Err(why) => return fail(FailureKind::Infrastructure, why),
    };
    let mut metrics = match workload::metrics(a.plan, &runs) {
        Ok(m) => m,
        Err(e) => {
            return fail(
                FailureKind::Incomplete,
                format!("unparseable workload output: {e}"),
            )
        }
    };
    let snap = |when: &str| Snapshot::from_files(|f| body(&sections, &format!("{f}.{when}")));
    let uptime = |when: &str| {
        body(&sections, &format!("uptime.{when}"))
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
    };
    let elapsed = match (uptime("before"), uptime("after")) {
        (Some(b), Some(e)) => e - b,
        _ => 0.0,
    };
    metrics.extend(monitors::metrics(&snap("before"), &snap("after"), elapsed));
    let mut tuning = a.tuning;
    let profile = if a.profiled {
        let (profile, note) = guest_profile::from_sections(&sections);
        tuning.insert(guest_profile::TUNING_KEY.to_string(), note);
        profile
    } else {
        None
    };
    if let Some(p) = &profile {
        metrics.extend(guest_profile::metrics(p));
    }
    if let Some(secs) = console::printk_seconds_before(&w.console, INIT_MARKER) {
        metrics.insert("boot-time.boot".to_string(), secs);
    }
    tuning.insert(conditions::GUEST_ARCH.to_string(), machine);
    tuning.insert(
        conditions::GUEST_PAGE_SIZE.to_string(),
        page_size.to_string(),
    );
    let seen = body(&sections, "nproc").trim().to_string();
    if seen.parse::<u32>().is_ok_and(|n| n < a.topology.cpus()) {
        // Recorded as a condition below; said here because it is usually
        // the kernel's configuration, not the machine.
        tracing::warn!(online = %seen, configured = a.topology.cpus(),
            "the guest brought up fewer CPUs than QEMU gave it (a kernel without ACPI \
             finds one CPU per socket in SeaBIOS's MP table)");
    }
    tuning.insert(
        conditions::GUEST_CPUS.to_string(),
        format!("{seen} online of {} configured", a.topology.cpus()),
    );
    tuning.insert(
        "guest_boot_wall_secs".to_string(),
        format!("{:.1}", init_after.as_secs_f64()),
    );
    let raw_output = runs
        .iter()
        .map(|r| r.stdout.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    Outcome::Success(ResultUpload {
        metrics,
        raw_output,
        console: Some(w.console.clone()),
        kconfig: None,
        kernel_release: body(&sections, "uname").trim().to_string(),
        tuning,
        started_at: a.started_at,
        finished_at: now_ms(),
        profile,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::fixtures::topo;
    use super::*;

    #[test]
    fn a_boot_without_init_is_a_boot_failure() {
        let watch = Watch {
            console: "[ 0.5] Kernel panic - not syncing: No working init found\n".into(),
            fatal: Some("Kernel panic - not syncing: No working init found".into()),
            ..Watch::default()
        };
        let out = assemble(Assembly {
            plan: &[],
            watch,
            channel: "",
            tuning: BTreeMap::new(),
            topology: &topo(1, 1),
            expect: X86_4K,
            started_at: 0,
            profiled: false,
        });
        match out {
            Outcome::Failed(f) => {
                assert_eq!(f.kind, FailureKind::BootFailed);
                assert!(f.detail.contains("No working init found"));
            }
            other => panic!("a panic before init must fail the run, got {other:?}"),
        }
    }

    #[test]
    fn an_oops_during_the_workload_makes_it_incomplete() {
        let watch = Watch {
            console: "KBOT-INIT\nOops: 0000 [#1] SMP\n".into(),
            init_after: Some(Duration::from_secs(1)),
            fatal: Some("Oops: 0000 [#1] SMP".into()),
            ..Watch::default()
        };
        let out = assemble(Assembly {
            plan: &[],
            watch,
            channel: "",
            tuning: BTreeMap::new(),
            topology: &topo(1, 1),
            expect: X86_4K,
            started_at: 0,
            profiled: false,
        });
        assert!(matches!(
            out,
            Outcome::Failed(Failure {
                kind: FailureKind::Incomplete,
                ..
            })
        ));
    }

    const X86_4K: Expected = Expected {
        arch: "x86_64",
        page_size: 4096,
    };

    fn finished_watch() -> Watch {
        Watch {
            console: "[ 1.0] Run /init as init process\nKBOT-INIT\nKBOT-DONE\n".into(),
            init_after: Some(Duration::from_secs(1)),
            done: true,
            ..Watch::default()
        }
    }

    fn channel(machine: &str, page_size: &str) -> String {
        format!(
            "@@KBOT-BEGIN uname\r\n6.1.0\r\n@@KBOT-END uname rc=0\r\n\
             @@KBOT-BEGIN machine\r\n{machine}\r\n@@KBOT-END machine rc=0\r\n\
             @@KBOT-BEGIN page_size\r\n{page_size}\r\n@@KBOT-END page_size rc=0\r\n\
             @@KBOT-BEGIN nproc\r\n1\r\n@@KBOT-END nproc rc=0\r\n\
             @@KBOT-BEGIN output.0.0\r\n{{}}\r\n@@KBOT-END output.0.0 rc=0\r\n"
        )
    }

    fn assemble_with(ch: &str, expect: Expected) -> Outcome {
        assemble(Assembly {
            plan: &[],
            watch: finished_watch(),
            channel: ch,
            tuning: BTreeMap::new(),
            topology: &topo(1, 1),
            expect,
            started_at: 0,
            profiled: false,
        })
    }

    /// The guest's own arch and page size become conditions of the result;
    /// a guest that runs 4K pages on the 64K tbox group (or another arch, or
    /// says nothing) fails the run as an infrastructure failure that says
    /// why, instead of reporting under the wrong fingerprint.
    #[test]
    fn the_guest_must_run_the_fingerprinted_arch_and_page_size() {
        let arm64k = Expected {
            arch: "aarch64",
            page_size: 65536,
        };
        match assemble_with(&channel("aarch64", "65536"), arm64k) {
            Outcome::Success(r) => {
                assert_eq!(r.tuning["guest_arch"], "aarch64");
                assert_eq!(r.tuning["guest_page_size"], "65536");
                assert_eq!(r.kernel_release, "6.1.0");
            }
            other => panic!("a 64K aarch64 guest passes, got {other:?}"),
        }
        for (machine, page, why) in [
            ("aarch64", "4096", "aarch64 with 4096-byte pages"),
            ("x86_64", "65536", "x86_64 with 65536-byte pages"),
            ("", "", "did not report its architecture and page size"),
        ] {
            match assemble_with(&channel(machine, page), arm64k) {
                Outcome::Failed(f) => {
                    assert_eq!(f.kind, FailureKind::Infrastructure);
                    assert!(f.detail.contains(why), "{}", f.detail);
                    assert!(
                        f.detail.contains("aarch64 with 65536-byte pages") || machine.is_empty(),
                        "{}",
                        f.detail
                    );
                }
                other => panic!("{machine}/{page} must fail, got {other:?}"),
            }
        }
        assert!(matches!(
            assemble_with(&channel("x86_64", "4096"), X86_4K),
            Outcome::Success(_)
        ));
    }

    #[test]
    fn a_failed_execution_is_reported_with_its_stderr() {
        let ch = "@@KBOT-BEGIN output.0.0\n@@KBOT-END output.0.0 rc=2\n@@KBOT-BEGIN stderr.0.0\nbad option -Q\n@@KBOT-END stderr.0.0 rc=0\n";
        let err = executions(&console::sections(ch)).err().unwrap_or_default();
        assert!(err.contains("bad option -Q"), "{err}");
    }
}
