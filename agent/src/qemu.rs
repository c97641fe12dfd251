//! The `qemu` boot backend: boots a built bzImage with the tbox group's
//! topology and the workload's initramfs, watches the console, and reads the
//! results back from the guest's second serial port.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kbot_api::agent::{FailureKind, JobState, ResultUpload};
use kbot_core::conditions;
use kbot_core::programs::Invocation;

use crate::console::{self, Section, DONE_MARKER, INIT_MARKER, MEASURE_MARKER};
use crate::error::{AgentError, Result};
use crate::guest_arch::GuestArch;
use crate::initramfs;
use crate::monitors::{self, HostLoad, HostSample, InterferenceLimits, Snapshot};
use crate::outcome::{now_ms, Failure, Outcome};
use crate::process::{kill_group, spawn_tied, tail, Cancel};
use crate::workload::{self, Execution};

/// Console lines kept in failure details.
const TAIL_LINES: usize = 40;

/// The guest machine of a tbox group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub numa_nodes: u32,
    pub memory_mib: u64,
}

impl Topology {
    pub fn cpus(&self) -> u32 {
        self.sockets * self.cores_per_socket * self.threads_per_core
    }

    /// QEMU's `-smp`, `-m` and NUMA arguments. NUMA nodes split the sockets
    /// (and memory) evenly; a node count that does not divide the sockets
    /// is a configuration error.
    pub fn qemu_args(&self) -> Result<Vec<String>> {
        if self.cpus() == 0 || self.sockets.checked_rem(self.numa_nodes) != Some(0) {
            return Err(AgentError::Config(format!(
                "guest topology {self:?}: need at least one CPU and NUMA nodes that divide the sockets"
            )));
        }
        let mut args = vec![
            "-m".to_string(),
            format!("{}M", self.memory_mib),
            "-smp".to_string(),
            format!(
                "cpus={},sockets={},cores={},threads={}",
                self.cpus(),
                self.sockets,
                self.cores_per_socket,
                self.threads_per_core
            ),
        ];
        if self.numa_nodes > 1 {
            let per_node_cpus = self.cpus() / self.numa_nodes;
            let per_node_mem = self.memory_mib / u64::from(self.numa_nodes);
            for n in 0..self.numa_nodes {
                let first = n * per_node_cpus;
                args.extend([
                    "-object".to_string(),
                    format!("memory-backend-ram,id=mem{n},size={per_node_mem}M"),
                    "-numa".to_string(),
                    format!(
                        "node,nodeid={n},cpus={first}-{},memdev=mem{n}",
                        first + per_node_cpus - 1
                    ),
                ]);
            }
        }
        Ok(args)
    }
}

/// Where the guest's CPUs come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// How time passes in the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// `-icount shift=N,sleep=off` on single-threaded TCG: every guest
    /// instruction advances the guest's clock by 2^N ns and idle time is
    /// skipped, so what the guest measures is instructions executed, the
    /// same on every boot whatever else the host does.
    Icount { shift: u32 },
    /// The host's clock (multi-threaded TCG, or KVM where it works): the
    /// guest measures host time, with the host's noise.
    Wall,
}

impl Clock {
    /// The `qemu_clock` entry of each result's tuning map: both sides of a
    /// pair must show the same.
    pub fn describe(self) -> String {
        match self {
            Clock::Icount { shift } => format!("icount shift={shift},sleep=off"),
            Clock::Wall => "wall".to_string(),
        }
    }
}

/// The guest kernel's command line. `oops=panic` and `panic=-1`: a broken
/// kernel ends the VM at once. The rest keeps the guest quiet while it
/// measures: `tsc=reliable` stops the clocksource watchdog (a timer every
/// 0.5 s that, under wall-clock TCG, can declare the TSC unstable and switch
/// clocksources in the middle of a run), `nowatchdog` the lockup detectors'
/// per-CPU timers, `audit=0` audit records.
pub const KERNEL_CMDLINE: &str =
    "console=ttyS0 panic=-1 oops=panic rdinit=/init tsc=reliable nowatchdog audit=0";

/// What the backend needs besides the kernel.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    pub qemu: PathBuf,
    /// The guest's architecture (machine, console, results channel).
    pub arch: GuestArch,
    /// QEMU's `-cpu` under TCG (`None`: QEMU's default).
    pub tcg_cpu: Option<String>,
    /// The page size the guest kernel must run with (checked after boot).
    pub page_size: u64,
    pub topology: Topology,
    /// Static busybox and kbot-bench put into the initramfs.
    pub busybox: PathBuf,
    pub kbot_bench: PathBuf,
    /// `None`: probe KVM and fall back to TCG (wall clock only: icount is TCG).
    pub force_accel: Option<Accel>,
    pub boot_timeout: Duration,
    pub run_timeout: Duration,
    pub clock: Clock,
    /// Pin each vCPU thread to its own host CPU (wall clock only).
    pub pin_vcpus: bool,
    /// Executions of each invocation run and discarded before the measured ones.
    pub warmup_runs: u32,
    /// When a wall-clock run counts as measured under host interference.
    pub interference: InterferenceLimits,
    /// Wall clock: how often a run measured under interference is redone
    /// before the job is reported as an infrastructure failure.
    pub interference_retries: u32,
}

impl QemuConfig {
    /// The guest machine QEMU is given (see [`guest_topology`]).
    pub fn guest_topology(&self) -> Topology {
        guest_topology(&self.topology, self.clock)
    }

    /// Why the guest cannot use KVM whatever the configuration says: a
    /// guest of another architecture than the host's.
    fn kvm_impossible(&self) -> Option<String> {
        let host = std::env::consts::ARCH;
        (self.arch.name() != host).then(|| {
            format!(
                "tcg (an {} guest on an {host} host: TCG emulates it)",
                self.arch
            )
        })
    }

    /// The fingerprint's `cpu_model`: the CPU QEMU gives the guest, not the
    /// host's (except under KVM's `-cpu host`, which passes the host's on).
    pub fn cpu_model(&self, host_model: &str) -> String {
        let tcg = format!(
            "QEMU {} (TCG)",
            self.tcg_cpu
                .as_deref()
                .unwrap_or_else(|| self.arch.qemu_default_cpu())
        );
        let kvm = format!("{host_model} (QEMU KVM -cpu host)");
        if matches!(self.clock, Clock::Icount { .. }) || self.kvm_impossible().is_some() {
            return tcg;
        }
        match self.force_accel {
            Some(Accel::Tcg) => tcg,
            Some(Accel::Kvm) => kvm,
            None => format!("{kvm}, or {tcg} where KVM does not boot"),
        }
    }
}

/// vCPUs of an icount guest. QEMU 7.2's x86 SMP guests under `-icount`
/// do not come up (see BENCHMARKS.md, "Guest noise"), so icount guests get
/// one CPU and one NUMA node.
pub const ICOUNT_CPUS: u32 = 1;

/// The topology a guest gets with `clock`: the tbox group's under the wall
/// clock, one CPU under icount.
pub fn guest_topology(topology: &Topology, clock: Clock) -> Topology {
    match clock {
        Clock::Wall => topology.clone(),
        Clock::Icount { .. } => Topology {
            sockets: 1,
            cores_per_socket: ICOUNT_CPUS,
            threads_per_core: 1,
            numa_nodes: 1,
            memory_mib: topology.memory_mib,
        },
    }
}

pub struct QemuBackend {
    /// Boxed: the backend sits in an enum beside data-less variants.
    cfg: Box<QemuConfig>,
    accel: OnceLock<(Accel, String)>,
}

/// Progress seen on the console.
enum ConsoleEvent {
    Init,
    Measure,
    Fatal(String),
    Done,
}

/// One boot of the guest, as the host saw it.
#[derive(Debug)]
pub struct BootRecord {
    watch: Watch,
    /// The results channel (ttyS1) as written.
    pub channel: String,
    /// The host's load from the start of the measured runs to their end.
    pub host: Option<HostLoad>,
}

impl BootRecord {
    pub fn console(&self) -> &str {
        &self.watch.console
    }

    /// Wall time from QEMU's start to its exit.
    pub fn wall(&self) -> Duration {
        self.watch.wall
    }

    /// Each measured execution's stdout in order, or why there is none.
    pub fn executions(&self) -> std::result::Result<Vec<Execution>, String> {
        if self.watch.init_after.is_none() || self.watch.fatal.is_some() || !self.watch.done {
            return Err(format!(
                "the guest did not finish cleanly\n{}",
                tail(&self.watch.console, TAIL_LINES)
            ));
        }
        executions(&console::sections(&self.channel))
    }
}

impl QemuBackend {
    pub fn new(cfg: QemuConfig) -> QemuBackend {
        QemuBackend {
            cfg: Box::new(cfg),
            accel: OnceLock::new(),
        }
    }

    pub fn topology(&self) -> &Topology {
        &self.cfg.topology
    }

    /// The accelerator to use and why, probed once per agent with the
    /// first kernel it boots.
    pub fn accel(&self, kernel: &Path) -> (Accel, String) {
        self.accel
            .get_or_init(|| match (self.cfg.clock, self.cfg.force_accel) {
                _ if self.cfg.kvm_impossible().is_some() => {
                    (Accel::Tcg, self.cfg.kvm_impossible().unwrap_or_default())
                }
                (Clock::Icount { .. }, _) => (
                    Accel::Tcg,
                    "tcg (icount: instruction counting is TCG's)".to_string(),
                ),
                (Clock::Wall, Some(a)) => (a, format!("{} (configured)", a.name())),
                (Clock::Wall, None) => probe_accel(&self.cfg.qemu, kernel),
            })
            .clone()
    }

    pub fn clock(&self) -> Clock {
        self.cfg.clock
    }

    /// Boots `kernel`, runs `plan` inside the guest and returns the result
    /// or the failure. `dir` receives the initramfs, console and results
    /// files. A wall-clock run measured under host interference is redone
    /// (up to `interference_retries` times), never returned as a result.
    pub fn run(
        &self,
        kernel: &Path,
        plan: &[Invocation],
        dir: &Path,
        cancel: &Cancel,
        on_state: &dyn Fn(JobState, &str),
    ) -> Result<Outcome> {
        let started_at = now_ms();
        let (_, accel_note) = self.accel(kernel);
        let attempts = match self.cfg.clock {
            Clock::Wall => 1 + self.cfg.interference_retries,
            Clock::Icount { .. } => 1,
        };
        let mut redone: Vec<String> = Vec::new();
        for attempt in 1..=attempts {
            let boot = self.boot(kernel, plan, self.cfg.warmup_runs, dir, cancel, on_state)?;
            let interference = boot
                .host
                .as_ref()
                .and_then(|l| l.interference(&self.cfg.interference));
            let mut tuning = self.tuning(&accel_note);
            tuning.insert(
                "host_interference".to_string(),
                interference_note(self.cfg.clock, boot.host.as_ref(), &redone),
            );
            tuning.insert("pinning".to_string(), boot.watch.pinned.clone());
            let out = assemble(Assembly {
                plan,
                watch: boot.watch,
                channel: &boot.channel,
                tuning,
                topology: &self.cfg.guest_topology(),
                expect: Expected {
                    arch: self.cfg.arch.name(),
                    page_size: self.cfg.page_size,
                },
                started_at,
            });
            match (out, interference) {
                (Outcome::Success(_), Some(why)) if self.cfg.clock == Clock::Wall => {
                    tracing::warn!(attempt, attempts, %why, "run measured under host interference; redoing it");
                    on_state(
                        JobState::Running,
                        &format!("measured under host interference ({why}); redoing the run"),
                    );
                    redone.push(why);
                }
                (out, _) => return Ok(out),
            }
        }
        Ok(Outcome::Failed(Failure::new(
            FailureKind::Infrastructure,
            format!(
                "all {attempts} wall-clock runs were measured under host interference: {}",
                redone.join(" | ")
            ),
        )))
    }

    /// What the result records about how it was measured.
    fn tuning(&self, accel_note: &str) -> BTreeMap<String, String> {
        let mut tuning = BTreeMap::new();
        tuning.insert(conditions::ACCEL.to_string(), accel_note.to_string());
        tuning.insert(
            conditions::QEMU_CLOCK.to_string(),
            self.cfg.clock.describe(),
        );
        tuning.insert(
            "cpufreq_governor".to_string(),
            "unavailable (QEMU guest has no cpufreq)".to_string(),
        );
        tuning.insert(
            conditions::GUEST_CMDLINE.to_string(),
            self.cfg.arch.kernel_cmdline().to_string(),
        );
        tuning.insert(
            conditions::WARMUP_RUNS.to_string(),
            format!("{} per invocation, discarded", self.cfg.warmup_runs),
        );
        tuning
    }

    /// One boot of `kernel` running `plan` (each invocation after `warmup`
    /// discarded executions), with the host watched during the measured part.
    pub fn boot(
        &self,
        kernel: &Path,
        plan: &[Invocation],
        warmup: u32,
        dir: &Path,
        cancel: &Cancel,
        on_state: &dyn Fn(JobState, &str),
    ) -> Result<BootRecord> {
        let (accel, _) = self.accel(kernel);
        let initrd = dir.join("initramfs.cpio");
        initramfs::write(
            &initrd,
            &self.cfg.busybox,
            &self.cfg.kbot_bench,
            &initramfs::init_script(plan, warmup, self.cfg.arch.results_device()),
        )?;
        let results = dir.join("results.txt");
        let _ = std::fs::remove_file(&results);
        let mut cmd = qemu_command(&self.cfg, accel, kernel, &initrd, &results)?;
        on_state(
            JobState::Booting,
            &format!("qemu {} {}", accel.name(), process_args(&cmd)),
        );
        let watch = self.watch(&mut cmd, cancel, on_state)?;
        std::fs::write(dir.join("console.log"), &watch.console)
            .map_err(|e| AgentError::io("writing console.log", e))?;
        let channel = std::fs::read_to_string(&results).unwrap_or_default();
        let host = match (&watch.host_before, &watch.host_after) {
            (Some(b), Some(a)) => monitors::host_load(b, a),
            _ => None,
        };
        Ok(BootRecord {
            watch,
            channel,
            host,
        })
    }

    /// Pins the vCPU threads of QEMU `pid` (wall clock), or says why not.
    fn pin(&self, pid: u32) -> String {
        match self.cfg.clock {
            Clock::Icount { .. } => {
                "not pinned: under icount the guest's timing does not depend on host placement"
                    .to_string()
            }
            Clock::Wall if !self.cfg.pin_vcpus => "not pinned (configured)".to_string(),
            Clock::Wall => match pin_vcpu_threads(pid, self.cfg.topology.cpus()) {
                Ok(note) => note,
                Err(e) => {
                    tracing::warn!(error = %e, "could not pin the vCPU threads");
                    format!("not pinned: {e}")
                }
            },
        }
    }

    /// Runs QEMU until it exits, a deadline passes or the job is cancelled.
    fn watch(
        &self,
        cmd: &mut Command,
        cancel: &Cancel,
        on_state: &dyn Fn(JobState, &str),
    ) -> Result<Watch> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = spawn_tied(cmd)?;
        let (tx, rx) = mpsc::channel();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| AgentError::Config("qemu has no stdout".into()))?;
        let reader = std::thread::spawn(move || read_console(stdout, tx));
        let start = Instant::now();
        let pid = child.id();
        let mut w = Watch {
            pinned: self.pin(pid),
            ..Watch::default()
        };
        let sample = || {
            let at = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
            HostSample::read(pid, at)
        };
        let mut deadline = start + self.cfg.boot_timeout;
        loop {
            if cancel.is_cancelled() {
                kill_group(&mut child);
                return Err(AgentError::Cancelled);
            }
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(ConsoleEvent::Init) => {
                    w.init_after = Some(start.elapsed());
                    w.host_before = Some(sample());
                    on_state(JobState::Running, "guest /init started");
                    deadline = Instant::now() + self.cfg.run_timeout;
                }
                Ok(ConsoleEvent::Measure) => w.host_before = Some(sample()),
                // The rest of the trace follows; panic=-1 ends QEMU shortly.
                Ok(ConsoleEvent::Fatal(line)) if w.fatal.is_none() => {
                    w.fatal = Some(line);
                    deadline = deadline.min(Instant::now() + Duration::from_secs(10));
                }
                Ok(ConsoleEvent::Done) => {
                    w.done = true;
                    w.host_after = Some(sample());
                    deadline = Instant::now() + Duration::from_secs(30);
                }
                Ok(ConsoleEvent::Fatal(_)) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if Instant::now() >= deadline {
                let limit = match w.init_after {
                    None => self.cfg.boot_timeout,
                    Some(_) => self.cfg.run_timeout,
                };
                w.timed_out = (!w.done && w.fatal.is_none()).then_some(limit);
                kill_group(&mut child);
                break;
            }
        }
        let _ = child.wait();
        w.wall = start.elapsed();
        w.console = reader.join().unwrap_or_default();
        if let Some(mut err) = child.stderr.take() {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut text);
            if !text.trim().is_empty() {
                w.console.push_str("\n[qemu stderr]\n");
                w.console.push_str(&text);
            }
        }
        Ok(w)
    }
}

fn process_args(cmd: &Command) -> String {
    crate::process::describe(cmd)
}

/// QEMU's command line for one boot of `kernel` with `initrd`, the guest's
/// results channel (second serial port, or virtio console) written to `results`.
fn qemu_command(
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
        Clock::Icount { shift } => cmd.args([
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
    Ok(cmd)
}

/// The `host_interference` entry of a result's tuning map.
fn interference_note(clock: Clock, load: Option<&HostLoad>, redone: &[String]) -> String {
    let seen = load.map_or_else(
        || "host load not measured (no /proc samples)".to_string(),
        HostLoad::describe,
    );
    let mut note = match clock {
        Clock::Icount { .. } => format!(
            "not judged: under icount the guest's clock counts instructions, not host time ({seen})"
        ),
        Clock::Wall => format!("none: {seen}"),
    };
    if !redone.is_empty() {
        note.push_str(&format!(
            "; {} earlier run(s) redone: {}",
            redone.len(),
            redone.join(" | ")
        ));
    }
    note
}

/// vCPU index of a QEMU thread name (`CPU 1/TCG`, `CPU 0/KVM`).
fn vcpu_index(comm: &str) -> Option<u32> {
    comm.trim()
        .strip_prefix("CPU ")?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// Which host CPU each vCPU thread goes to: vCPU n on the n-th CPU the
/// agent may use, wrapping when the guest has more vCPUs than that.
fn vcpu_pins(threads: &[(i32, String)], host_cpus: &[usize]) -> Vec<(i32, u32, usize)> {
    if host_cpus.is_empty() {
        return Vec::new();
    }
    let mut pins: Vec<(i32, u32, usize)> = threads
        .iter()
        .filter_map(|(tid, comm)| {
            let n = vcpu_index(comm)?;
            Some((*tid, n, host_cpus[n as usize % host_cpus.len()]))
        })
        .collect();
    pins.sort_by_key(|p| p.1);
    pins
}

/// The threads of process `pid` with their names.
fn threads_of(pid: u32) -> Vec<(i32, String)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let tid = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            Some((tid, comm.trim().to_string()))
        })
        .collect()
}

/// Pins the `vcpus` vCPU threads of QEMU `pid` to host CPUs (waiting up to
/// 5 s for QEMU to create them) and says where they went.
fn pin_vcpu_threads(pid: u32, vcpus: u32) -> Result<String> {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let allowed = sched_getaffinity(Pid::from_raw(0))
        .map_err(|e| AgentError::Config(format!("sched_getaffinity: {e}")))?;
    let host_cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    let pins = loop {
        let pins = vcpu_pins(&threads_of(pid), &host_cpus);
        if pins.len() >= vcpus as usize || Instant::now() >= deadline {
            break pins;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if pins.is_empty() {
        return Err(AgentError::Config(format!(
            "no vCPU threads (`CPU n/...`) found in QEMU process {pid}"
        )));
    }
    let mut placed = Vec::new();
    for (tid, vcpu, cpu) in pins {
        let mut set = CpuSet::new();
        set.set(cpu)
            .map_err(|e| AgentError::Config(format!("CPU {cpu}: {e}")))?;
        sched_setaffinity(Pid::from_raw(tid), &set)
            .map_err(|e| AgentError::Config(format!("pinning vCPU {vcpu}: {e}")))?;
        placed.push(format!("vCPU {vcpu} -> host CPU {cpu}"));
    }
    Ok(format!("vCPU threads pinned: {}", placed.join(", ")))
}

/// Reads the console, forwarding progress; returns the whole text.
fn read_console(stdout: impl std::io::Read, tx: mpsc::Sender<ConsoleEvent>) -> String {
    let mut all = String::new();
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    while matches!(reader.read_until(b'\n', &mut buf), Ok(n) if n > 0) {
        let line = String::from_utf8_lossy(&buf).replace('\r', "");
        buf.clear();
        let trimmed = line.trim_end();
        let event = if trimmed == INIT_MARKER {
            Some(ConsoleEvent::Init)
        } else if trimmed == MEASURE_MARKER {
            Some(ConsoleEvent::Measure)
        } else if trimmed == DONE_MARKER {
            Some(ConsoleEvent::Done)
        } else {
            console::first_fatal_line(trimmed).map(|l| ConsoleEvent::Fatal(l.to_string()))
        };
        all.push_str(&line);
        if let Some(e) = event {
            let _ = tx.send(e);
        }
    }
    all
}

/// What watching one boot saw.
#[derive(Debug, Default)]
struct Watch {
    console: String,
    init_after: Option<Duration>,
    fatal: Option<String>,
    done: bool,
    /// The limit that passed, when the guest hung (QEMU was killed then).
    timed_out: Option<Duration>,
    wall: Duration,
    /// The host at the start and the end of the measured runs.
    host_before: Option<HostSample>,
    host_after: Option<HostSample>,
    /// Where the vCPU threads ran.
    pinned: String,
}

struct Assembly<'a> {
    plan: &'a [Invocation],
    watch: Watch,
    channel: &'a str,
    tuning: BTreeMap<String, String>,
    topology: &'a Topology,
    expect: Expected<'a>,
    started_at: i64,
}

/// The machine the agent's fingerprint promises: a guest that runs another
/// architecture or page size (a job's kconfig with 4K pages on the 64K tbox
/// group) must not report under it.
#[derive(Debug, Clone, Copy)]
struct Expected<'a> {
    arch: &'a str,
    page_size: u64,
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
fn assemble(a: Assembly) -> Outcome {
    let w = &a.watch;
    let console_tail = tail(&w.console, TAIL_LINES);
    let fail = |kind, why: String| {
        Outcome::Failed(Failure::new(
            kind,
            format!("{why}\n--- console tail ---\n{console_tail}"),
        ))
    };
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
    let snap = |when: &str| Snapshot {
        vmstat: body(&sections, &format!("vmstat.{when}")),
        stat: body(&sections, &format!("stat.{when}")),
        interrupts: body(&sections, &format!("interrupts.{when}")),
    };
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
    if let Some(secs) = console::printk_seconds_before(&w.console, INIT_MARKER) {
        metrics.insert("boot-time.boot".to_string(), secs);
    }
    let mut tuning = a.tuning;
    tuning.insert(conditions::GUEST_ARCH.to_string(), machine);
    tuning.insert(
        conditions::GUEST_PAGE_SIZE.to_string(),
        page_size.to_string(),
    );
    let seen = body(&sections, "nproc").trim().to_string();
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
    })
}

fn body(sections: &BTreeMap<String, Section>, name: &str) -> String {
    sections
        .get(name)
        .map(|s| s.body.clone())
        .unwrap_or_default()
}

/// The `output.<i>.<n>` sections in order; a failed or cut-short execution
/// makes the run incomplete (with its stderr).
fn executions(sections: &BTreeMap<String, Section>) -> std::result::Result<Vec<Execution>, String> {
    let mut runs = Vec::new();
    for (name, s) in sections {
        let Some(rest) = name.strip_prefix("output.") else {
            continue;
        };
        let invocation = rest
            .split('.')
            .next()
            .and_then(|i| i.parse().ok())
            .unwrap_or(usize::MAX);
        if !s.complete || s.rc != Some(0) {
            let stderr = body(sections, &format!("stderr.{rest}"));
            return Err(format!(
                "{name} exited with {:?}: {}",
                s.rc,
                tail(&stderr, 20)
            ));
        }
        runs.push((
            invocation,
            rest.to_string(),
            Execution {
                invocation,
                stdout: s.body.clone(),
            },
        ));
    }
    if runs.is_empty() {
        return Err("the guest produced no workload output".to_string());
    }
    runs.sort_by_key(|r| (r.0, run_number(&r.1)));
    Ok(runs.into_iter().map(|(_, _, e)| e).collect())
}

fn run_number(rest: &str) -> u64 {
    rest.rsplit('.')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Seconds a KVM probe guest gets to print its first console line.
const PROBE_SECS: u64 = 15;

/// Boots `kernel` under KVM with early printk: on machines where /dev/kvm
/// opens but guests hang (before any output, even in long-mode setup), no
/// `Linux version` line appears and TCG is used instead.
fn probe_accel(qemu: &Path, kernel: &Path) -> (Accel, String) {
    if std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_err()
    {
        return (Accel::Tcg, "tcg (/dev/kvm is not usable)".to_string());
    }
    match kvm_boots(qemu, kernel) {
        Ok(true) => (
            Accel::Kvm,
            "kvm (probe boot printed its banner)".to_string(),
        ),
        Ok(false) => (
            Accel::Tcg,
            format!("tcg (/dev/kvm opens but a KVM guest printed nothing within {PROBE_SECS} s)"),
        ),
        Err(e) => (Accel::Tcg, format!("tcg (KVM probe failed: {e})")),
    }
}

fn kvm_boots(qemu: &Path, kernel: &Path) -> Result<bool> {
    let mut cmd = Command::new(qemu);
    cmd.args([
        "-accel",
        "kvm",
        "-cpu",
        "host",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
    ])
    .args([
        "-m",
        "256M",
        "-serial",
        "stdio",
        "-append",
        "console=ttyS0 earlyprintk=serial panic=-1",
    ])
    .arg("-kernel")
    .arg(kernel);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = spawn_tied(&mut cmd)?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| AgentError::Config("qemu has no stdout".into()))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if line.contains("Linux version") {
                let _ = tx.send(());
                return;
            }
        }
    });
    let seen = rx.recv_timeout(Duration::from_secs(PROBE_SECS)).is_ok();
    kill_group(&mut child);
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(sockets: u32, numa: u32) -> Topology {
        Topology {
            sockets,
            cores_per_socket: 2,
            threads_per_core: 1,
            numa_nodes: numa,
            memory_mib: 1024,
        }
    }

    #[test]
    fn topology_becomes_smp_and_numa_arguments() -> Result<()> {
        let args = topo(2, 2).qemu_args()?.join(" ");
        assert!(
            args.contains("-smp cpus=4,sockets=2,cores=2,threads=1"),
            "{args}"
        );
        assert!(
            args.contains("memory-backend-ram,id=mem1,size=512M"),
            "{args}"
        );
        assert!(
            args.contains("node,nodeid=1,cpus=2-3,memdev=mem1"),
            "{args}"
        );
        assert!(topo(3, 2).qemu_args().is_err());
        Ok(())
    }

    fn config(clock: Clock) -> QemuConfig {
        QemuConfig {
            qemu: PathBuf::from("qemu-system-x86_64"),
            arch: GuestArch::X86_64,
            tcg_cpu: None,
            page_size: 4096,
            topology: topo(1, 1),
            busybox: PathBuf::from("/bin/busybox"),
            kbot_bench: PathBuf::from("kbot-bench"),
            force_accel: None,
            boot_timeout: Duration::from_secs(60),
            run_timeout: Duration::from_secs(60),
            clock,
            pin_vcpus: true,
            warmup_runs: 0,
            interference: InterferenceLimits::default(),
            interference_retries: 2,
        }
    }

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
        let cfg = config(Clock::Icount { shift: 0 });
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
        assert!(tcg.starts_with("-accel tcg -nodefaults"), "{tcg}");
        Ok(())
    }

    #[test]
    fn icount_never_probes_kvm_and_records_its_clock() {
        let b = QemuBackend::new(config(Clock::Icount { shift: 3 }));
        let (accel, note) = b.accel(Path::new("/nonexistent/bzImage"));
        assert_eq!(accel, Accel::Tcg);
        assert!(note.contains("icount"), "{note}");
        let tuning = b.tuning(&note);
        assert_eq!(tuning["qemu_clock"], "icount shift=3,sleep=off");
        assert_eq!(tuning["guest_cmdline"], KERNEL_CMDLINE);
    }

    #[test]
    fn vcpu_threads_go_to_their_own_host_cpus() {
        let threads = vec![
            (100, "qemu-system-x86".to_string()),
            (103, "CPU 1/TCG".to_string()),
            (101, "CPU 0/TCG".to_string()),
            (104, "CPU 2/KVM".to_string()),
            (102, "worker".to_string()),
        ];
        assert_eq!(
            vcpu_pins(&threads, &[2, 5]),
            vec![(101, 0, 2), (103, 1, 5), (104, 2, 2)]
        );
        assert!(vcpu_pins(&threads, &[]).is_empty());
        assert_eq!(vcpu_index("ALL CPUs/TCG"), None);
    }

    #[test]
    fn the_interference_note_says_what_was_judged() {
        let load = HostLoad {
            host_cpus: 2,
            other: 0.4,
            steal: 0.0,
            guest: 0.5,
            memory_stall: None,
            seconds: 30.0,
        };
        let wall = interference_note(Clock::Wall, Some(&load), &["steal 9%".to_string()]);
        assert!(wall.starts_with("none: over 30 s"), "{wall}");
        assert!(wall.contains("other processes 40%"), "{wall}");
        assert!(
            wall.ends_with("1 earlier run(s) redone: steal 9%"),
            "{wall}"
        );
        let icount = interference_note(Clock::Icount { shift: 0 }, Some(&load), &[]);
        assert!(icount.starts_with("not judged"), "{icount}");
    }

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

    fn aarch64_config(clock: Clock) -> QemuConfig {
        QemuConfig {
            qemu: PathBuf::from("qemu-system-aarch64"),
            arch: GuestArch::Aarch64,
            tcg_cpu: Some("cortex-a57".into()),
            page_size: 65536,
            ..config(clock)
        }
    }

    /// aarch64: the `virt` machine with a 64K-capable CPU under the same
    /// deterministic icount TCG, the console on the PL011 and the results
    /// on a virtio console written to the results file.
    #[test]
    fn the_aarch64_command_line_is_virt_with_a_virtio_results_console() -> Result<()> {
        let cfg = aarch64_config(Clock::Icount { shift: 3 });
        let args = command_line(&cfg, Accel::Tcg)?;
        let joined = args.join(" ");
        assert!(
            joined.starts_with("-accel tcg,thread=single -icount shift=3,sleep=off -rtc base=2026-01-01T00:00:00,clock=vm -cpu cortex-a57 -nodefaults "),
            "{joined}"
        );
        assert!(
            joined.contains(" -M virt -m 1024M -smp cpus=1,"),
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

    /// An aarch64 guest on an x86_64 host is TCG whatever the clock or the
    /// configured accelerator: there is no KVM probe, and the fingerprint's
    /// CPU is QEMU's, not the host's.
    #[test]
    fn a_foreign_guest_is_tcg_and_names_the_qemu_cpu() {
        if std::env::consts::ARCH != "x86_64" {
            return;
        }
        let mut cfg = aarch64_config(Clock::Wall);
        cfg.force_accel = Some(Accel::Kvm);
        assert_eq!(cfg.cpu_model("AMD EPYC"), "QEMU cortex-a57 (TCG)");
        let b = QemuBackend::new(cfg);
        let (accel, note) = b.accel(Path::new("/nonexistent/Image"));
        assert_eq!(accel, Accel::Tcg);
        assert!(note.contains("aarch64 guest on an x86_64 host"), "{note}");
        let tuning = b.tuning(&note);
        assert!(tuning["guest_cmdline"].starts_with("console=ttyAMA0"));
        let x86 = config(Clock::Icount { shift: 3 });
        assert_eq!(x86.cpu_model("AMD EPYC"), "QEMU qemu64 (TCG)");
        let mut kvm = config(Clock::Wall);
        kvm.force_accel = Some(Accel::Kvm);
        assert_eq!(kvm.cpu_model("AMD EPYC"), "AMD EPYC (QEMU KVM -cpu host)");
    }

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
