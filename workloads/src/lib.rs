//! kbot-bench: pipe benchmarks that reproduce the upstream tools' semantics.
//!
//! One module per workload; [`run`] dispatches a parsed command line and
//! returns the report. Process-mode workloads fork while the process is still
//! single-threaded and end every child with `_exit`.

pub mod calendar;
pub mod cli;
pub mod error;
pub mod lmbench;
pub mod lmbench_pipe;
pub mod messaging;
pub mod pipebench;
pub mod placement;
pub mod report;
pub mod sched_pipe;
pub mod size;
pub mod sys;
pub mod unixbench;
pub mod wis;

use cli::{
    Cli, Command, LmbenchCommon, MessagingStyle, PairPinArgs, PipebenchArgs, PipenArgs, TaskMode,
    WisArgs,
};
use error::{BenchError, Result};
use lmbench::Placer;
use placement::LmbenchSched;
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
        Command::BwPipe(a) => {
            let place = lmbench_placer(&a.common, &topo)?;
            let opts = lmbench_pipe::BwPipeOpts {
                xfer: a.xfer,
                bytes: a.bytes,
                parallel: a.common.parallel as usize,
                warmup_us: a.common.warmup_us,
                repetitions: a.common.repetitions as usize,
                enough: a.common.enough,
            };
            let mut r = Report::new("bw_pipe", &prefix("lmbench3"));
            lmbench_pipe::run_bw_pipe(&opts, &place, &mut out, &mut r)?;
            r
        }
        Command::LatPipe(a) => {
            let place = lmbench_placer(&a.common, &topo)?;
            let opts = lmbench_pipe::LatPipeOpts {
                parallel: a.common.parallel as usize,
                warmup_us: a.common.warmup_us,
                repetitions: a.common.repetitions as usize,
                enough: a.common.enough,
            };
            let mut r = Report::new("lat_pipe", &prefix("lmbench3"));
            lmbench_pipe::run_lat_pipe(&opts, &place, &mut out, &mut r)?;
            r
        }
        Command::Pipe1(a) => run_wis_test(
            wis::Testcase::Pipe1,
            a,
            &topo,
            &mut out,
            &prefix("will-it-scale"),
        )?,
        Command::ContextSwitch1(a) => run_wis_test(
            wis::Testcase::ContextSwitch1,
            a,
            &topo,
            &mut out,
            &prefix("will-it-scale"),
        )?,
        Command::Pipen(a) => run_pipen(a, &topo, &mut out, &prefix("pipen"))?,
        Command::UnixbenchPipe(a) => {
            let opts = unixbench::UnixbenchOpts {
                duration: a.duration,
                copies: a.copies as usize,
                passes: a.iterations as usize,
                settle_secs: a.settle,
            };
            let mut r = Report::new("unixbench-pipe", &prefix("unixbench"));
            unixbench::run(&opts, &mut out, &mut r)?;
            r
        }
        Command::Messaging(a) => {
            let opts = messaging::MessagingOpts {
                groups: a.groups as usize,
                fds: a.fds as usize,
                loops: a.loops as usize,
                datasize: a.datasize as usize,
                ipc: a.ipc,
                mode: a.mode,
                style: a.style,
            };
            let default_prefix = match a.style {
                MessagingStyle::Hackbench => "hackbench",
                MessagingStyle::Perf => "perf-bench-sched-messaging",
            };
            let mut r = Report::new("messaging", &prefix(default_prefix));
            messaging::run(&opts, &mut out, &mut r)?;
            r
        }
        Command::Pipebench(a) => {
            let opts = pipebench_opts(a)?;
            let mut r = Report::new("pipebench", &prefix("pipebench"));
            pipebench::run(&opts, &mut out, &mut r)?;
            r
        }
    };
    clock.finish(&mut report);
    Ok((report, out))
}

/// The lmbench placement: LMBENCH_SCHED mode plus explicit writer/reader CPUs
/// (the reader is benchproc 0, the writer its forked partner).
fn lmbench_placer(a: &LmbenchCommon, topo: &Topology) -> Result<Placer> {
    let pair = PairCpus::resolve(&a.pin, topo)?;
    Ok(Placer {
        sched: LmbenchSched::parse(&a.sched)?,
        topo: topo.clone(),
        main_cpu: pair.reader,
        partner_cpu: pair.writer,
    })
}

/// will-it-scale's default binding: task i on core (i mod #cores), or PU with
/// `-m`, or nothing with `-n`.
fn wis_cpusets(
    tasks: usize,
    no_affinity: bool,
    smt: bool,
    topo: &Topology,
) -> (String, Vec<Option<Vec<usize>>>) {
    if no_affinity {
        return ("unpinned (-n)".into(), vec![None; tasks]);
    }
    let mode = if smt {
        "one task per SMT thread (-m)"
    } else {
        "one task per core"
    };
    (
        mode.into(),
        (0..tasks).map(|i| Some(topo.wis_cpuset(i, smt))).collect(),
    )
}

fn run_wis_test(
    test: wis::Testcase,
    a: &WisArgs,
    topo: &Topology,
    out: &mut Output,
    prefix: &str,
) -> Result<Report> {
    let tasks = a.tasks as usize;
    let (mode_name, cpusets) = wis_cpusets(tasks, a.no_affinity, a.smt, topo);
    let opts = wis::WisOpts {
        tasks,
        seconds: a.seconds,
        mode: a.mode,
        warmup_samples: a.warmup_samples,
        cpusets,
    };
    let tool = match test {
        wis::Testcase::Pipe1 => "pipe1",
        _ => "context_switch1",
    };
    let mut r = Report::new(tool, prefix);
    let res = wis::run(&test, &opts, out)?;
    r.placement = wis::placement(&mode_name, &res.placed, |i| format!("task {i}"));
    let per_task = res.average as f64 / tasks as f64;
    let name = match a.mode {
        TaskMode::Process => "per_process_ops",
        TaskMode::Thread => "per_thread_ops",
    };
    r.metric(name, per_task);
    r.metric("workload", res.average as f64);
    r.param("test", tool);
    r.param("-t", tasks);
    r.param("-s", a.seconds);
    r.param("mode", format!("{:?}", a.mode).to_lowercase());
    r.param("warmup_samples", a.warmup_samples);
    Ok(r)
}

fn run_pipen(a: &PipenArgs, topo: &Topology, out: &mut Output, prefix: &str) -> Result<Report> {
    let size = usize::try_from(a.size)
        .ok()
        .filter(|&s| s > 0)
        .ok_or_else(|| BenchError::usage("pipen: --size must be at least 1 byte"))?;
    let tasks = 2 * a.pairs as usize;
    let pair = PairCpus::resolve(&a.pin, topo)?;
    let (mut mode_name, mut cpusets) = wis_cpusets(tasks, a.no_affinity, false, topo);
    if pair.is_set() {
        mode_name = format!("{mode_name}, {}", pair.mode_name());
        for (nr, set) in cpusets.iter_mut().enumerate() {
            let explicit = if nr % 2 == 0 {
                pair.writer
            } else {
                pair.reader
            };
            if let Some(cpu) = explicit {
                *set = Some(vec![cpu]);
            }
        }
    }
    let opts = wis::WisOpts {
        tasks,
        seconds: a.duration,
        mode: a.mode,
        warmup_samples: a.warmup_samples,
        cpusets,
    };
    let mut r = Report::new("pipen", prefix);
    let test = wis::Testcase::Pipen {
        size,
        packet: a.packet,
    };
    let res = wis::run(&test, &opts, out)?;
    r.placement = wis::placement(&mode_name, &res.placed, |i| {
        format!("{} {}", if i % 2 == 0 { "writer" } else { "reader" }, i / 2)
    });
    let writes: u64 = res.task_totals.iter().step_by(2).sum();
    let secs = a.duration as f64;
    r.metric("MB/sec", writes as f64 * size as f64 / secs / 1e6);
    r.metric("ops_per_sec", writes as f64 / secs);
    r.param("--size", size);
    r.param("--pairs", a.pairs);
    r.param("--packet", a.packet);
    r.param("--duration", a.duration);
    r.param("mode", format!("{:?}", a.mode).to_lowercase());
    r.param("warmup_samples", a.warmup_samples);
    Ok(r)
}

fn pipebench_opts(a: &PipebenchArgs) -> Result<pipebench::PipebenchOpts> {
    let feed = match a.feed {
        Some(total) => {
            let bs = usize::try_from(a.feed_bs)
                .ok()
                .filter(|&b| b > 0)
                .ok_or_else(|| BenchError::usage("pipebench: --feed-bs must be at least 1 byte"))?;
            Some((total, bs))
        }
        None => None,
    };
    let status_file = match (&a.status_file, &a.status_append) {
        (Some(p), _) => Some((p.clone(), false)),
        (None, Some(p)) => Some((p.clone(), true)),
        (None, None) => None,
    };
    Ok(pipebench::PipebenchOpts {
        bufsize: a.bufsize as usize,
        quiet: a.quiet || a.very_quiet,
        summary: !(a.very_quiet || a.no_summary || a.raw),
        fancy: !a.raw,
        errout: a.exit_on_error,
        unit: if a.si { 1000 } else { 1024 },
        dounit: !a.no_units,
        status_file,
        feed,
    })
}
