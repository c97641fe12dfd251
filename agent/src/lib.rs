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
pub mod guest_arch;
pub mod guest_noise;
pub mod guest_profile;
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
pub mod roles;
pub mod sandbox;
pub mod shared_build;
pub mod spool;
mod tied;
pub mod tuning;
pub mod workload;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kbot_api::agent::{BootBackend, Hardware};

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
        CommandKind::Build(args) => local_run::build(&cli.agent, args).await,
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
/// the guest, so the server resolves `nr_threads: 50%` against the CPUs the
/// workload sees and matches `arch:` / `need_page_size:` against the guest's.
pub fn fingerprint(args: &AgentArgs) -> Result<Hardware> {
    let host = hwinfo::read_host()?;
    Ok(match args.backend {
        config::BackendArg::Qemu => guest_fingerprint(args, &host),
        _ => host,
    })
}

/// The qemu guest as the fingerprint describes it: the configured guest
/// arch and page size (checked in every booted guest), the guest topology
/// QEMU gets, the CPU QEMU emulates (the host's only under KVM's `-cpu
/// host`), and no kernel release: each job boots the kernel it built.
pub fn guest_fingerprint(args: &AgentArgs, host: &Hardware) -> Hardware {
    let cfg = args.qemu_config(PathBuf::new());
    let t = cfg.guest_topology();
    Hardware {
        arch: cfg.arch.name().to_string(),
        cpu_model: cfg.cpu_model(&host.cpu_model),
        sockets: t.sockets,
        cores: t.sockets * t.cores_per_socket,
        threads: t.cpus(),
        numa_nodes: t.numa_nodes,
        memory_bytes: t.memory_mib << 20,
        page_size: cfg.page_size,
        microcode: None,
        kernel: GUEST_KERNEL.to_string(),
    }
}

/// The `kernel` of a qemu guest's fingerprint.
pub const GUEST_KERNEL: &str = "built per job";

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

/// The kernel builder `args` configure: its build cache, ccache and sandbox.
pub fn builder(args: &AgentArgs) -> Result<Builder> {
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
    let mut build = match args.backend {
        config::BackendArg::Qemu => BuildConfig::for_guest(args.guest_arch(), work, jobs),
        _ => BuildConfig::x86_64(work, jobs),
    };
    if let Some(dir) = &args.ccache_dir {
        build.ccache_dir = Some(dir.clone());
    }
    build.sandbox = args.build_sandbox.sandbox();
    // A qemu machine that only tests needs the sandbox too: QEMU runs in
    // it. A kexec machine that only tests runs nothing of the job's but
    // the kernel it boots.
    let sandboxed = match args.backend {
        config::BackendArg::Qemu => true,
        config::BackendArg::Kexec => args.roles.build,
        config::BackendArg::Host => false,
    };
    if sandboxed {
        if let Some(id) = build.check_sandbox()? {
            tracing::info!(user = %build.sandbox.build_user, uid = id.uid,
                "kernels are built in bubblewrap as the build user");
        }
    }
    Ok(Builder::new(build, cache))
}

/// Assembles the job runner from the configuration.
pub fn job_runner(args: &AgentArgs) -> Result<JobRunner> {
    let work = &args.work_dir;
    let builder = builder(args)?;
    let kbot_bench = find_binary(&args.kbot_bench);
    let backend = match args.backend {
        config::BackendArg::Host => Backend::Host,
        config::BackendArg::Kexec => Backend::Kexec,
        config::BackendArg::Qemu => {
            let arch = args.guest_arch().name();
            let qemu = args.qemu_binary();
            if let Some(emulates) = elf::qemu_arch(&qemu).filter(|q| q != arch) {
                return Err(AgentError::Config(format!(
                    "{} emulates {emulates}, but the guest arch is {arch} (KBOT_GUEST_ARCH): \
                     give qemu-system-{arch} in --qemu (KBOT_QEMU) or leave it unset",
                    qemu.display()
                )));
            }
            check_initramfs_binaries(&kbot_bench, &args.busybox_binary(), arch)?;
            check_guest_perf(&args.guest_perf_binary(), arch)?;
            Backend::Qemu(QemuBackend::new(args.qemu_run_config(kbot_bench.clone())?))
        }
    };
    Ok(JobRunner {
        backend,
        builder,
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
             --arch {guest_arch} and give its path in --kbot-bench (KBOT_BENCH)"
        ),
    )?;
    elf::require_guest_binary(
        "busybox",
        busybox,
        guest_arch,
        &format!(
            "install a static {guest_arch} busybox (Debian: busybox-static, for aarch64 \
             busybox-static:arm64 unpacked to {}; scripts/install-test-deps does both) \
             and give its path in --busybox (KBOT_BUSYBOX)",
            guest_arch::AARCH64_BUSYBOX
        ),
    )?;
    Ok(())
}

/// A guest perf that is there must run in the guest (static, the guest's
/// arch); one that is not there only costs the runs their profile, which
/// the agent says once, at start.
pub fn check_guest_perf(perf: &Path, guest_arch: &str) -> Result<()> {
    if !perf.exists() {
        tracing::warn!(
            perf = %perf.display(),
            "no static guest perf: QEMU runs carry no kernel profile \
             (build one with scripts/build-guest-perf --arch {guest_arch})"
        );
        return Ok(());
    }
    elf::require_guest_binary(
        "perf",
        perf,
        guest_arch,
        &format!(
            "build a static {guest_arch} one with scripts/build-guest-perf --arch {guest_arch} \
             and give its path in --guest-perf (KBOT_GUEST_PERF)"
        ),
    )?;
    Ok(())
}

/// The roles the daemon acts on: a host-backend agent boots no kernel, so
/// it builds none for the lab either.
fn daemon_roles(args: &AgentArgs) -> Result<roles::Roles> {
    let mut roles = args.roles;
    if args.backend == config::BackendArg::Host {
        if !roles.test {
            return Err(AgentError::Config(
                "the host backend builds no kernels: a builder (KBOT_AGENT_ROLES=build) \
                 uses the qemu or kexec backend, whose guest arch it builds for"
                    .into(),
            ));
        }
        roles.build = false;
    }
    Ok(roles)
}

async fn daemon(args: &AgentArgs) -> Result<()> {
    let roles = daemon_roles(args)?;
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
    let d = daemon::Daemon::new(
        client::ApiClient::new(&args.server, Some(id.agent_token))?,
        runner,
        Arc::new(spool::Spool::open(&args.work_dir.join("spool"))?),
        args.lease_wait_secs,
        roles,
    );
    d.run(None).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qemu::QemuVersion;
    use clap::Parser;

    fn args(argv: &[&str]) -> AgentArgs {
        let mut all = vec!["kbot-agent"];
        all.extend_from_slice(argv);
        all.push("hwinfo");
        Cli::try_parse_from(all).expect("flags parse").agent
    }

    /// A qemu agent's `hardware` is its guest: the guest arch, page size,
    /// topology and QEMU's CPU, no host kernel release; the host's facts
    /// stay the host's.
    #[test]
    fn the_qemu_fingerprint_is_the_guest() -> Result<()> {
        let host = hwinfo::read_host()?;
        let arm = guest_fingerprint(
            &args(&["--backend", "qemu", "--guest-arch", "aarch64"]),
            &host,
        );
        assert_eq!(arm.arch, "aarch64");
        assert_eq!(arm.page_size, 65536);
        // The exact clock's one vCPU; `icount-smp`, the tbox group's 2 (the
        // default) on QEMU 8.1 or later (a run_config refuses it before).
        assert_eq!(arm.threads, 1);
        let fair =
            QemuVersion::probe("qemu-system-aarch64".as_ref()).is_some_and(QemuVersion::icount_smp);

        let smp = guest_fingerprint(
            &args(&[
                "--backend",
                "qemu",
                "--guest-arch",
                "aarch64",
                "--qemu-clock",
                "icount-smp",
            ]),
            &host,
        );
        assert_eq!(smp.threads, if fair { 2 } else { 1 });
        assert_eq!(arm.memory_bytes, 1024 << 20);
        assert_eq!(arm.kernel, GUEST_KERNEL);
        assert_eq!(arm.microcode, None);
        if host.arch == "x86_64" {
            assert_eq!(arm.cpu_model, "QEMU cortex-a57 (TCG)");
        }
        let x86 = guest_fingerprint(
            &args(&["--backend", "qemu", "--guest-memory-mib", "512"]),
            &host,
        );
        assert_eq!((x86.arch.as_str(), x86.page_size), ("x86_64", 4096));
        assert_eq!(x86.memory_bytes, 512 << 20);
        assert_eq!(x86.cpu_model, "QEMU qemu64 (TCG)");
        assert_ne!(x86.kernel, host.kernel);
        let big = guest_fingerprint(
            &args(&[
                "--guest-arch",
                "aarch64",
                "--guest-page-size",
                "4K",
                "--qemu-cpu",
                "max",
            ]),
            &host,
        );
        assert_eq!(big.page_size, 4096);
        assert_eq!(big.cpu_model, "QEMU max (TCG)");
        assert_eq!(
            fingerprint(&args(&["--backend", "host"]))?.kernel,
            host.kernel
        );
        Ok(())
    }

    /// The guest arch picks the QEMU binary and busybox unless configured,
    /// and a QEMU of another arch is refused at start.
    #[test]
    fn the_guest_arch_picks_qemu_and_busybox() {
        let a = args(&["--guest-arch", "aarch64"]);
        assert_eq!(a.qemu_binary(), PathBuf::from("qemu-system-aarch64"));
        assert_eq!(
            a.busybox_binary(),
            PathBuf::from(guest_arch::AARCH64_BUSYBOX)
        );
        assert_eq!(a.tcg_cpu().as_deref(), Some("cortex-a57"));
        let x = args(&[]);
        assert_eq!(x.qemu_binary(), PathBuf::from("qemu-system-x86_64"));
        assert_eq!(x.busybox_binary(), PathBuf::from("/bin/busybox"));
        assert_eq!(x.tcg_cpu(), None);
        let dir = tempfile::tempdir().expect("tempdir");
        let wrong = args(&[
            "--backend",
            "qemu",
            "--guest-arch",
            "aarch64",
            "--qemu",
            "qemu-system-x86_64",
            "--work-dir",
            &dir.path().display().to_string(),
        ]);
        let err = job_runner(&wrong)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("emulates x86_64, but the guest arch is aarch64"),
            "{err}"
        );
        assert!(Cli::try_parse_from(["kbot-agent", "--guest-arch", "riscv64", "hwinfo"]).is_err());
        assert!(
            Cli::try_parse_from(["kbot-agent", "--guest-page-size", "5000", "hwinfo"]).is_err()
        );
    }

    /// The agent refuses initramfs binaries of another machine than the
    /// guest's: the x86_64 busybox for an aarch64 guest, and the aarch64
    /// busybox (scripts/install-test-deps installs it) for an x86_64 guest.
    #[test]
    fn initramfs_binaries_must_be_the_guests_machine() {
        let arm_bb = Path::new(guest_arch::AARCH64_BUSYBOX);
        let x86_bb = Path::new("/bin/busybox");
        if !arm_bb.is_file() || !x86_bb.is_file() {
            crate::process::skip_outside_ci(
                "the aarch64 or x86_64 static busybox is missing (scripts/install-test-deps)",
            );
            return;
        }
        let err = check_initramfs_binaries(arm_bb, x86_bb, "aarch64")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("busybox"), "{err}");
        assert!(
            err.contains("built for x86_64, but the guest is aarch64"),
            "{err}"
        );
        let err = check_initramfs_binaries(x86_bb, arm_bb, "x86_64")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("busybox"), "{err}");
        assert!(
            err.contains("built for aarch64, but the guest is x86_64"),
            "{err}"
        );
    }
}
