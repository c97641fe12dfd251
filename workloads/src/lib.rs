//! kbot-bench: pipe benchmarks that reproduce the upstream tools' semantics.
//!
//! One module per workload; [`run`] dispatches a parsed command line and
//! returns the report. Process-mode workloads fork while the process is still
//! single-threaded and end every child with `_exit`.

pub mod cli;
pub mod error;
pub mod placement;
pub mod report;
pub mod sched_pipe;
pub mod size;
pub mod sys;

use cli::{Cli, Command, PairPinArgs};
use error::{BenchError, Result};
use placement::Topology;
use report::{Output, Report, TreeClock};

/// Resolved writer/reader pinning of a pair workload.
#[derive(Debug, Clone, Default)]
pub struct PairCpus {
    pub writer: Option<usize>,
    pub reader: Option<usize>,
    split: bool,
}

impl PairCpus {
    pub fn resolve(args: &PairPinArgs, topo: &Topology) -> Result<Self> {
        if args.split_cpus {
            if topo.cpus.len() < 2 {
                return Err(BenchError::usage("--split-cpus needs two CPUs"));
            }
            return Ok(PairCpus {
                writer: Some(topo.cpus[0]),
                reader: Some(topo.cpus[1]),
                split: true,
            });
        }
        Ok(PairCpus {
            writer: args.writer_cpu.map(|c| topo.check_cpu(c)).transpose()?,
            reader: args.reader_cpu.map(|c| topo.check_cpu(c)).transpose()?,
            split: false,
        })
    }

    pub fn is_set(&self) -> bool {
        self.writer.is_some() || self.reader.is_some()
    }

    pub fn mode_name(&self) -> String {
        if self.split {
            "split-cpus".into()
        } else if self.is_set() {
            "explicit".into()
        } else {
            "unpinned".into()
        }
    }
}

/// Runs the workload the command line names. Text goes out as it is produced
/// (unless `--json`); the report carries the metrics.
pub fn run(cli: &Cli) -> Result<(Report, Output)> {
    // Orphaned grandchildren must come back to us so their CPU time is counted.
    sys::set_child_subreaper();
    let clock = TreeClock::start();
    let topo = Topology::detect();
    let mut out = Output::new(cli.json);
    let prefix = |default: &str| cli.prefix.clone().unwrap_or_else(|| default.to_string());
    let mut report = match &cli.command {
        Command::SchedPipe(a) => {
            let opts = sched_pipe::SchedPipeOpts {
                loops: a.loops,
                threaded: a.threaded,
                cpus: PairCpus::resolve(&a.pin, &topo)?,
            };
            let mut r = Report::new("sched-pipe", &prefix("perf-bench-sched-pipe"));
            sched_pipe::run(&opts, &mut out, &mut r)?;
            r
        }
        _ => return Err(BenchError::usage("this subcommand is not built yet")),
    };
    clock.finish(&mut report);
    Ok((report, out))
}
