//! Running a job in QEMU: [`QemuBackend`] boots the job's kernel with the
//! workload's initramfs, watches QEMU and the host while the guest runs,
//! hands what it saw to `assemble`, and redoes a wall-clock run
//! measured under host interference.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kbot_api::agent::{FailureKind, JobState};
use kbot_core::conditions;
use kbot_core::programs::Invocation;

use super::assemble::{assemble, Assembly, Expected};
use super::command::qemu_command;
use super::config::{Accel, Clock, QemuConfig, Topology};
use super::watch::{read_console, ConsoleEvent, Watch};
use super::{kvm, pin, runas, TAIL_LINES};
use crate::console;
use crate::error::{AgentError, Result};
use crate::initramfs;
use crate::monitors::{self, HostLoad, HostSample};
use crate::outcome::{now_ms, Failure, Outcome};
use crate::process::{self, kill_group, spawn_tied, tail, Cancel};
use kbot_core::guest::{executions, Execution};

pub struct QemuBackend {
    /// Boxed: the backend sits in an enum beside data-less variants.
    cfg: Box<QemuConfig>,
    accel: OnceLock<(Accel, String)>,
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
                (Clock::Wall, None) => {
                    kvm::probe_accel(&self.cfg.qemu, kernel, self.cfg.run_as.as_ref())
                }
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
        let kernel = &runas::kernel(self.cfg.run_as.as_ref(), kernel, dir)?;
        let (accel, accel_note) = self.accel(kernel);
        let attempts = match self.cfg.clock {
            Clock::Wall => 1 + self.cfg.interference_retries,
            Clock::Icount { .. } => 1,
        };
        let mut redone: Vec<String> = Vec::new();
        for attempt in 1..=attempts {
            let boot =
                self.boot_staged(kernel, plan, self.cfg.warmup_runs, dir, cancel, on_state)?;
            let interference = boot
                .host
                .as_ref()
                .and_then(|l| l.interference(&self.cfg.interference));
            let mut tuning = self.tuning(&accel_note);
            tuning.insert(
                conditions::QEMU_ARGV.to_string(),
                self.argv_for_repro(accel)?,
            );
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
                profiled: self.cfg.perf.is_some(),
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

    /// QEMU's arguments for this boot as JSON, the run's own files named
    /// by placeholders: what a reproduction script runs.
    fn argv_for_repro(&self, accel: Accel) -> Result<String> {
        let cmd = qemu_command(
            &self.cfg,
            accel,
            Path::new(conditions::QEMU_KERNEL),
            Path::new(conditions::QEMU_INITRD),
            Path::new(conditions::QEMU_RESULTS),
        )?;
        let mut argv = vec![self.cfg.qemu.display().to_string()];
        argv.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
        Ok(serde_json::to_string(&argv).unwrap_or_default())
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
        let kernel = runas::kernel(self.cfg.run_as.as_ref(), kernel, dir)?;
        self.boot_staged(&kernel, plan, warmup, dir, cancel, on_state)
    }

    /// [`QemuBackend::boot`] of a kernel QEMU's user can open.
    fn boot_staged(
        &self,
        kernel: &Path,
        plan: &[Invocation],
        warmup: u32,
        dir: &Path,
        cancel: &Cancel,
        on_state: &dyn Fn(JobState, &str),
    ) -> Result<BootRecord> {
        let (accel, _) = self.accel(kernel);
        let initrd = dir.join(super::INITRAMFS);
        let bins = initramfs::Binaries {
            busybox: &self.cfg.busybox,
            kbot_bench: &self.cfg.kbot_bench,
            perf: self.cfg.perf.as_deref(),
            stress_ng: initramfs::stress_ng_tree(plan, self.cfg.stress_ng.as_deref())?,
        };
        let results_device = self.cfg.arch.results_device();
        let init = initramfs::init_script(plan, warmup, results_device, bins.perf.is_some());
        initramfs::write(&initrd, &bins, &init)?;
        let results = dir.join("results.txt");
        runas::prepare(self.cfg.run_as.as_ref(), &initrd, &results)?;
        let mut cmd = qemu_command(&self.cfg, accel, kernel, &initrd, &results)?;
        on_state(
            JobState::Booting,
            &format!("qemu {} {}", accel.name(), process::describe(&cmd)),
        );
        let watch = self.watch(&mut cmd, &results, cancel, on_state)?;
        std::fs::write(dir.join("console.log"), &watch.console)
            .map_err(|e| AgentError::io("writing console.log", e))?;
        let channel = process::head_of_file(&results, self.cfg.output.results_max_bytes);
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

    /// Runs QEMU until it exits, a deadline passes or the job is cancelled.
    fn watch(
        &self,
        cmd: &mut Command,
        results: &Path,
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
        let keep = self.cfg.output.console_keep_bytes;
        let reader = std::thread::spawn(move || read_console(stdout, tx, keep));
        let start = Instant::now();
        let pid = child.id();
        let mut w = Watch {
            pinned: pin::pin(&self.cfg, pid),
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
            if let Some(why) = self.results_overflow(results) {
                w.overflow = Some(why);
                kill_group(&mut child);
                break;
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
            let _ = std::io::Read::read_to_string(
                &mut std::io::Read::take(&mut err, STDERR_KEPT),
                &mut text,
            );
            if !text.trim().is_empty() {
                w.console.push_str("\n[qemu stderr]\n");
                w.console.push_str(&text);
            }
        }
        Ok(w)
    }
}

/// QEMU's own stderr kept at most (its messages are short; the rest is
/// not read).
const STDERR_KEPT: u64 = 64 << 10;

impl QemuBackend {
    /// Why the guest must be stopped for what it wrote: its results
    /// channel past the size limit.
    fn results_overflow(&self, results: &Path) -> Option<String> {
        let max = self.cfg.output.results_max_bytes;
        let len = std::fs::metadata(results).map(|m| m.len()).ok()?;
        (len > max).then(|| {
            format!(
                "the guest wrote more than {max} bytes to its results channel \
                 (KBOT_QEMU_RESULTS_MAX_MIB); QEMU was killed"
            )
        })
    }
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::fixtures::{aarch64_config, config};
    use super::*;
    use crate::guest_arch::KERNEL_CMDLINE;

    #[test]
    fn icount_never_probes_kvm_and_records_its_clock() {
        let b = QemuBackend::new(config(Clock::Icount {
            shift: 3,
            smp: false,
        }));
        let (accel, note) = b.accel(Path::new("/nonexistent/bzImage"));
        assert_eq!(accel, Accel::Tcg);
        assert!(note.contains("icount"), "{note}");
        let tuning = b.tuning(&note);
        assert_eq!(tuning["qemu_clock"], "icount shift=3,sleep=off");
        assert_eq!(tuning["guest_cmdline"], KERNEL_CMDLINE);
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
        let icount = interference_note(
            Clock::Icount {
                shift: 0,
                smp: false,
            },
            Some(&load),
            &[],
        );
        assert!(icount.starts_with("not judged"), "{icount}");
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
        let x86 = config(Clock::Icount {
            shift: 3,
            smp: false,
        });
        assert_eq!(x86.cpu_model("AMD EPYC"), "QEMU qemu64 (TCG)");
        let mut kvm = config(Clock::Wall);
        kvm.force_accel = Some(Accel::Kvm);
        assert_eq!(kvm.cpu_model("AMD EPYC"), "AMD EPYC (QEMU KVM -cpu host)");
    }
}
