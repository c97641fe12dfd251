//! The programs a job file may name, their options, and how an atomic job
//! becomes command lines.
//!
//! Program names and option names follow LKP (`programs/<name>/run` header
//! comments), restricted to what kbot can run: the pipe workloads. A job's
//! program key must be one of [`PROGRAMS`]; its options (inside the program
//! hash or at the top level of the job, as LKP allows) must be among that
//! program's [`OptionSpec`]s; `cpufreq_governor` is LKP's one setup program
//! with a scalar value that kbot honours ([`SETUP_PROGRAMS`]).
//!
//! [`kbot_bench_invocations`] maps an atomic job and its resolved parameters
//! (see [`crate::job::AtomicJob::resolve`]) to `kbot-bench` argv vectors as
//! `workloads/README.md` specifies; [`upstream_invocations`] gives the
//! upstream tool's command line (as LKP runs it) and the parser
//! ([`crate::parsers::Tool`]) that reads its output.

use std::collections::BTreeMap;

use crate::job::AtomicJob;
use crate::parsers::{ParseContext, Tool};
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
        ],
        required: &[],
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
        ],
        required: &[],
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
    },
    ProgramSpec {
        name: "stress-ng",
        summary:
            "stress-ng --pipe nr_threads (upstream tool only; kbot-bench has no stress-ng workload)",
        options: &[
            opt("test", None, ValueKind::Choice(&["pipe"]), "the stressor"),
            opt(
                "nr_threads",
                Some("100%"),
                ValueKind::Count,
                "instances (--pipe N)",
            ),
            opt("testtime", Some("60s"), ValueKind::Duration, "--timeout"),
        ],
        required: &["test"],
    },
];

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

/// How often to run one invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repeat {
    Times(u32),
    /// Run again and again until this many seconds have passed since the
    /// first start (LKP's hackbench `run_for_time`).
    ForSeconds(u64),
}

/// One command to run for an atomic job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// `kbot-bench` or the upstream binary (`hackbench`, `perf`, `sh`, ...);
    /// the agent resolves it on `PATH` or to its bundled kbot-bench.
    pub program: String,
    pub args: Vec<String>,
    pub repeat: Repeat,
    /// Which parser reads the output: [`Tool::KbotBenchJson`] for kbot-bench
    /// (every kbot-bench invocation carries `--json`), the tool's own text
    /// parser for upstream commands.
    pub parser: Tool,
    /// What the parser needs: the metric prefix (the job's testcase) and,
    /// for will-it-scale, the task count and mode.
    pub context: ParseContext,
}

/// Resolved parameter lookups with typed errors.
struct Params<'a> {
    job: &'a AtomicJob,
    resolved: &'a BTreeMap<String, String>,
}

impl Params<'_> {
    fn get(&self, key: &str) -> Result<&str> {
        self.resolved
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| Error::InvalidValue {
                key: key.to_string(),
                value: String::new(),
                reason: format!(
                    "missing from the resolved parameters of {}",
                    self.job.program
                ),
            })
    }

    fn int(&self, key: &str) -> Result<u64> {
        let v = self.get(key)?;
        v.parse().map_err(|_| Error::InvalidValue {
            key: key.to_string(),
            value: v.to_string(),
            reason: "expected a resolved integer".to_string(),
        })
    }

    /// A count that must be at least 1 for the tool to run at all.
    fn positive(&self, key: &str) -> Result<u64> {
        let n = self.int(key)?;
        if n == 0 {
            return Err(Error::InvalidValue {
                key: key.to_string(),
                value: "0".to_string(),
                reason: "must be at least 1".to_string(),
            });
        }
        Ok(n)
    }
}

fn strings<const N: usize>(items: [&str; N]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn bench(job: &AtomicJob, sub: &str, mut args: Vec<String>) -> Invocation {
    let mut all = vec![sub.to_string()];
    all.append(&mut args);
    all.extend(strings(["--prefix", &job.testcase, "--json"]));
    Invocation {
        program: "kbot-bench".to_string(),
        args: all,
        repeat: Repeat::Times(1),
        parser: Tool::KbotBenchJson,
        context: ParseContext::new(&job.testcase),
    }
}

fn upstream(job: &AtomicJob, program: &str, args: Vec<String>, parser: Tool) -> Invocation {
    Invocation {
        program: program.to_string(),
        args,
        repeat: Repeat::Times(1),
        parser,
        context: ParseContext::new(&job.testcase),
    }
}

/// The modes a will-it-scale job runs (`both` is two runs, as runtest.py).
fn wis_modes(mode: &str) -> Vec<&'static str> {
    match mode {
        "process" => vec!["process"],
        "thread" => vec!["thread"],
        _ => vec!["process", "thread"],
    }
}

/// will-it-scale's `-n` (no pinning) and `-m` (pin to SMT threads).
fn wis_pinning_flags(p: &Params) -> Result<Vec<String>> {
    let mut flags = Vec::new();
    if p.get("no_affinity")? == "1" {
        flags.push("-n".to_string());
    }
    if p.get("smt")? == "1" {
        flags.push("-m".to_string());
    }
    Ok(flags)
}

/// will-it-scale's task counts and seconds per count: `nr_task` for
/// `runtime - 5` s, or the sweep [`derive_params`] laid out.
fn wis_points(p: &Params) -> Result<(Vec<u64>, u64)> {
    if p.resolved.contains_key("nr_task") {
        return Ok((vec![p.positive("nr_task")?], wis_duration(p)?));
    }
    let tasks = p
        .get("threads_to_iterate")?
        .split_whitespace()
        .map(|t| {
            t.parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| Error::InvalidValue {
                    key: "threads_to_iterate".to_string(),
                    value: t.to_string(),
                    reason: "expected task counts of at least 1".to_string(),
                })
        })
        .collect::<Result<Vec<u64>>>()?;
    Ok((tasks, p.positive("duration")?))
}

/// Parameters LKP's run scripts compute from the machine rather than the
/// job: will-it-scale without `nr_task` sweeps task counts as
/// `setup_threads_to_iterate` and `setup_params` do (1, the cores of one
/// last-level cache, then each node's worth of cores; `runtime` shared out
/// over 3 + nr_node iterations, halved, less the 5 warm-up seconds, at
/// least 5 s). kbot's hardware record has no cache topology, so one LLC per
/// socket stands for lscpu's L2/L3 count.
pub(crate) fn derive_params(
    job: &AtomicJob,
    hw: &crate::machine::Hardware,
    resolved: &mut BTreeMap<String, String>,
) -> Result<()> {
    if job.program != "will-it-scale" || resolved.contains_key("nr_task") {
        return Ok(());
    }
    let nr_node = u64::from(hw.numa_nodes.max(1));
    let nr_cpu = u64::from(hw.threads);
    let threads_per_core = (nr_cpu / u64::from(hw.cores.max(1))).max(1);
    let cores_per_node = nr_cpu / nr_node / threads_per_core;
    if cores_per_node == 0 {
        return Err(Error::InvalidValue {
            key: "nr_task".to_string(),
            value: String::new(),
            reason: format!(
                "the sweep needs at least one core per node ({nr_cpu} CPUs, {nr_node} nodes)"
            ),
        });
    }
    let cores_per_llc = u64::from(hw.cores / hw.sockets.max(1)).max(1);
    let mut tasks = vec![1, cores_per_llc];
    tasks.extend((1..=nr_node).map(|i| i * cores_per_node));
    let runtime: i64 = resolved
        .get("runtime")
        .and_then(|r| r.parse().ok())
        .unwrap_or(300);
    let iterations = 3 + nr_node as i64;
    let duration = (runtime / iterations / 2 - 5).max(5);
    let list: Vec<String> = tasks.iter().map(u64::to_string).collect();
    resolved.insert("threads_to_iterate".to_string(), list.join(" "));
    resolved.insert("duration".to_string(), duration.to_string());
    Ok(())
}

/// LKP runs will-it-scale for `runtime - 5` seconds (5 = warm-up samples).
fn wis_duration(p: &Params) -> Result<u64> {
    let runtime = p.int("runtime")?;
    runtime
        .checked_sub(5)
        .filter(|d| *d > 0)
        .ok_or_else(|| Error::InvalidValue {
            key: "runtime".to_string(),
            value: runtime.to_string(),
            reason: "will-it-scale measures runtime - 5 seconds, so runtime must exceed 5s"
                .to_string(),
        })
}

/// LKP's hackbench loop count: `30000 * nr_cpu / nr_threads` unless set.
fn hackbench_loops(p: &Params) -> Result<u64> {
    if p.resolved.contains_key("loops") {
        return p.positive("loops");
    }
    let groups = p.positive("nr_threads")?;
    Ok((30000 * p.positive("nr_cpu")? / groups).max(1))
}

fn hackbench_repeat(p: &Params) -> Result<Repeat> {
    if p.resolved.contains_key("iterations") {
        let n = p.positive("iterations")?;
        return Ok(Repeat::Times(u32::try_from(n).unwrap_or(u32::MAX)));
    }
    Ok(Repeat::ForSeconds(p.int("runtime")?))
}

/// The `kbot-bench` command lines for an atomic job, in run order.
///
/// `resolved` is [`AtomicJob::resolve`]'s output (defaults filled, `N%`
/// and durations resolved, `nr_cpu` present). Every invocation carries
/// `--prefix <testcase> --json`, so its stdout is one JSON object whose
/// `metrics` are LKP-named. `stress-ng` has no kbot-bench workload: asking
/// for it is an error naming the upstream path.
pub fn kbot_bench_invocations(
    job: &AtomicJob,
    resolved: &BTreeMap<String, String>,
) -> Result<Vec<Invocation>> {
    let p = Params { job, resolved };
    let n = |key: &str| p.positive(key).map(|v| v.to_string());
    Ok(match job.program.as_str() {
        "lmbench3" => {
            let copies = n("nr_threads")?;
            // scripts/lmbench runs lat_pipe before bw_pipe.
            vec![
                bench(job, "lat_pipe", strings(["-P", &copies])),
                bench(job, "bw_pipe", strings(["-P", &copies])),
            ]
        }
        "bw_pipe" => vec![bench(
            job,
            "bw_pipe",
            strings(["-m", &n("size")?, "-M", &n("total")?, "-P", &n("nr_threads")?, "--sched", p.get("sched")?]),
        )],
        "lat_pipe" => vec![bench(
            job,
            "lat_pipe",
            strings(["-P", &n("nr_threads")?, "--sched", p.get("sched")?]),
        )],
        "will-it-scale" => {
            let (points, secs) = wis_points(&p)?;
            let secs = secs.to_string();
            let mut list = Vec::new();
            // runtest.py: for each task count, processes then threads.
            for tasks in points {
                for mode in wis_modes(p.get("mode")?) {
                    let tasks = tasks.to_string();
                    let mut args = strings(["-t", &tasks, "-s", &secs, "--mode", mode]);
                    args.extend(wis_pinning_flags(&p)?);
                    let mut inv = bench(job, p.get("test")?, args);
                    // The sweep's rows are combined as LKP's parser does
                    // (parsers::merge_executions).
                    inv.context.tasks = tasks.parse().ok();
                    inv.context.threads = mode == "thread";
                    list.push(inv);
                }
            }
            list
        }
        "pipen" => vec![bench(
            job,
            "pipen",
            strings([
                "--size", &n("size")?, "--duration", &n("runtime")?,
                "--writer-cpu", p.get("writer_cpu")?, "--reader-cpu", p.get("reader_cpu")?,
            ]),
        )],
        "unixbench" => {
            let passes = (p.positive("runtime")? / 10).max(1).to_string();
            vec![bench(
                job,
                "unixbench-pipe",
                strings(["--duration", "10", "-c", &n("nr_task")?, "-i", &passes]),
            )]
        }
        "hackbench" => {
            let mode = if p.get("mode")? == "threads" { "thread" } else { "process" };
            let args = strings([
                "-g", &n("nr_threads")?, "-f", &n("fds")?, "-l", &hackbench_loops(&p)?.to_string(),
                "-s", &n("datasize")?, "--ipc", p.get("ipc")?, "--mode", mode,
            ]);
            let mut inv = bench(job, "messaging", args);
            inv.repeat = hackbench_repeat(&p)?;
            vec![inv]
        }
        "perf-bench-sched-messaging" => vec![bench(
            job,
            "messaging",
            strings([
                "-g", &n("groups")?, "-f", "20", "-l", &n("loops")?, "-s", "100",
                "--ipc", p.get("ipc")?, "--mode", p.get("mode")?, "--style", "perf",
            ]),
        )],
        "perf-bench-sched-pipe" => {
            let mut args = strings(["-l", &n("loops")?]);
            if p.get("mode")? == "threads" {
                args.push("-T".to_string());
            }
            vec![bench(job, "sched-pipe", args)]
        }
        // --feed replaces upstream's `dd if=/dev/zero bs=80k | pipebench > /dev/null`.
        "pipebench" => vec![bench(
            job,
            "pipebench",
            strings(["-q", "-b", &n("bufsize")?, "--feed", &n("size")?, "--feed-bs", "80k"]),
        )],
        "stress-ng" => {
            return Err(Error::JobInvalid(
                "stress-ng has no kbot-bench workload; run the upstream tool (programs::upstream_invocations)".to_string(),
            ))
        }
        other => return Err(unknown_program(other)),
    })
}

/// The upstream tool's command lines for an atomic job, as LKP runs them,
/// each with the parser that reads its output. `Ok(None)` when no upstream
/// tool exists (`pipen`: its source is unpublished).
///
/// lmbench3 runs the `lat_pipe` and `bw_pipe` binaries directly rather than
/// through lmbench's `config-run` dialogue; will-it-scale runs the harness
/// binaries (`pipe1_processes`, `pipe1_threads`) rather than LKP's patched
/// runtest.py. Both parsers read either form.
pub fn upstream_invocations(
    job: &AtomicJob,
    resolved: &BTreeMap<String, String>,
) -> Result<Option<Vec<Invocation>>> {
    let p = Params { job, resolved };
    let n = |key: &str| p.positive(key).map(|v| v.to_string());
    Ok(Some(match job.program.as_str() {
        "lmbench3" => {
            let copies = n("nr_threads")?;
            vec![
                upstream(job, "lat_pipe", strings(["-P", &copies]), Tool::Lmbench),
                upstream(job, "bw_pipe", strings(["-P", &copies]), Tool::Lmbench),
            ]
        }
        "bw_pipe" => vec![upstream(
            job,
            "bw_pipe",
            strings([
                "-m",
                &n("size")?,
                "-M",
                &n("total")?,
                "-P",
                &n("nr_threads")?,
            ]),
            Tool::Lmbench,
        )],
        "lat_pipe" => vec![upstream(
            job,
            "lat_pipe",
            strings(["-P", &n("nr_threads")?]),
            Tool::Lmbench,
        )],
        "will-it-scale" => {
            let (points, secs) = wis_points(&p)?;
            let secs = secs.to_string();
            let test = p.get("test")?;
            let mut list = Vec::new();
            for tasks in points {
                for mode in wis_modes(p.get("mode")?) {
                    let mut args = strings(["-t", &tasks.to_string(), "-s", &secs]);
                    args.extend(wis_pinning_flags(&p)?);
                    let kind = if mode == "process" {
                        "processes"
                    } else {
                        "threads"
                    };
                    let mut inv = upstream(job, &format!("{test}_{kind}"), args, Tool::WillItScale);
                    inv.context.tasks = Some(tasks);
                    inv.context.threads = mode == "thread";
                    list.push(inv);
                }
            }
            list
        }
        "pipen" => return Ok(None),
        "unixbench" => {
            let passes = (p.positive("runtime")? / 10).max(1).to_string();
            vec![upstream(
                job,
                "./Run",
                strings(["pipe", "-c", &n("nr_task")?, "-i", &passes]),
                Tool::UnixBench,
            )]
        }
        "hackbench" => {
            let mut args = strings([
                "-g",
                &n("nr_threads")?,
                "-f",
                &n("fds")?,
                &format!("--{}", p.get("mode")?),
            ]);
            if p.get("ipc")? == "pipe" {
                args.push("--pipe".to_string());
            }
            args.extend(strings([
                "-l",
                &hackbench_loops(&p)?.to_string(),
                "-s",
                &n("datasize")?,
            ]));
            let mut inv = upstream(job, "hackbench", args, Tool::Hackbench);
            inv.repeat = hackbench_repeat(&p)?;
            vec![inv]
        }
        "perf-bench-sched-messaging" => {
            let mut args = strings([
                "bench",
                "sched",
                "messaging",
                "--nr_loops",
                &n("loops")?,
                "--group",
                &n("groups")?,
            ]);
            if p.get("ipc")? == "pipe" {
                args.push("--pipe".to_string());
            }
            if p.get("mode")? == "thread" {
                args.push("--thread".to_string());
            }
            vec![upstream(job, "perf", args, Tool::PerfSchedMessaging)]
        }
        "perf-bench-sched-pipe" => {
            let mut args = strings(["bench", "sched", "pipe", "-l", &n("loops")?]);
            if p.get("mode")? == "threads" {
                args.push("-T".to_string());
            }
            vec![upstream(job, "perf", args, Tool::PerfSchedPipe)]
        }
        "pipebench" => {
            // pipebench meters a pipeline stage; the data source is dd, as in
            // its README. bs=80k keeps dd's default-sized blocks out of the way.
            let bytes = p.positive("size")?;
            let count = (bytes / (80 * 1024)).max(1);
            let script = format!(
                "dd if=/dev/zero bs=80k count={count} 2>/dev/null | pipebench -q -b {} > /dev/null",
                n("bufsize")?
            );
            vec![upstream(
                job,
                "sh",
                strings(["-c", &script]),
                Tool::Pipebench,
            )]
        }
        "stress-ng" => vec![upstream(
            job,
            "stress-ng",
            strings([
                "--timeout",
                &n("testtime")?,
                "--times",
                "--verify",
                "--metrics",
                "--no-rand-seed",
                "--pipe",
                &n("nr_threads")?,
            ]),
            Tool::StressNg,
        )],
        other => return Err(unknown_program(other)),
    }))
}

pub(crate) fn unknown_program(name: &str) -> Error {
    Error::UnknownProgram {
        name: name.to_string(),
        known: program_names(),
    }
}
