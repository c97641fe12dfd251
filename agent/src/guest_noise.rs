//! `kbot-agent guest-noise`: the measurement behind the guest noise table
//! in BENCHMARKS.md. Boots one built kernel several times through the qemu
//! backend exactly as jobs do (same QEMU command line, clock, initramfs),
//! runs one kbot-bench command several times per boot, and prints every
//! execution's KPI as one JSON line, so that `scripts/guest-noise` can
//! compute the spread within a boot and across boots.

use std::path::Path;

use kbot_core::metrics;
use kbot_core::parsers::{self, ParseContext, Tool};
use kbot_core::programs::{Invocation, Repeat};

use crate::config::{AgentArgs, NoiseArgs};
use crate::error::{AgentError, Result};
use crate::process::Cancel;
use crate::qemu::{QemuBackend, QemuConfig};

pub async fn run(args: &AgentArgs, noise: NoiseArgs) -> Result<()> {
    let cfg = args.qemu_run_config(crate::find_binary(&args.kbot_bench))?;
    tokio::task::spawn_blocking(move || measure(cfg, &noise))
        .await
        .map_err(|e| AgentError::Config(format!("guest-noise task: {e}")))?
}

/// The single invocation the guest runs `runs` times.
fn invocation(noise: &NoiseArgs) -> Invocation {
    let mut args = noise.bench_args.clone();
    args.extend([
        "--prefix".to_string(),
        noise.prefix.clone(),
        "--json".to_string(),
    ]);
    Invocation {
        program: "kbot-bench".to_string(),
        args,
        repeat: Repeat::Times(noise.runs_per_boot.max(1)),
        parser: Tool::KbotBenchJson,
        context: ParseContext::new(&noise.prefix),
    }
}

fn measure(cfg: QemuConfig, noise: &NoiseArgs) -> Result<()> {
    let clock = cfg.clock.describe();
    let vcpus = cfg.guest_topology().cpus();
    let backend = QemuBackend::new(cfg);
    let inv = invocation(noise);
    let plan = vec![inv.clone()];
    std::fs::create_dir_all(&noise.dir)
        .map_err(|e| AgentError::io(format!("creating {}", noise.dir.display()), e))?;
    for boot in 0..noise.boots {
        let rec = backend.boot(
            &noise.kernel,
            &plan,
            0,
            &noise.dir,
            &Cancel::new(),
            &|_, _| {},
        )?;
        let runs = rec.executions().map_err(|detail| AgentError::Command {
            command: format!("guest-noise boot {boot} of {}", noise.label),
            detail,
        })?;
        for (run, e) in runs.iter().enumerate() {
            let metrics = parsers::parse(inv.parser, &e.stdout, &inv.context)?;
            let value = *metrics.get(&noise.kpi).ok_or_else(|| {
                AgentError::parse(
                    format!("{} output", noise.label),
                    format!("no metric {} in {:?}", noise.kpi, metrics.keys()),
                )
            })?;
            let line = serde_json::json!({
                "label": noise.label,
                "clock": clock,
                "vcpus": vcpus,
                "boot": boot,
                "run": run,
                "kpi": noise.kpi,
                // The ratio floor a verdict on the KPI needs: 1% for 0-day's
                // perf metrics, 5% for the rest.
                "perf_metric": metrics::is_perf_metric(&noise.kpi),
                "value": value,
                "boot_wall_secs": rec.wall().as_secs_f64(),
                "host_other": rec.host.map(|h| h.other),
                "host": rec.host.map(|h| h.describe()),
            });
            println!("{line}");
        }
        tracing::info!(boot, label = %noise.label, wall_secs = rec.wall().as_secs_f64(), "boot measured");
        keep_console(&noise.dir, boot, rec.console());
    }
    Ok(())
}

/// Keeps each boot's console beside the scratch files.
fn keep_console(dir: &Path, boot: u32, console: &str) {
    let _ = std::fs::write(dir.join(format!("console.{boot}.log")), console);
}
