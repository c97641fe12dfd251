//! The qemu backend's guest: its machine ([`GuestArgs`], `KBOT_GUEST_*`) and
//! how runs in it are measured ([`GuestMeasureArgs`]: the clock, warm-up,
//! interference limits, output bounds). Both are flattened into
//! [`AgentArgs`](super::AgentArgs), apart from the agent's own flags.

use clap::{Args, ValueEnum};

use crate::guest_arch::{parse_page_size, GuestArch};
use crate::monitors::InterferenceLimits;
use crate::qemu::{Clock, DEFAULT_CONSOLE_KEEP_KIB, DEFAULT_RESULTS_MAX_MIB};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClockArg {
    /// `-icount shift=N,sleep=off`: instruction-counted guest time on one
    /// vCPU, the same on every boot.
    Icount,
    /// The exact clock on the tbox group's vCPUs, which QEMU runs in turns
    /// (QEMU 8.1 or later): tasks pinned to different CPUs, each run the same
    /// on every boot.
    IcountSmp,
    /// The host's clock, the tbox group's vCPUs.
    Wall,
}

/// The tbox group's guest machine (qemu backend).
#[derive(Debug, Clone, Args)]
pub struct GuestArgs {
    /// The guest's architecture: its kernel is built for it (cross-compiled
    /// on another host) and booted in qemu-system-ARCH.
    #[arg(
        long,
        env = "KBOT_GUEST_ARCH",
        value_enum,
        default_value = "x86_64",
        global = true
    )]
    pub guest_arch: GuestArch,
    /// The guest kernel's page size, in bytes or as `64K` (default: 4096 on
    /// x86_64, 65536 on aarch64, as the built-in kconfigs build). Reported
    /// in the fingerprint and checked in every booted guest.
    #[arg(long, env = "KBOT_GUEST_PAGE_SIZE", value_parser = parse_page_size, global = true)]
    pub guest_page_size: Option<u64>,
    #[arg(long, env = "KBOT_GUEST_SOCKETS", default_value_t = 1, global = true)]
    pub guest_sockets: u32,
    #[arg(long, env = "KBOT_GUEST_CORES", default_value_t = 2, global = true)]
    pub guest_cores_per_socket: u32,
    #[arg(long, env = "KBOT_GUEST_THREADS", default_value_t = 1, global = true)]
    pub guest_threads_per_core: u32,
    #[arg(
        long,
        env = "KBOT_GUEST_NUMA_NODES",
        default_value_t = 1,
        global = true
    )]
    pub guest_numa_nodes: u32,
    #[arg(
        long,
        env = "KBOT_GUEST_MEMORY_MIB",
        default_value_t = 1024,
        global = true
    )]
    pub guest_memory_mib: u64,
}

/// How the qemu backend measures (see README, "Measuring in QEMU guests").
#[derive(Debug, Clone, Args)]
pub struct GuestMeasureArgs {
    /// The guest's clock: icount (deterministic) or wall.
    #[arg(
        long,
        env = "KBOT_QEMU_CLOCK",
        value_enum,
        default_value = "icount",
        global = true
    )]
    pub qemu_clock: ClockArg,
    /// icount: 2^shift ns of guest time per instruction. 3, not 0: at 1 ns
    /// per instruction a guest spends ~30 s of host time in the kernel's
    /// busy-waited timer calibration at every boot; relative changes read
    /// the same at either (BENCHMARKS.md, the robot scenario).
    #[arg(long, env = "KBOT_QEMU_ICOUNT_SHIFT", default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=10), global = true)]
    pub qemu_icount_shift: u32,
    /// Wall clock: pin each vCPU thread to its own host CPU.
    #[arg(long, env = "KBOT_QEMU_PIN_VCPUS", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub qemu_pin_vcpus: bool,
    /// Executions of each command run and discarded before the measured ones.
    #[arg(
        long,
        env = "KBOT_QEMU_WARMUP_RUNS",
        default_value_t = 0,
        global = true
    )]
    pub qemu_warmup_runs: u32,
    /// Wall clock: a run is redone when other host processes used more than
    /// this percentage of all host CPUs during it.
    #[arg(
        long,
        env = "KBOT_QEMU_MAX_HOST_OTHER_PCT",
        default_value_t = 10.0,
        global = true
    )]
    pub qemu_max_host_other_pct: f64,
    /// Wall clock: ... or the hypervisor stole more than this percentage.
    #[arg(
        long,
        env = "KBOT_QEMU_MAX_STEAL_PCT",
        default_value_t = 5.0,
        global = true
    )]
    pub qemu_max_steal_pct: f64,
    /// Wall clock: ... or tasks stalled on memory (PSI) more than this percentage of the time.
    #[arg(
        long,
        env = "KBOT_QEMU_MAX_MEMORY_STALL_PCT",
        default_value_t = 5.0,
        global = true
    )]
    pub qemu_max_memory_stall_pct: f64,
    /// Wall clock: redo a run measured under interference this many times,
    /// then report an infrastructure failure (the server retries the job).
    #[arg(
        long,
        env = "KBOT_QEMU_INTERFERENCE_RETRIES",
        default_value_t = 2,
        global = true
    )]
    pub qemu_interference_retries: u32,
    /// The guest console kept: its first and its last this many KiB (the
    /// rest is dropped, with a line saying how much).
    #[arg(long, env = "KBOT_QEMU_CONSOLE_KEEP_KIB", default_value_t = DEFAULT_CONSOLE_KEEP_KIB, global = true)]
    pub qemu_console_keep_kib: usize,
    /// The guest's results channel: QEMU is killed past this many MiB, and
    /// the run fails.
    #[arg(long, env = "KBOT_QEMU_RESULTS_MAX_MIB", default_value_t = DEFAULT_RESULTS_MAX_MIB, global = true)]
    pub qemu_results_max_mib: u64,
}

impl GuestMeasureArgs {
    pub fn clock(&self) -> Clock {
        match self.qemu_clock {
            ClockArg::Icount | ClockArg::IcountSmp => Clock::Icount {
                shift: self.qemu_icount_shift,
                smp: self.qemu_clock == ClockArg::IcountSmp,
            },
            ClockArg::Wall => Clock::Wall,
        }
    }

    pub fn interference(&self) -> InterferenceLimits {
        InterferenceLimits {
            max_other: self.qemu_max_host_other_pct / 100.0,
            max_steal: self.qemu_max_steal_pct / 100.0,
            max_memory_stall: self.qemu_max_memory_stall_pct / 100.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::Cli;
    use super::*;

    #[test]
    fn the_qemu_clock_defaults_to_icount_and_wall_is_an_option() -> Result<(), clap::Error> {
        let cli = Cli::try_parse_from(["kbot-agent", "hwinfo"])?;
        assert_eq!(
            cli.agent.measure.clock(),
            Clock::Icount {
                shift: 3,
                smp: false
            }
        );
        assert_eq!(
            cli.agent.measure.clock().describe(),
            "icount shift=3,sleep=off"
        );
        let cli = Cli::try_parse_from([
            "kbot-agent",
            "--qemu-clock",
            "wall",
            "--qemu-max-host-other-pct",
            "25",
            "hwinfo",
        ])?;
        assert_eq!(cli.agent.measure.clock(), Clock::Wall);
        assert_eq!(cli.agent.measure.interference().max_other, 0.25);
        assert!(Cli::try_parse_from(["kbot-agent", "--qemu-clock", "kvmclock"]).is_err());
        Ok(())
    }
}
