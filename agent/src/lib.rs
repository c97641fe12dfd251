//! kbot-agent: the test-machine daemon of kbot.
//!
//! It enrols with the server once, then leases jobs, builds the job's kernel
//! ([`kernel_build`], cached by [`build_cache`]), gets it running through a
//! boot backend ([`qemu`], [`kexec`], or [`host_backend`] for the running
//! kernel), runs kbot-bench with monitors ([`monitors`], [`perf`]) and host
//! tuning ([`tuning`]), and uploads the outcome through an on-disk
//! [`spool`].

pub mod build_cache;
pub mod build_lock;
pub mod client;
pub mod config;
pub mod console;
pub mod daemon;
pub mod elf;
pub mod elf_notes;
pub mod error;
pub mod guest_noise;
pub mod host_backend;
pub mod hwinfo;
pub mod initramfs;
pub mod job_runner;
pub mod kernel_build;
pub mod kexec;
pub mod local_run;
pub mod monitors;
pub mod outcome;
pub mod perf;
pub mod process;
pub mod qemu;
pub mod spool;
pub mod tuning;
pub mod workload;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kbot_core::api::{BootBackend, Hardware};

pub use crate::error::{AgentError, Result};

use crate::build_cache::BuildCache;
use crate::config::{AgentArgs, Cli, CommandKind};
use crate::host_backend::HostConfig;
use crate::job_runner::{Backend, JobRunner};
use crate::kernel_build::{BuildConfig, Builder};
use crate::qemu::QemuBackend;

/// Runs the command the CLI names.
pub async fn run_cli(cli: Cli) -> Result<()> {
    match cli.command.unwrap_or(CommandKind::Daemon) {
        CommandKind::Hwinfo { json } => {
            let hw = fingerprint(&cli.agent)?;
            if json {
                let text = serde_json::to_string_pretty(&hw)
                    .map_err(|e| AgentError::parse("hardware", e.to_string()))?;
                println!("{text}");
            } else {
                print_hardware(&hw);
            }
            Ok(())
        }
        CommandKind::Run(args) => local_run::run(&cli.agent, &args).await,
        CommandKind::GuestNoise(args) => guest_noise::run(&cli.agent, args).await,
        CommandKind::Daemon => daemon(&cli.agent).await,
    }
}

fn print_hardware(hw: &Hardware) {
    println!("arch: {}", hw.arch);
    println!("cpu_model: {}", hw.cpu_model);
    println!("sockets: {}", hw.sockets);
    println!("cores: {}", hw.cores);
    println!("threads: {}", hw.threads);
    println!("numa_nodes: {}", hw.numa_nodes);
    println!("memory_bytes: {}", hw.memory_bytes);
    println!("page_size: {}", hw.page_size);
    println!("microcode: {}", hw.microcode.as_deref().unwrap_or("-"));
    println!("kernel: {}", hw.kernel);
}

/// The machine the agent tests: the host itself, or for the qemu backend
/// the guest (the tbox group's topology with the host's CPU model), so the
/// server resolves `nr_threads: 50%` against the CPUs the workload sees.
pub fn fingerprint(args: &AgentArgs) -> Result<Hardware> {
    let mut hw = hwinfo::read_host()?;
    if args.backend == config::BackendArg::Qemu {
        let t = qemu::guest_topology(&args.topology(), args.measure.clock());
        hw.sockets = t.sockets;
        hw.cores = t.sockets * t.cores_per_socket;
        hw.threads = t.cpus();
        hw.numa_nodes = t.numa_nodes;
        hw.memory_bytes = t.memory_mib << 20;
        hw.page_size = 4096;
        hw.microcode = None;
    }
    Ok(hw)
}

/// Resolves a binary given by name on PATH (or next to this executable).
pub fn find_binary(p: &Path) -> PathBuf {
    if p.components().count() > 1 || p.is_file() {
        return p.to_path_buf();
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(p)));
    if let Some(b) = beside.filter(|b| b.is_file()) {
        return b;
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(p))
                .find(|c| c.is_file())
        })
        .unwrap_or_else(|| p.to_path_buf())
}

/// Assembles the job runner from the configuration.
pub fn job_runner(args: &AgentArgs) -> Result<JobRunner> {
    let work = &args.work_dir;
    std::fs::create_dir_all(work)
        .map_err(|e| AgentError::io(format!("creating {}", work.display()), e))?;
    let jobs = args.make_jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1)
    });
    std::env::set_var("CCACHE_MAXSIZE", &args.ccache_size);
    let cache = BuildCache::open(&work.join("build-cache"), args.cache_size_mib << 20)?;
    let mut build = BuildConfig::x86_64(work, jobs);
    if let Some(dir) = &args.ccache_dir {
        build.ccache_dir = Some(dir.clone());
    }
    let kbot_bench = find_binary(&args.kbot_bench);
    let backend = match args.backend {
        config::BackendArg::Host => Backend::Host,
        config::BackendArg::Kexec => Backend::Kexec,
        config::BackendArg::Qemu => {
            let arch = elf::qemu_arch(&args.qemu).unwrap_or_else(|| build.arch.clone());
            check_initramfs_binaries(&kbot_bench, &args.busybox, &arch)?;
            Backend::Qemu(QemuBackend::new(args.qemu_config(kbot_bench.clone())))
        }
    };
    Ok(JobRunner {
        backend,
        builder: Builder::new(build, cache),
        host: HostConfig {
            kbot_bench,
            run_timeout: args.run_timeout(),
            perf: args.perf,
        },
        runs_dir: work.join("runs"),
        state_dir: work.to_path_buf(),
    })
}

/// Refuses, at start, a qemu agent whose initramfs binaries cannot run in a
/// `guest_arch` guest: the guest has no dynamic loader, so a dynamically
/// linked kbot-bench or busybox fails every run in /init.
pub fn check_initramfs_binaries(kbot_bench: &Path, busybox: &Path, guest_arch: &str) -> Result<()> {
    elf::require_guest_binary(
        "kbot-bench",
        kbot_bench,
        guest_arch,
        &format!(
            "build a static {guest_arch} one with scripts/build-kbot-bench-static \
             and give its path in --kbot-bench (KBOT_BENCH)"
        ),
    )?;
    elf::require_guest_binary(
        "busybox",
        busybox,
        guest_arch,
        &format!(
            "install a static {guest_arch} busybox (Debian: busybox-static) \
             and give its path in --busybox (KBOT_BUSYBOX)"
        ),
    )?;
    Ok(())
}

async fn daemon(args: &AgentArgs) -> Result<()> {
    let hardware = fingerprint(args)?;
    tracing::info!(machine = %hwinfo::describe(&hardware), backend = ?args.backend, "starting");
    // Before enrolling: a configuration that cannot run jobs is refused
    // without using up the one-time enrolment token.
    let runner = Arc::new(job_runner(args)?);
    let enrolment = daemon::Enrolment {
        identity_file: args.work_dir.join("agent.json"),
        server: args.server.clone(),
        token: args.enrollment_token.clone(),
        name: args.agent_name(),
        tbox_group: args.tbox_group_name(),
        backend: BootBackend::from(args.backend),
        hardware,
        host: match args.backend {
            config::BackendArg::Qemu => Some(hwinfo::read_host()?),
            _ => None,
        },
    };
    std::fs::create_dir_all(&args.work_dir)
        .map_err(|e| AgentError::io(format!("creating {}", args.work_dir.display()), e))?;
    let id = daemon::enrol(&enrolment).await?;
    let d = daemon::Daemon {
        client: client::ApiClient::new(&args.server, Some(id.agent_token))?,
        runner,
        spool: Arc::new(spool::Spool::open(&args.work_dir.join("spool"))?),
        lease_wait_secs: args.lease_wait_secs,
    };
    d.run(None).await
}
