//! Command line and `KBOT_*` environment, read once into typed structs.
//!
//! The guest's flags (`guest`) and the build sandbox's (`build_sandbox`)
//! are submodules; their structs are flattened into [`AgentArgs`].

mod build_sandbox;
mod guest;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use kbot_api::agent::BootBackend;

pub use build_sandbox::BuildSandboxArgs;
pub use guest::{ClockArg, GuestArgs, GuestMeasureArgs};

use crate::error::{AgentError, Result};
use crate::guest_arch::GuestArch;
use crate::qemu::{Accel, Clock, GuestOutput, QemuConfig, QemuVersion, Topology, ICOUNT_SMP_SINCE};
use crate::roles::{parse_roles, Roles};

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
    use crate::sandbox::SandboxConfig;

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
}
