//! QEMU's command line for one boot of a guest: accelerator and clock, the
//! machine and topology, the kernel, initramfs and command line, and the
//! results channel, and the user it runs as.

use std::path::Path;
use std::process::Command;

use super::config::{Accel, Clock, QemuConfig};
use super::runas;
use crate::error::Result;

/// QEMU's `-sandbox` (seccomp) setting: everything it can deny.
pub(super) const SECCOMP: &str =
    "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny";

/// QEMU's command line for one boot of `kernel` with `initrd`, the guest's
/// results channel (second serial port, or virtio console) written to `results`.
pub(super) fn qemu_command(
    cfg: &QemuConfig,
    accel: Accel,
    kernel: &Path,
    initrd: &Path,
    results: &Path,
) -> Result<Command> {
    let mut cmd = Command::new(&cfg.qemu);
    match cfg.clock {
        // icount runs every vCPU on one TCG thread; a fixed RTC start makes
        // every boot see the same date.
        Clock::Icount { shift, .. } => cmd.args([
            "-accel".to_string(),
            "tcg,thread=single".to_string(),
            "-icount".to_string(),
            format!("shift={shift},sleep=off"),
            "-rtc".to_string(),
            "base=2026-01-01T00:00:00,clock=vm".to_string(),
        ]),
        Clock::Wall => cmd.args(["-accel", accel.name()]),
    };
    if accel == Accel::Kvm && cfg.clock == Clock::Wall {
        cmd.args(["-cpu", "host"]);
    } else if let Some(cpu) = &cfg.tcg_cpu {
        cmd.args(["-cpu", cpu]);
    }
    cmd.args([
        // The guest runs the attacker's kernel: should it escape into QEMU,
        // QEMU's seccomp filter denies it new programs, set*uid, obsolete
        // system calls and the scheduler and resource controls.
        "-sandbox",
        SECCOMP,
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        // Thread names ("CPU 0/TCG") let the agent find the vCPU threads.
        "-name",
        "kbot-guest,debug-threads=on",
    ]);
    cmd.args(cfg.arch.machine_args());
    cmd.args(cfg.guest_topology().qemu_args()?);
    cmd.arg("-kernel").arg(kernel).arg("-initrd").arg(initrd);
    cmd.args(["-append", cfg.arch.kernel_cmdline()]);
    cmd.args(cfg.arch.channel_args(results));
    runas::apply(cfg.run_as.as_ref(), &mut cmd)?;
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::fixtures::{aarch64_config, config, topo};
    use super::super::{Accel, Clock, QemuConfig, QemuVersion, ICOUNT_CPUS};
    use super::{qemu_command, SECCOMP};
    use crate::error::Result;
    use crate::guest_arch::KERNEL_CMDLINE;

    fn command_line(cfg: &QemuConfig, accel: Accel) -> Result<Vec<String>> {
        let cmd = qemu_command(
            cfg,
            accel,
            Path::new("/k/bzImage"),
            Path::new("/r/initramfs.cpio"),
            Path::new("/r/results.txt"),
        )?;
        Ok(cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect())
    }

    /// icount: single-threaded TCG with instruction-counted time that skips
    /// idle, a fixed RTC, one vCPU whatever the tbox group says, the quiet
    /// command line, and the results port.
    #[test]
    fn the_icount_command_line_is_deterministic_tcg_on_one_cpu() -> Result<()> {
        let cfg = config(Clock::Icount {
            shift: 0,
            smp: false,
        });
        let args = command_line(&cfg, Accel::Tcg)?;
        let joined = args.join(" ");
        assert!(
            joined.starts_with("-accel tcg,thread=single -icount shift=0,sleep=off -rtc base=2026-01-01T00:00:00,clock=vm "),
            "{joined}"
        );
        assert!(
            joined.contains("-smp cpus=1,sockets=1,cores=1,threads=1"),
            "{joined}"
        );
        assert!(!joined.contains("-numa"), "{joined}");
        assert!(
            joined.contains(
                "-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"
            ),
            "{joined}"
        );
        assert!(!joined.contains("-cpu host"), "{joined}");
        let append = args
            .iter()
            .position(|a| a == "-append")
            .map(|i| &args[i + 1]);
        assert_eq!(append.map(String::as_str), Some(KERNEL_CMDLINE));
        assert!(
            joined.ends_with("-serial stdio -serial file:/r/results.txt"),
            "{joined}"
        );
        // The fingerprint the server sees matches the guest QEMU gets.
        assert_eq!(cfg.guest_topology().cpus(), ICOUNT_CPUS);
        Ok(())
    }

    /// `icount-smp` on a QEMU that shares the icount budget among vCPUs
    /// gives the exact clock the tbox group's CPUs and NUMA nodes; on one
    /// before it, and plain `icount` anywhere, one CPU.
    #[test]
    fn icount_smp_guests_get_the_tbox_topology_on_a_fair_qemu() -> Result<()> {
        let release = |line: &str| QemuVersion::parse(line);
        let cfg = QemuConfig {
            topology: topo(2, 2),
            version: release("QEMU emulator version 10.0.2"),
            ..config(Clock::Icount {
                shift: 3,
                smp: true,
            })
        };
        let joined = command_line(&cfg, Accel::Tcg)?.join(" ");
        assert!(
            joined.contains("-accel tcg,thread=single -icount shift=3,sleep=off"),
            "{joined}"
        );
        assert!(
            joined.contains("-smp cpus=4,sockets=2,cores=2,threads=1"),
            "{joined}"
        );
        assert!(
            joined.contains("-numa node,nodeid=1,cpus=2-3,memdev=mem1"),
            "{joined}"
        );
        let old = QemuConfig {
            version: release("QEMU emulator version 7.2.22"),
            ..cfg
        };
        let joined = command_line(&old, Accel::Tcg)?.join(" ");
        assert!(
            joined.contains("-smp cpus=1,sockets=1,cores=1,threads=1"),
            "{joined}"
        );
        assert!(!joined.contains("-numa"), "{joined}");
        // Plain `icount` is one vCPU on any QEMU.
        let one = QemuConfig {
            clock: Clock::Icount {
                shift: 3,
                smp: false,
            },
            ..old
        };
        assert_eq!(one.guest_topology().cpus(), ICOUNT_CPUS);
        let joined = command_line(&one, Accel::Tcg)?.join(" ");
        assert!(
            joined.contains("-smp cpus=1,sockets=1,cores=1,threads=1"),
            "{joined}"
        );
        Ok(())
    }

    #[test]
    fn the_wall_clock_command_line_keeps_the_tbox_topology() -> Result<()> {
        let mut cfg = config(Clock::Wall);
        cfg.topology = topo(2, 2);
        let joined = command_line(&cfg, Accel::Kvm)?.join(" ");
        assert!(joined.starts_with("-accel kvm -cpu host "), "{joined}");
        assert!(!joined.contains("-icount"), "{joined}");
        assert!(
            joined.contains("-smp cpus=4,sockets=2,cores=2,threads=1"),
            "{joined}"
        );
        assert!(
            joined.contains("-name kbot-guest,debug-threads=on"),
            "{joined}"
        );
        let tcg = command_line(&config(Clock::Wall), Accel::Tcg)?.join(" ");
        assert!(
            tcg.starts_with(&format!("-accel tcg -sandbox {SECCOMP} -nodefaults")),
            "{tcg}"
        );
        Ok(())
    }

    /// aarch64: the `virt` machine with a 64K-capable CPU under the same
    /// deterministic icount TCG, the console on the PL011 and the results
    /// on a virtio console written to the results file.
    #[test]
    fn the_aarch64_command_line_is_virt_with_a_virtio_results_console() -> Result<()> {
        let cfg = aarch64_config(Clock::Icount {
            shift: 3,
            smp: false,
        });
        let args = command_line(&cfg, Accel::Tcg)?;
        let joined = args.join(" ");
        assert!(
            joined.starts_with(&format!("-accel tcg,thread=single -icount shift=3,sleep=off -rtc base=2026-01-01T00:00:00,clock=vm -cpu cortex-a57 -sandbox {SECCOMP} -nodefaults ")),
            "{joined}"
        );
        assert!(
            joined.contains(
                " -M virt,dtb-randomness=off -global virtio-mmio.ioeventfd=off -m 1024M -smp cpus=1,"
            ),
            "{joined}"
        );
        let append = args
            .iter()
            .position(|a| a == "-append")
            .map(|i| args[i + 1].clone());
        assert_eq!(
            append.as_deref(),
            Some("console=ttyAMA0 panic=-1 oops=panic rdinit=/init nowatchdog audit=0")
        );
        assert!(
            joined.ends_with(
                "-serial stdio -device virtio-serial-device \
                 -chardev file,id=kbot-results,path=/r/results.txt \
                 -device virtconsole,chardev=kbot-results"
            ),
            "{joined}"
        );
        // The wall clock with 2 vCPUs on TCG: the same CPU, the tbox topology.
        let mut wall = aarch64_config(Clock::Wall);
        wall.topology = topo(1, 1);
        let joined = command_line(&wall, Accel::Tcg)?.join(" ");
        assert!(
            joined.starts_with("-accel tcg -cpu cortex-a57 "),
            "{joined}"
        );
        assert!(joined.contains("-smp cpus=2,sockets=1,cores=2"), "{joined}");
        Ok(())
    }
}
