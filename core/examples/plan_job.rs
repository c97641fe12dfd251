//! Shows what a job file expands into on a machine of the given size: each
//! atomic job's path parameters, resolved parameters, and the kbot-bench and
//! upstream command lines; then what it skips, with the reasons.
//!
//! `cargo run -p kbot-core --example plan_job -- jobs/hackbench-pipe.yaml 2 24 [LKP_ROOT]`
//! (job file, logical CPUs, memory in GiB, and the lkp-tests checkout that
//! `<< :` includes are resolved against; default `$KBOT_LKP_ROOT`).

use std::process::ExitCode;

use kbot_core::job::plan_job_file;
use kbot_core::lkp::{IncludeDir, IncludeSource, NoIncludes};
use kbot_core::machine::Hardware;
use kbot_core::programs::{kbot_bench_invocations, upstream_invocations, Invocation};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (file, cpus, gib, root) = match args.as_slice() {
        [f, c, g] => (f, c, g, std::env::var("KBOT_LKP_ROOT").ok()),
        [f, c, g, r] => (f, c, g, Some(r.clone())),
        _ => {
            eprintln!("usage: plan_job JOBFILE NR_CPU MEMORY_GIB [LKP_ROOT]");
            return ExitCode::from(2);
        }
    };
    match plan(file, cpus, gib, root) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plan_job: {e}");
            ExitCode::FAILURE
        }
    }
}

fn plan(
    file: &str,
    cpus: &str,
    gib: &str,
    root: Option<String>,
) -> Result<(), Box<dyn std::error::Error>> {
    let threads: u32 = cpus.parse()?;
    let memory_gib: u64 = gib.parse()?;
    let hw = Hardware {
        arch: "x86_64".into(),
        cpu_model: "unknown".into(),
        sockets: 1,
        cores: threads,
        threads,
        numa_nodes: 1,
        memory_bytes: memory_gib << 30,
        page_size: 4096,
        microcode: None,
        kernel: "unknown".into(),
    };
    let includes: Box<dyn IncludeSource> = match root {
        Some(r) => Box::new(IncludeDir::new(r)),
        None => Box::new(NoIncludes),
    };
    let plan = plan_job_file(&std::fs::read_to_string(file)?, includes.as_ref())?;
    for job in &plan.jobs {
        println!("{}", job.result_path("COMMIT"));
        let resolved = job.resolve(&hw)?;
        println!("  resolved: {resolved:?}");
        match kbot_bench_invocations(job, &resolved) {
            Ok(list) => list.iter().for_each(|i| show("kbot-bench", i)),
            Err(e) => println!("  kbot-bench: {e}"),
        }
        match upstream_invocations(job, &resolved)? {
            Some(list) => list.iter().for_each(|i| show("upstream", i)),
            None => println!("  upstream: none"),
        }
    }
    if !plan.monitors.is_empty() {
        println!("monitors: {}", plan.monitors.join(", "));
    }
    for s in &plan.skipped {
        println!("skipped {:?} {}: {}", s.kind, s.name, s.reason);
    }
    Ok(())
}

fn show(kind: &str, i: &Invocation) {
    println!(
        "  {kind}: {} {}  [{:?}, parser {:?}]",
        i.program,
        i.args.join(" "),
        i.repeat,
        i.parser
    );
}
