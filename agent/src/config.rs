//! Command line and `KBOT_*` environment, read once into typed structs.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use kbot_core::api::BootBackend;

use crate::qemu::{Accel, Topology};

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
    /// ccache's directory (default: <work dir>/ccache).
    #[arg(long, env = "KBOT_CCACHE_DIR", global = true)]
    pub ccache_dir: Option<PathBuf>,
    /// ccache size bound, as ccache's CCACHE_MAXSIZE.
    #[arg(long, env = "KBOT_CCACHE_SIZE", default_value = "5G", global = true)]
    pub ccache_size: String,
    /// The static kbot-bench binary (put into the guest; run on the host).
    #[arg(long, env = "KBOT_BENCH", default_value = "kbot-bench", global = true)]
    pub kbot_bench: PathBuf,
    /// A static busybox for the guest's /init.
    #[arg(
        long,
        env = "KBOT_BUSYBOX",
        default_value = "/bin/busybox",
        global = true
    )]
    pub busybox: PathBuf,
    #[arg(
        long,
        env = "KBOT_QEMU",
        default_value = "qemu-system-x86_64",
        global = true
    )]
    pub qemu: PathBuf,
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

/// The tbox group's guest machine (qemu backend).
#[derive(Debug, Clone, Args)]
pub struct GuestArgs {
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
        Ok(())
    }
}
