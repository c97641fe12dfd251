//! The program table: every program a job file may name, the options each
//! takes with their kinds and defaults, and the setup programs kbot
//! honours.

use crate::job::model::AtomicJob;
use crate::{Error, Result};

/// What values an option accepts, and how [`crate::job::AtomicJob::resolve`]
/// turns them into numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// A task or thread count: `8`, `20%` of the logical CPUs, or `2c` (LKP's
    /// cores per socket), read by [`crate::units::Count`]; resolved to an
    /// integer.
    Count,
    /// Bytes with an optional `k`/`m`/`g`/`t` suffix (powers of 1024, as
    /// LKP's `to_byte`; `KiB` and `KB` too), read by [`crate::units::size`];
    /// resolved to an integer number of bytes.
    Size,
    /// Like [`ValueKind::Size`], or `N%` of the machine's memory.
    MemorySize,
    /// Seconds with an optional `s`/`m`/`h`/`d` suffix, read by
    /// [`crate::units::seconds`]; resolved to seconds.
    Duration,
    /// A non-negative integer, optionally followed by a unit word that is
    /// ignored (LKP writes `loops: 10000000ops`), read by
    /// [`crate::units::leading_integer`]; resolved to the integer.
    Integer,
    /// `0` or `1`.
    Flag,
}

/// One option of a program.
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    pub name: &'static str,
    /// Used by `resolve` when the job does not set the option.
    pub default: Option<&'static str>,
    pub kind: ValueKind,
    pub doc: &'static str,
}

/// One program a job file may name.
#[derive(Debug, Clone, Copy)]
pub struct ProgramSpec {
    /// The program key (`lmbench3`, `will-it-scale`, ...), as in LKP.
    pub name: &'static str,
    pub summary: &'static str,
    pub options: &'static [OptionSpec],
    /// Options the job must set (no sensible default exists).
    pub required: &'static [&'static str],
    /// The KPIs its parsers write, without the testcase prefix: what a job
    /// file's `kpi:` may name. `*` stands for one name segment without a
    /// dot (a stressor, a task count).
    pub metrics: &'static [&'static str],
}

impl ProgramSpec {
    pub fn option(&self, name: &str) -> Option<&'static OptionSpec> {
        self.options.iter().find(|o| o.name == name)
    }

    pub fn option_names(&self) -> Vec<String> {
        self.options.iter().map(|o| o.name.to_string()).collect()
    }
}

const fn opt(
    name: &'static str,
    default: Option<&'static str>,
    kind: ValueKind,
    doc: &'static str,
) -> OptionSpec {
    OptionSpec {
        name,
        default,
        kind,
        doc,
    }
}

const PROCESS_THREAD: ValueKind = ValueKind::Choice(&["process", "thread"]);
/// LKP's hackbench and perf-bench-sched-pipe jobs spell thread mode `threads`.
const PROCESS_THREADS: ValueKind = ValueKind::Choice(&["process", "threads"]);
const IPC: ValueKind = ValueKind::Choice(&["pipe", "socket"]);
/// The stress-ng stressors kbot plans: the pipe family of lkp-tests'
/// `jobs/stress-ng/stress-ng-part3.yaml` and `stress-ng-scheduler.yaml`
/// (`pipe` and `pthread` under each `sched`, `pipeherd`, `ring-pipe`), and
/// `switch` of `stress-ng-part4.yaml` (with `method: pipe` only, see
/// [`check_combination`]).
const STRESS_NG_STRESSORS: &[&str] = &["pipe", "pthread", "pipeherd", "ring-pipe", "switch"];

/// stress-ng 0.15's `--switch-method` values, all accepted as values so that
/// upstream's matrix plans and the ones kbot does not run are skipped with
/// the reason [`check_combination`] gives.
const STRESS_NG_SWITCH_METHODS: &[&str] = &["mq", "pipe", "sem-sysv"];

/// Every program a job file may name.
pub const PROGRAMS: &[ProgramSpec] = &[
    ProgramSpec {
        name: "lmbench3",
        summary:
            "lmbench3 in LKP's development mode; test PIPE runs lat_pipe and bw_pipe -P nr_threads",
        options: &[
            opt(
                "mode",
                None,
                ValueKind::Choice(&["development"]),
                "config-run subset; only development selects single tests",
            ),
            opt(
                "test",
                None,
                ValueKind::Choice(&["PIPE"]),
                "the lmbench test; kbot runs the pipe tests only",
            ),
            opt(
                "nr_threads",
                Some("1"),
                ValueKind::Count,
                "copies (SYNC_MAX, the -P of lat_pipe and bw_pipe)",
            ),
            opt(
                "test_memory_size",
                Some("50%"),
                ValueKind::MemorySize,
                "config-run memory answer; unused by PIPE",
            ),
        ],
        // Upstream fails without a mode and runs no test without a test.
        required: &["mode", "test"],
        metrics: &["PIPE.bandwidth.MB/sec", "PIPE.latency.us", "AF_UNIX.sock.stream.bandwidth.MB/sec", "AF_UNIX.sock.stream.latency.us"],
    },
    ProgramSpec {
        name: "bw_pipe",
        summary: "lmbench3 bw_pipe alone",
        options: &[
            opt("size", Some("64k"), ValueKind::Size, "bytes per write (-m)"),
            opt(
                "total",
                Some("10m"),
                ValueKind::Size,
                "bytes per iteration (-M)",
            ),
            opt(
                "nr_threads",
                Some("1"),
                ValueKind::Count,
                "reader/writer pairs (-P)",
            ),
            opt(
                "sched",
                Some("DEFAULT"),
                ValueKind::Choice(&["DEFAULT", "SINGLE", "BALANCED", "UNIQUE", "UNIQUE_LOCAL"]),
                "LMBENCH_SCHED placement",
            ),
            opt(
                "repetitions",
                Some("11"),
                ValueKind::Integer,
                "timed samples, the median is reported (-N)",
            ),
        ],
        required: &[],
        metrics: &["PIPE.bandwidth.MB/sec"],
    },
    ProgramSpec {
        name: "lat_pipe",
        summary: "lmbench3 lat_pipe alone",
        options: &[
            opt(
                "nr_threads",
                Some("1"),
                ValueKind::Count,
                "ping-pong pairs (-P)",
            ),
            opt(
                "sched",
                Some("DEFAULT"),
                ValueKind::Choice(&["DEFAULT", "SINGLE", "BALANCED", "UNIQUE", "UNIQUE_LOCAL"]),
                "LMBENCH_SCHED placement",
            ),
            opt(
                "repetitions",
                Some("11"),
                ValueKind::Integer,
                "timed samples, the median is reported (-N)",
            ),
        ],
        required: &[],
        metrics: &["PIPE.latency.us"],
    },
    ProgramSpec {
        name: "will-it-scale",
        summary: "will-it-scale pipe1 or context_switch1: one shot at nr_task tasks, or LKP's task-count sweep without nr_task",
        options: &[
            opt(
                "test",
                None,
                ValueKind::Choice(&["pipe1", "context_switch1"]),
                "the will-it-scale test",
            ),
            opt(
                "mode",
                Some("both"),
                ValueKind::Choice(&["process", "thread", "both"]),
                "processes, threads, or both runs",
            ),
            opt("nr_task", None, ValueKind::Count, "tasks (-t)"),
            opt(
                "runtime",
                Some("300s"),
                ValueKind::Duration,
                "measured seconds are runtime - 5 (LKP)",
            ),
            opt(
                "no_affinity",
                Some("0"),
                ValueKind::Flag,
                "1: no pinning (-n)",
            ),
            opt(
                "smt",
                Some("0"),
                ValueKind::Flag,
                "1: pin to SMT threads instead of cores (-m)",
            ),
        ],
        required: &["test"],
        metrics: &["per_process_ops", "per_thread_ops", "workload", "scalability", "*.*"],
    },
    ProgramSpec {
        name: "pipen",
        summary: "pipen from the fs/pipe thread: one writer, one reader, separate CPUs",
        options: &[
            opt("size", Some("32768"), ValueKind::Size, "bytes per write"),
            opt(
                "runtime",
                Some("8s"),
                ValueKind::Duration,
                "measured seconds",
            ),
            opt(
                "writer_cpu",
                Some("0"),
                ValueKind::Integer,
                "CPU of the writer",
            ),
            opt(
                "reader_cpu",
                Some("1"),
                ValueKind::Integer,
                "CPU of the reader",
            ),
        ],
        required: &[],
        metrics: &["MB/sec", "ops_per_sec", "per_process_ops", "per_thread_ops", "workload"],
    },
    ProgramSpec {
        name: "unixbench",
        summary: "UnixBench Run pipe -c nr_task -i runtime/10",
        options: &[
            opt(
                "test",
                None,
                ValueKind::Choice(&["pipe"]),
                "the UnixBench test; kbot runs pipe only",
            ),
            // Without -c, Run runs 1 copy then nr_cpu copies, and LKP's parse
            // keeps the last index: the nr_cpu copies run.
            opt("nr_task", Some("100%"), ValueKind::Count, "copies (-c)"),
            opt(
                "runtime",
                Some("300s"),
                ValueKind::Duration,
                "passes are runtime/10 (LKP)",
            ),
        ],
        // Upstream runs every index test without one.
        required: &["test"],
        metrics: &["score", "throughput", "workload"],
    },
    ProgramSpec {
        name: "hackbench",
        summary: "rt-tests hackbench, as LKP runs it",
        options: &[
            opt(
                "mode",
                Some("process"),
                PROCESS_THREADS,
                "--process or --threads",
            ),
            opt("ipc", Some("socket"), IPC, "pipe adds --pipe"),
            opt("nr_threads", Some("100%"), ValueKind::Count, "groups (-g)"),
            opt(
                "iterations",
                None,
                ValueKind::Integer,
                "runs; without it, repeat for runtime",
            ),
            opt(
                "runtime",
                Some("600s"),
                ValueKind::Duration,
                "repeat until this much time passed, when iterations is unset",
            ),
            opt(
                "loops",
                None,
                ValueKind::Integer,
                "loops (-l); default 30000 * nr_cpu / nr_threads (LKP)",
            ),
            opt(
                "datasize",
                Some("100"),
                ValueKind::Integer,
                "message bytes (-s)",
            ),
            opt(
                "fds",
                Some("20"),
                ValueKind::Integer,
                "senders and receivers per group (-f)",
            ),
        ],
        required: &[],
        metrics: &["throughput", "throughput_best", "throughput_avg", "throughput_worst", "time_sec"],
    },
    ProgramSpec {
        name: "perf-bench-sched-pipe",
        summary: "perf bench sched pipe",
        options: &[
            opt(
                "loops",
                Some("10000000"),
                ValueKind::Integer,
                "round trips (-l); LKP writes 10000000ops",
            ),
            opt("mode", Some("process"), PROCESS_THREADS, "threads adds -T"),
        ],
        required: &[],
        metrics: &["ops_per_sec", "usecs_per_op", "total_time_sec"],
    },
    ProgramSpec {
        name: "perf-bench-sched-messaging",
        summary: "perf bench sched messaging",
        options: &[
            opt("loops", Some("100"), ValueKind::Integer, "--nr_loops"),
            opt("groups", Some("10"), ValueKind::Integer, "--group"),
            opt("ipc", Some("socket"), IPC, "pipe adds --pipe"),
            opt(
                "mode",
                Some("process"),
                PROCESS_THREAD,
                "thread adds --thread",
            ),
        ],
        required: &[],
        metrics: &["total_time_sec", "throughput", "time_sec"],
    },
    ProgramSpec {
        name: "pipebench",
        summary: "pipebench stdin-to-stdout meter",
        options: &[
            opt(
                "bufsize",
                Some("819200"),
                ValueKind::Size,
                "buffer bytes (-b)",
            ),
            opt(
                "size",
                Some("4800m"),
                ValueKind::Size,
                "bytes piped through (upstream: dd bs=80k count=60k)",
            ),
        ],
        required: &[],
        metrics: &["MB/sec", "bytes", "elapsed_sec"],
    },
    ProgramSpec {
        name: "stress-ng",
        summary: "stress-ng's pipe stressors (switch with method pipe among them), --<test> nr_threads as LKP runs them (upstream's stress-ng in the guest; kbot-bench has no stress-ng workload)",
        options: &[
            opt(
                "test",
                None,
                ValueKind::Choice(STRESS_NG_STRESSORS),
                "the stressor",
            ),
            opt(
                "nr_threads",
                Some("100%"),
                ValueKind::Count,
                "instances (--<test> N)",
            ),
            opt("testtime", Some("60s"), ValueKind::Duration, "--timeout"),
            opt(
                "method",
                None,
                ValueKind::Choice(STRESS_NG_SWITCH_METHODS),
                "--<test>-method (LKP); kbot runs switch's pipe method only",
            ),
            opt(
                "sched",
                None,
                ValueKind::Choice(&["batch", "deadline", "fifo", "idle", "other", "rr"]),
                "scheduler policy: --<test>-sched, or --workload-sched for a stressor without one (LKP)",
            ),
        ],
        required: &["test"],
        metrics: &["*.ops", "*.ops_per_sec", "*.*"],
    },
];

/// What one option's value cannot say: whether the options of an atomic
/// job go together. stress-ng's `method` is kbot's for `switch` alone (the
/// only stressor of its table with methods), and of switch's methods only
/// `pipe` moves its context switches through a pipe.
pub(crate) fn check_combination(job: &AtomicJob) -> Result<()> {
    if job.program != "stress-ng" {
        return Ok(());
    }
    let get = |k: &str| job.options.get(k).or_else(|| job.params.get(k));
    let (Some(method), Some(test)) = (get("method"), get("test")) else {
        return Ok(());
    };
    if test != "switch" {
        return Err(Error::InvalidValue {
            key: "method".to_string(),
            value: method.clone(),
            reason: format!("kbot passes --<test>-method to switch only, not to {test}"),
        });
    }
    if method != "pipe" {
        return Err(Error::InvalidValue {
            key: "method".to_string(),
            value: method.clone(),
            reason: format!(
                "switch's {method} method switches contexts through {}, not a pipe: \
                 kbot runs stress-ng's pipe stressors only (switch with method pipe)",
                if method == "mq" {
                    "a POSIX message queue"
                } else {
                    "System V semaphores"
                }
            ),
        });
    }
    Ok(())
}

/// LKP setup programs whose scalar value is a job parameter (and so a path
/// parameter): `cpufreq_governor: performance`.
pub const SETUP_PROGRAMS: &[OptionSpec] = &[opt(
    "cpufreq_governor",
    None,
    ValueKind::Choice(&[
        "performance",
        "powersave",
        "ondemand",
        "schedutil",
        "conservative",
        "userspace",
    ]),
    "set on every CPU before the run (agent side)",
)];

/// Looks a program up by its job-file key.
pub fn lookup(name: &str) -> Option<&'static ProgramSpec> {
    PROGRAMS.iter().find(|p| p.name == name)
}

/// Names of all programs, for error messages.
pub fn program_names() -> Vec<String> {
    PROGRAMS.iter().map(|p| p.name.to_string()).collect()
}

/// Looks an option up among the program's options and the setup programs.
pub fn option_spec(program: &ProgramSpec, name: &str) -> Option<&'static OptionSpec> {
    program
        .option(name)
        .or_else(|| SETUP_PROGRAMS.iter().find(|o| o.name == name))
}

pub(crate) fn unknown_program(name: &str) -> Error {
    Error::UnknownProgram {
        name: name.to_string(),
        known: program_names(),
    }
}
