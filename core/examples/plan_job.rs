//! Shows what a job file expands into on a machine of the given size: each
//! atomic job's path parameters, resolved parameters, and the kbot-bench and
//! upstream command lines.
//!
//! `cargo run -p kbot-core --example plan_job -- jobs/hackbench-pipe.yaml 2 24`
//! (job file, logical CPUs, memory in GiB).

use std::process::ExitCode;

use kbot_core::api::Hardware;
use kbot_core::job::parse_job_file;
use kbot_core::programs::{kbot_bench_invocations, upstream_invocations, Invocation};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [file, cpus, gib] = args.as_slice() else {
        eprintln!("usage: plan_job JOBFILE NR_CPU MEMORY_GIB");
        return ExitCode::from(2);
    };
    match plan(file, cpus, gib) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plan_job: {e}");
            ExitCode::FAILURE
        }
    }
}

fn plan(file: &str, cpus: &str, gib: &str) -> Result<(), Box<dyn std::error::Error>> {
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
    for job in parse_job_file(&std::fs::read_to_string(file)?)? {
        println!("{}", job.result_path("COMMIT"));
        let resolved = job.resolve(&hw)?;
        println!("  resolved: {resolved:?}");
        match kbot_bench_invocations(&job, &resolved) {
            Ok(list) => list.iter().for_each(|i| show("kbot-bench", i)),
            Err(e) => println!("  kbot-bench: {e}"),
        }
        match upstream_invocations(&job, &resolved)? {
            Some(list) => list.iter().for_each(|i| show("upstream", i)),
            None => println!("  upstream: none"),
        }
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
