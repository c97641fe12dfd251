//! Command line and `KBOT_*` environment, read once into typed structs.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use kbot_api::agent::BootBackend;

use crate::error::{AgentError, Result};
use crate::guest_arch::{parse_page_size, GuestArch};
use crate::monitors::InterferenceLimits;
use crate::qemu::{
    Accel, Clock, GuestOutput, QemuConfig, QemuVersion, Topology, DEFAULT_CONSOLE_KEEP_KIB,
    DEFAULT_RESULTS_MAX_MIB, ICOUNT_SMP_SINCE,
};
use crate::roles::{parse_roles, Roles};
use crate::sandbox::{self, Limits, SandboxConfig};

#[derive(Debug, Parser)]
#[command(
    name = "kbot-agent",
    version,
    about = "kbot test-machine agent: build, boot and benchmark kernels"
)]
pub struct Cli {
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(subcommand)]
    pub command: Option<CommandKind>,
}

#[derive(Debug, Subcommand)]
pub enum CommandKind {
    /// Enrol once, then lease and run jobs until stopped (the default).
    Daemon,
    /// Print this machine's hardware fingerprint.
    Hwinfo {
        #[arg(long)]
        json: bool,
    },
    /// Run one job locally without a server and print its metrics.
    Run(RunArgs),
    /// Build one kernel here without a server (or take it from the build
    /// cache) and print its image's path: a lab machine's own kernel.
    Build(BuildArgs),
    /// Measure guest noise (qemu backend): boot a built kernel several times,
    /// run one kbot-bench command several times per boot, and print each
    /// execution's KPI as a JSON line (`scripts/guest-noise` makes the table).
    GuestNoise(NoiseArgs),
}

#[derive(Debug, Args)]
pub struct NoiseArgs {
    /// The bzImage to boot.
    #[arg(long)]
    pub kernel: PathBuf,
    #[arg(long, default_value_t = 2)]
    pub boots: u32,
    /// Executions per boot, all reported (none discarded as warm-up).
    #[arg(long, default_value_t = 4)]
    pub runs_per_boot: u32,
    /// The metric to report (e.g. `lmbench3.PIPE.bandwidth.MB/sec`).
    #[arg(long)]
    pub kpi: String,
    /// The metric prefix the command prints with (its `--prefix`).
    #[arg(long)]
    pub prefix: String,
    /// A name for the workload in the output.
    #[arg(long)]
    pub label: String,
    /// Scratch directory for initramfs, console and results files.
    #[arg(long, default_value = "/tmp/kbot-guest-noise")]
    pub dir: PathBuf,
    /// The kbot-bench command line inside the guest (after `--`), without
    /// `--prefix`/`--json`.
    #[arg(last = true, required = true)]
    pub bench_args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The kernel repository (a path or URL git clones).
    #[arg(long)]
    pub repo: String,
    /// The commit to build.
    #[arg(long)]
    pub commit: String,
    /// A kconfig shipped with the agent (`qemu-x86_64-kexec`, ...) or a make
    /// target (`defconfig`).
    #[arg(long)]
    pub kconfig: String,
    #[arg(long, default_value = "gcc-12")]
    pub compiler: String,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// An LKP-style job file (YAML), or a leased job as JSON (as the server sent it).
    pub jobfile: PathBuf,
    /// The kernel repository (qemu/kexec backends with a YAML job file).
    #[arg(long)]
    pub repo: Option<String>,
    /// The commit to build (qemu/kexec backends with a YAML job file).
    #[arg(long)]
    pub commit: Option<String>,
    /// A kconfig fragment file merged on top of `--kconfig-base`.
    #[arg(long)]
    pub kconfig_fragment: Option<PathBuf>,
    #[arg(long, default_value = "tinyconfig")]
    pub kconfig_base: String,
    /// Print the metrics as JSON instead of `name value` lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    Qemu,
    Kexec,
    Host,
}

impl From<BackendArg> for BootBackend {
    fn from(b: BackendArg) -> BootBackend {
        match b {
            BackendArg::Qemu => BootBackend::Qemu,
            BackendArg::Kexec => BootBackend::Kexec,
            BackendArg::Host => BootBackend::Host,
        }
    }
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AccelArg {
    /// Probe KVM once with the first kernel; fall back to TCG.
    Auto,
    Kvm,
    Tcg,
}

#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// Log JSON lines instead of text (the filter is `KBOT_LOG`, as for
    /// the server).
    #[arg(long, env = "KBOT_LOG_JSON", global = true)]
    pub log_json: bool,
    /// The kbot server's base URL.
    #[arg(
        long,
        env = "KBOT_SERVER_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub server: String,
    /// One-time enrolment token (only needed until the agent has enrolled).
    #[arg(
        long,
        env = "KBOT_ENROLLMENT_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub enrollment_token: Option<String>,
    /// Agent name (default: the host name).
    #[arg(long, env = "KBOT_AGENT_NAME", global = true)]
    pub name: Option<String>,
    /// The tbox group: a class of identical machines (default: the name without a trailing `-N`).
    #[arg(long, env = "KBOT_TBOX_GROUP", global = true)]
    pub tbox_group: Option<String>,
    #[arg(
        long,
        env = "KBOT_BACKEND",
        value_enum,
        default_value = "qemu",
        global = true
    )]
    pub backend: BackendArg,
    /// What this machine does: `build` kernels for the lab, `test` them, or
    /// both (`build,test`, the default). A machine that only tests (a board,
    /// a big server) gets only jobs whose kernel a builder made; one that
    /// only builds takes build orders and never a test job.
    #[arg(
        long,
        env = "KBOT_AGENT_ROLES",
        default_value = "build,test",
        value_parser = parse_roles,
        global = true
    )]
    pub roles: Roles,
    /// State, spool, build cache, mirrors and worktrees.
    #[arg(
        long,
        env = "KBOT_WORK_DIR",
        default_value = "/var/lib/kbot-agent",
        global = true
    )]
    pub work_dir: PathBuf,
    /// Bound of the built-kernel cache, in MiB.
    #[arg(
        long,
        env = "KBOT_CACHE_SIZE_MIB",
        default_value_t = 4096,
        global = true
    )]
    pub cache_size_mib: u64,
    /// ccache's directory (default: WORK_DIR/ccache).
    #[arg(long, env = "KBOT_CCACHE_DIR", global = true)]
    pub ccache_dir: Option<PathBuf>,
    /// ccache size bound, as ccache's CCACHE_MAXSIZE.
    #[arg(long, env = "KBOT_CCACHE_SIZE", default_value = "5G", global = true)]
    pub ccache_size: String,
    /// The static kbot-bench binary (put into the guest; run on the host).
    #[arg(long, env = "KBOT_BENCH", default_value = "kbot-bench", global = true)]
    pub kbot_bench: PathBuf,
    /// A static busybox for the guest's /init, of the guest's architecture
    /// (default: /bin/busybox for x86_64, /usr/local/lib/kbot/aarch64/busybox
    /// for aarch64).
    #[arg(long, env = "KBOT_BUSYBOX", global = true)]
    pub busybox: Option<PathBuf>,
    /// A static perf for the guest's kernel profile, of the guest's
    /// architecture (default: /usr/local/lib/kbot/GUEST_ARCH/perf, which
    /// scripts/build-guest-perf installs). When it is not there, guest runs
    /// carry no profile and the agent says so at start.
    #[arg(long, env = "KBOT_GUEST_PERF", global = true)]
    pub guest_perf: Option<PathBuf>,
    /// The guest's stress-ng: a directory holding `bin/stress-ng` and the
    /// shared libraries and dynamic loader it needs under their paths
    /// (default: /usr/local/lib/kbot/GUEST_ARCH/stress-ng, which
    /// scripts/build-guest-stress-ng installs for x86_64). Put into the
    /// initramfs of stress-ng jobs only; without it they fail.
    #[arg(long, env = "KBOT_GUEST_STRESS_NG", global = true)]
    pub guest_stress_ng: Option<PathBuf>,
    /// The QEMU system emulator (default: qemu-system-GUEST_ARCH).
    #[arg(long, env = "KBOT_QEMU", global = true)]
    pub qemu: Option<PathBuf>,
    /// QEMU's `-cpu` under TCG (default: QEMU's qemu64 for x86_64,
    /// cortex-a57 for aarch64; KVM guests get `host`).
    #[arg(long, env = "KBOT_QEMU_CPU", global = true)]
    pub qemu_cpu: Option<String>,
    #[arg(
        long,
        env = "KBOT_ACCEL",
        value_enum,
        default_value = "auto",
        global = true
    )]
    pub accel: AccelArg,
    #[command(flatten)]
    pub guest: GuestArgs,
    #[command(flatten)]
    pub measure: GuestMeasureArgs,
    #[arg(
        long,
        env = "KBOT_BOOT_TIMEOUT_SECS",
        default_value_t = 300,
        global = true
    )]
    pub boot_timeout_secs: u64,
    #[arg(
        long,
        env = "KBOT_RUN_TIMEOUT_SECS",
        default_value_t = 3600,
        global = true
    )]
    pub run_timeout_secs: u64,
    /// `make -j` jobs (default: the number of CPUs).
    #[arg(long, env = "KBOT_MAKE_JOBS", global = true)]
    pub make_jobs: Option<u32>,
    #[command(flatten)]
    pub build_sandbox: BuildSandboxArgs,
    /// Collect perf stat and a perf record profile (host and kexec backends).
    #[arg(long, env = "KBOT_PERF", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub perf: bool,
    /// How long a lease request may wait on the server.
    #[arg(
        long,
        env = "KBOT_LEASE_WAIT_SECS",
        default_value_t = 30,
        global = true
    )]
    pub lease_wait_secs: u32,
}

/// The kernel build's sandbox (see `sandbox.rs` and the README's "Test
/// machines" section).
#[derive(Debug, Clone, Args)]
pub struct BuildSandboxArgs {
    /// The user a root agent builds kernels as (it must exist; a non-root
    /// agent builds as itself).
    #[arg(long, env = "KBOT_BUILD_USER", default_value = sandbox::DEFAULT_BUILD_USER, global = true)]
    pub build_user: String,
    /// CPU seconds of any one process of a build.
    #[arg(long, env = "KBOT_BUILD_CPU_SECS", default_value_t = sandbox::DEFAULT_CPU_SECS, global = true)]
    pub build_cpu_secs: u64,
    /// Address space of any one process of a build, in MiB.
    #[arg(long, env = "KBOT_BUILD_ADDRESS_SPACE_MIB", default_value_t = sandbox::DEFAULT_ADDRESS_SPACE_MIB, global = true)]
    pub build_address_space_mib: u64,
    /// Processes the build user may run at once.
    #[arg(long, env = "KBOT_BUILD_MAX_PROCESSES", default_value_t = sandbox::DEFAULT_MAX_PROCESSES, global = true)]
    pub build_max_processes: u64,
    /// The largest file a build may write (the build log included), in MiB.
    #[arg(long, env = "KBOT_BUILD_MAX_FILE_MIB", default_value_t = sandbox::DEFAULT_MAX_FILE_MIB, global = true)]
    pub build_max_file_mib: u64,
    /// The size of a build's tmpfs /tmp, in MiB.
    #[arg(long, env = "KBOT_BUILD_TMP_MIB", default_value_t = sandbox::DEFAULT_TMP_MIB, global = true)]
    pub build_tmp_mib: u64,
}

impl BuildSandboxArgs {
    pub fn sandbox(&self) -> SandboxConfig {
        SandboxConfig {
            build_user: self.build_user.clone(),
            limits: Limits {
                cpu_secs: self.build_cpu_secs,
                address_space_bytes: self.build_address_space_mib << 20,
                processes: self.build_max_processes,
                file_size_bytes: self.build_max_file_mib << 20,
                tmp_bytes: self.build_tmp_mib << 20,
            },
        }
    }
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

impl AgentArgs {
    pub fn topology(&self) -> Topology {
        let g = &self.guest;
        Topology {
            sockets: g.guest_sockets,
            cores_per_socket: g.guest_cores_per_socket,
            threads_per_core: g.guest_threads_per_core,
            numa_nodes: g.guest_numa_nodes,
            memory_mib: g.guest_memory_mib,
        }
    }

    pub fn force_accel(&self) -> Option<Accel> {
        match self.accel {
            AccelArg::Auto => None,
            AccelArg::Kvm => Some(Accel::Kvm),
            AccelArg::Tcg => Some(Accel::Tcg),
        }
    }

    pub fn guest_arch(&self) -> GuestArch {
        self.guest.guest_arch
    }

    /// The guest kernel's page size the tbox group promises.
    pub fn guest_page_size(&self) -> u64 {
        self.guest
            .guest_page_size
            .unwrap_or_else(|| self.guest_arch().default_page_size())
    }

    /// The QEMU binary: configured, or the guest arch's.
    pub fn qemu_binary(&self) -> PathBuf {
        self.qemu
            .clone()
            .unwrap_or_else(|| PathBuf::from(self.guest_arch().default_qemu()))
    }

    /// The guest's static busybox: configured, or the guest arch's.
    pub fn busybox_binary(&self) -> PathBuf {
        self.busybox
            .clone()
            .unwrap_or_else(|| self.guest_arch().default_busybox().to_path_buf())
    }

    /// The guest's static perf: configured, or the guest arch's.
    pub fn guest_perf_binary(&self) -> PathBuf {
        self.guest_perf
            .clone()
            .unwrap_or_else(|| self.guest_arch().default_perf())
    }

    /// The guest's stress-ng tree: configured, or the guest arch's.
    pub fn guest_stress_ng_dir(&self) -> PathBuf {
        self.guest_stress_ng
            .clone()
            .unwrap_or_else(|| self.guest_arch().default_stress_ng())
    }

    /// QEMU's `-cpu` under TCG: configured, or the guest arch's.
    pub fn tcg_cpu(&self) -> Option<String> {
        self.qemu_cpu
            .clone()
            .or_else(|| self.guest_arch().default_tcg_cpu().map(str::to_string))
    }

    /// The qemu backend's configuration for booting guests: [`Self::qemu_config`]
    /// with the user QEMU runs as (a root agent's build user).
    pub fn qemu_run_config(&self, kbot_bench: PathBuf) -> Result<QemuConfig> {
        let cfg = self.qemu_config(kbot_bench);
        if let Clock::Icount { smp: true, .. } = cfg.clock {
            if !cfg.version.is_some_and(QemuVersion::icount_smp) {
                return Err(AgentError::Config(format!(
                    "KBOT_QEMU_CLOCK=icount-smp needs QEMU {ICOUNT_SMP_SINCE} or later; {} is {}",
                    cfg.qemu.display(),
                    cfg.version
                        .map_or("of an unknown release".to_string(), |v| v.to_string())
                )));
            }
        }
        Ok(QemuConfig {
            run_as: self.build_sandbox.sandbox().user()?,
            ..cfg
        })
    }

    /// The qemu backend's configuration, with `kbot_bench` as the guest's
    /// and QEMU as the agent's user (the fingerprint's view of it).
    pub fn qemu_config(&self, kbot_bench: PathBuf) -> QemuConfig {
        let qemu = self.qemu_binary();
        QemuConfig {
            version: QemuVersion::probe(&qemu),
            qemu,
            arch: self.guest_arch(),
            tcg_cpu: self.tcg_cpu(),
            page_size: self.guest_page_size(),
            topology: self.topology(),
            busybox: self.busybox_binary(),
            perf: Some(self.guest_perf_binary()).filter(|p| p.exists()),
            stress_ng: Some(self.guest_stress_ng_dir())
                .filter(|d| d.join(crate::initramfs::STRESS_NG_BIN).is_file()),
            kbot_bench,
            force_accel: self.force_accel(),
            boot_timeout: self.boot_timeout(),
            run_timeout: self.run_timeout(),
            clock: self.measure.clock(),
            pin_vcpus: self.measure.qemu_pin_vcpus,
            warmup_runs: self.measure.qemu_warmup_runs,
            interference: self.measure.interference(),
            interference_retries: self.measure.qemu_interference_retries,
            output: GuestOutput {
                console_keep_bytes: self.measure.qemu_console_keep_kib << 10,
                results_max_bytes: self.measure.qemu_results_max_mib << 20,
            },
            run_as: None,
        }
    }

    pub fn boot_timeout(&self) -> Duration {
        Duration::from_secs(self.boot_timeout_secs)
    }

    pub fn run_timeout(&self) -> Duration {
        Duration::from_secs(self.run_timeout_secs)
    }

    pub fn agent_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "kbot-agent".into())
        })
    }

    /// LKP's rule: the tbox group is the host name minus a trailing `-N`.
    pub fn tbox_group_name(&self) -> String {
        self.tbox_group
            .clone()
            .unwrap_or_else(|| tbox_group_of(&self.agent_name()))
    }
}

pub fn tbox_group_of(name: &str) -> String {
    match name.rsplit_once('-') {
        Some((group, n))
            if !group.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            group.to_string()
        }
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tbox_group_drops_the_machine_number() {
        assert_eq!(tbox_group_of("lkp-spr-2sp2-3"), "lkp-spr-2sp2");
        assert_eq!(tbox_group_of("vm-qemu"), "vm-qemu");
        assert_eq!(tbox_group_of("box-"), "box-");
    }

    #[test]
    fn flags_and_defaults_parse() -> Result<(), clap::Error> {
        let cli = Cli::try_parse_from([
            "kbot-agent",
            "--backend",
            "host",
            "--guest-numa-nodes",
            "2",
            "run",
            "job.yaml",
            "--commit",
            "abc",
        ])?;
        assert_eq!(cli.agent.backend, BackendArg::Host);
        assert_eq!(cli.agent.topology().numa_nodes, 2);
        assert!(
            matches!(cli.command, Some(CommandKind::Run(ref r)) if r.commit.as_deref() == Some("abc"))
        );
        assert!(Cli::try_parse_from(["kbot-agent", "--backend", "pxe"]).is_err());
        assert_eq!(cli.agent.build_sandbox.sandbox(), SandboxConfig::default());
        Ok(())
    }

    #[test]
    fn roles_default_to_both_and_parse_one_or_both() -> Result<(), clap::Error> {
        let both = Roles {
            build: true,
            test: true,
        };
        assert_eq!(
            Cli::try_parse_from(["kbot-agent", "hwinfo"])?.agent.roles,
            both
        );
        let cli = Cli::try_parse_from(["kbot-agent", "--roles", "test", "hwinfo"])?;
        assert_eq!(
            cli.agent.roles,
            Roles {
                build: false,
                test: true
            }
        );
        let cli = Cli::try_parse_from(["kbot-agent", "--roles", "test, build", "hwinfo"])?;
        assert_eq!(cli.agent.roles, both);
        for bad in ["", "boot", "build,flash"] {
            assert!(Cli::try_parse_from(["kbot-agent", "--roles", bad, "hwinfo"]).is_err());
        }
        Ok(())
    }

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
