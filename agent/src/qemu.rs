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

use kbot_core::api::{FailureKind, JobState, ResultUpload};
use kbot_core::programs::Invocation;

use crate::console::{self, Section, DONE_MARKER, INIT_MARKER};
use crate::error::{AgentError, Result};
use crate::initramfs;
use crate::monitors::{self, Snapshot};
use crate::outcome::{now_ms, Failure, Outcome};
use crate::process::{kill_group, tail, Cancel};
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

/// What the backend needs besides the kernel.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    pub qemu: PathBuf,
    pub topology: Topology,
    /// Static busybox and kbot-bench put into the initramfs.
    pub busybox: PathBuf,
    pub kbot_bench: PathBuf,
    /// `None`: probe KVM and fall back to TCG.
    pub force_accel: Option<Accel>,
    pub boot_timeout: Duration,
    pub run_timeout: Duration,
}

pub struct QemuBackend {
    cfg: QemuConfig,
    accel: OnceLock<(Accel, String)>,
}

/// Progress seen on the console.
enum ConsoleEvent {
    Init,
    Fatal(String),
    Done,
}

impl QemuBackend {
    pub fn new(cfg: QemuConfig) -> QemuBackend {
        QemuBackend {
            cfg,
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
            .get_or_init(|| match self.cfg.force_accel {
                Some(a) => (a, format!("{} (configured)", a.name())),
                None => probe_accel(&self.cfg.qemu, kernel),
            })
            .clone()
    }

    /// Boots `kernel`, runs `plan` inside the guest and returns the result
    /// or the failure. `dir` receives the initramfs, console and results files.
    pub fn run(
        &self,
        kernel: &Path,
        plan: &[Invocation],
        dir: &Path,
        cancel: &Cancel,
        on_state: &dyn Fn(JobState, &str),
    ) -> Result<Outcome> {
        let started_at = now_ms();
        let (accel, accel_note) = self.accel(kernel);
        let initrd = dir.join("initramfs.cpio");
        initramfs::write(
            &initrd,
            &self.cfg.busybox,
            &self.cfg.kbot_bench,
            &initramfs::init_script(plan),
        )?;
        let results = dir.join("results.txt");
        let _ = std::fs::remove_file(&results);
        let mut cmd = self.command(accel, kernel, &initrd, &results)?;
        on_state(
            JobState::Booting,
            &format!("qemu {} {}", accel.name(), process_args(&cmd)),
        );
        let watch = self.watch(&mut cmd, cancel, on_state)?;
        std::fs::write(dir.join("console.log"), &watch.console)
            .map_err(|e| AgentError::io("writing console.log", e))?;
        let channel = std::fs::read_to_string(&results).unwrap_or_default();
        let mut tuning = BTreeMap::new();
        tuning.insert("accel".to_string(), accel_note);
        tuning.insert(
            "cpufreq_governor".to_string(),
            "unavailable (QEMU guest has no cpufreq)".to_string(),
        );
        tuning.insert(
            "pinning".to_string(),
            "inside the guest by kbot-bench placement; vCPU threads not pinned on the host"
                .to_string(),
        );
        Ok(assemble(Assembly {
            plan,
            watch,
            channel: &channel,
            tuning,
            topology: &self.cfg.topology,
            started_at,
        }))
    }

    fn command(
        &self,
        accel: Accel,
        kernel: &Path,
        initrd: &Path,
        results: &Path,
    ) -> Result<Command> {
        let mut cmd = Command::new(&self.cfg.qemu);
        cmd.args([
            "-accel",
            accel.name(),
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
        ]);
        if accel == Accel::Kvm {
            cmd.args(["-cpu", "host"]);
        }
        cmd.args(self.cfg.topology.qemu_args()?);
        cmd.arg("-kernel").arg(kernel).arg("-initrd").arg(initrd);
        // oops=panic and panic=-1: a broken kernel ends the VM at once.
        cmd.args([
            "-append",
            "console=ttyS0 panic=-1 oops=panic softlockup_panic=1 rdinit=/init",
        ]);
        cmd.args(["-serial", "stdio", "-serial"])
            .arg(format!("file:{}", results.display()));
        Ok(cmd)
    }

    /// Runs QEMU until it exits, a deadline passes or the job is cancelled.
    fn watch(
        &self,
        cmd: &mut Command,
        cancel: &Cancel,
        on_state: &dyn Fn(JobState, &str),
    ) -> Result<Watch> {
        use std::os::unix::process::CommandExt;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| AgentError::io("starting qemu", e))?;
        let (tx, rx) = mpsc::channel();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| AgentError::Config("qemu has no stdout".into()))?;
        let reader = std::thread::spawn(move || read_console(stdout, tx));
        let start = Instant::now();
        let mut w = Watch::default();
        let mut deadline = start + self.cfg.boot_timeout;
        loop {
            if cancel.is_cancelled() {
                kill_group(&mut child);
                return Err(AgentError::Cancelled);
            }
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(ConsoleEvent::Init) => {
                    w.init_after = Some(start.elapsed());
                    on_state(JobState::Running, "guest /init started");
                    deadline = Instant::now() + self.cfg.run_timeout;
                }
                // The rest of the trace follows; panic=-1 ends QEMU shortly.
                Ok(ConsoleEvent::Fatal(line)) if w.fatal.is_none() => {
                    w.fatal = Some(line);
                    deadline = deadline.min(Instant::now() + Duration::from_secs(10));
                }
                Ok(ConsoleEvent::Done) => {
                    w.done = true;
                    deadline = Instant::now() + Duration::from_secs(30);
                }
                Ok(ConsoleEvent::Fatal(_)) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if Instant::now() >= deadline {
                w.timed_out = !w.done && w.fatal.is_none();
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
    timed_out: bool,
    wall: Duration,
}

struct Assembly<'a> {
    plan: &'a [Invocation],
    watch: Watch,
    channel: &'a str,
    tuning: BTreeMap<String, String>,
    topology: &'a Topology,
    started_at: i64,
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
            None if w.timed_out => fail(
                FailureKind::BootFailed,
                "no /init within the boot timeout".to_string(),
            ),
            None => fail(
                FailureKind::BootFailed,
                "QEMU ended before /init ran".to_string(),
            ),
        };
    };
    if let Some(line) = &w.fatal {
        return fail(
            FailureKind::Incomplete,
            format!("kernel died during the workload: {line}"),
        );
    }
    if w.timed_out {
        return fail(
            FailureKind::Timeout,
            "the workload ran past the run timeout".to_string(),
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
    let seen = body(&sections, "nproc").trim().to_string();
    tuning.insert(
        "guest_cpus".to_string(),
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
    use std::os::unix::process::CommandExt;
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
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| AgentError::io("starting the probe qemu", e))?;
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

    #[test]
    fn a_failed_execution_is_reported_with_its_stderr() {
        let ch = "@@KBOT-BEGIN output.0.0\n@@KBOT-END output.0.0 rc=2\n@@KBOT-BEGIN stderr.0.0\nbad option -Q\n@@KBOT-END stderr.0.0 rc=0\n";
        let err = executions(&console::sections(ch)).err().unwrap_or_default();
        assert!(err.contains("bad option -Q"), "{err}");
    }
}
