//! The `host` backend: runs the workload on the running kernel as it is,
//! with host tuning, monitors, and perf when available. The kexec backend
//! uses it too once the built kernel is running.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kbot_api::agent::{FailureKind, ResultUpload};
use kbot_core::parsers::perf_stat;
use kbot_core::programs::{Invocation, Repeat};

use crate::error::{AgentError, Result};
use crate::monitors::{self, Snapshot};
use crate::outcome::{now_ms, Failure, Outcome};
use crate::perf;
use crate::process::{spawn_tied, supervise, tail, Cancel, Finished};
use crate::tuning::Tuning;
use crate::workload::{self, Execution};

#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The kbot-bench binary run for `kbot-bench` invocations.
    pub kbot_bench: PathBuf,
    pub run_timeout: Duration,
    /// Collect perf stat and a perf record profile when perf is installed.
    pub perf: bool,
}

/// Runs `plan` here; `governor` is the job's `cpufreq_governor`.
pub fn run(
    cfg: &HostConfig,
    plan: &[Invocation],
    governor: &str,
    dir: &Path,
    cancel: &Cancel,
) -> Result<Outcome> {
    let started_at = now_ms();
    let tuning = Tuning::apply(Path::new("/sys/devices/system/cpu"), governor);
    let use_perf = cfg.perf && perf::available();
    let before = Snapshot::read_host();
    let t0 = Instant::now();
    let mut runs = Vec::new();
    // perf stat's event counts, summed over the executions, and the time
    // they were counted for.
    let mut perf_counts: BTreeMap<String, f64> = BTreeMap::new();
    let mut perf_seconds = 0.0;
    for (i, inv) in plan.iter().enumerate() {
        let first = Instant::now();
        let mut n = 0u32;
        loop {
            let stat_file = dir.join(format!("perf-stat.{i}.{n}.csv"));
            let mut argv = if use_perf {
                perf::stat_prefix(&stat_file)
            } else {
                Vec::new()
            };
            argv.extend(argv_of(cfg, inv));
            let started = Instant::now();
            let executed = execute(&argv, cfg.run_timeout, cancel)?.map(|(out, err)| {
                if inv.output_includes_stderr() {
                    out + &err
                } else {
                    out
                }
            });
            perf_seconds += started.elapsed().as_secs_f64();
            match executed {
                Ok(stdout) => runs.push(Execution {
                    invocation: i,
                    stdout,
                }),
                Err(failure) => return Ok(Outcome::Failed(failure)),
            }
            if use_perf {
                let text = std::fs::read_to_string(&stat_file).unwrap_or_default();
                for (k, v) in perf::parse_stat_csv(&text) {
                    *perf_counts.entry(k).or_default() += v;
                }
            }
            n += 1;
            let again = match inv.repeat {
                Repeat::Times(t) => n < t,
                Repeat::ForSeconds(s) => first.elapsed() < Duration::from_secs(s),
            };
            if !again {
                break;
            }
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let after = Snapshot::read_host();
    let mut metrics = match workload::metrics(plan, &runs) {
        Ok(m) => m,
        Err(e) => {
            return Ok(Outcome::Failed(Failure::new(
                FailureKind::Incomplete,
                format!("unparseable workload output: {e}"),
            )))
        }
    };
    metrics.extend(monitors::metrics(&before, &after, elapsed));
    if use_perf {
        metrics.extend(perf::stat_metrics(&perf_counts, perf_seconds));
        perf_stat::add_path_length(&mut metrics);
    }
    let mut notes = tuning.notes.clone();
    notes.insert(
        "pinning".into(),
        "by kbot-bench placement (see its placement output)".into(),
    );
    notes.insert(
        "perf".into(),
        if use_perf {
            "perf stat per execution; one extra perf record -g execution".into()
        } else {
            "unavailable (perf not installed or disabled)".into()
        },
    );
    drop(tuning);
    if use_perf {
        if let Some(first) = plan.first() {
            metrics.extend(
                perf::profile(&argv_of(cfg, first), &dir.join("perf.data")).unwrap_or_default(),
            );
        }
    }
    let kernel_release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    Ok(Outcome::Success(ResultUpload {
        metrics,
        raw_output: runs
            .iter()
            .map(|r| r.stdout.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        console: None,
        kconfig: None,
        kernel_release,
        tuning: notes,
        started_at,
        finished_at: now_ms(),
        profile: None,
    }))
}

fn argv_of(cfg: &HostConfig, inv: &Invocation) -> Vec<String> {
    let program = if inv.program == "kbot-bench" {
        cfg.kbot_bench.display().to_string()
    } else {
        inv.program.clone()
    };
    std::iter::once(program)
        .chain(inv.args.iter().cloned())
        .collect()
}

/// One execution: stdout and stderr on success, the failure otherwise.
fn execute(
    argv: &[String],
    limit: Duration,
    cancel: &Cancel,
) -> Result<std::result::Result<(String, String), Failure>> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| AgentError::Config("empty command line".into()))?;
    let mut child = spawn_tied(
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )?;
    let out = child.stdout.take();
    let err = child.stderr.take();
    let read = |s: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut s) = s {
                let _ = s.read_to_string(&mut text);
            }
            text
        })
    };
    let (out_t, err_t) = (
        read(out.map(|o| Box::new(o) as _)),
        read(err.map(|e| Box::new(e) as _)),
    );
    let end = supervise(child, limit, cancel)?;
    let (stdout, stderr) = (
        out_t.join().unwrap_or_default(),
        err_t.join().unwrap_or_default(),
    );
    Ok(match end {
        Finished::Exited(s) if s.success() => Ok((stdout, stderr)),
        Finished::Exited(s) => Err(Failure::new(
            FailureKind::Incomplete,
            format!(
                "`{}` ended with {s}:\n{}",
                argv.join(" "),
                tail(&stderr, 20)
            ),
        )),
        Finished::TimedOut => Err(Failure::new(
            FailureKind::Timeout,
            format!(
                "timed out after {} s in the workload: `{}` was killed",
                limit.as_secs(),
                argv.join(" ")
            ),
        )),
    })
}
