//! Command lines: an atomic job and its resolved parameters turned into
//! `kbot-bench` invocations or the upstream tool's, each with the parser
//! that reads its output.

use std::collections::BTreeMap;

use crate::job::model::AtomicJob;
use crate::parsers::{ParseContext, Tool};
use crate::programs::table::unknown_program;
use crate::{Error, Result};

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

impl Invocation {
    /// Whether the tool's report is on stderr, so its output is stdout and
    /// stderr together: stress-ng writes every `info:`/`metrc:` line there,
    /// and lkp-tests' `programs/stress-ng/run` runs it with `2>&1`.
    pub fn output_includes_stderr(&self) -> bool {
        self.parser == Tool::StressNg
    }
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

/// The options `bw_pipe` (`-m`, `-M`) and `lat_pipe` share with upstream
/// lmbench: pairs (`-P`) and samples (`-N`).
fn lmbench_args(p: &Params<'_>) -> Result<Vec<String>> {
    let n = |key: &str| p.positive(key).map(|v| v.to_string());
    let mut args = Vec::new();
    if p.job.program == "bw_pipe" {
        args.extend(strings(["-m", &n("size")?, "-M", &n("total")?]));
    }
    args.extend(strings(["-P", &n("nr_threads")?, "-N", &n("repetitions")?]));
    Ok(args)
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

/// Stressors with a scheduler option of their own (`--<stressor>-sched`,
/// stress-ng's `core-opts.c`).
const STRESS_NG_OWN_SCHED: &[&str] = &[
    "cpu",
    "min-nanosleep",
    "sctp",
    "varyload",
    "workload",
    "yield",
];

/// How lkp-tests' `programs/stress-ng/run` passes `sched`: as
/// `--<test>-sched` when `stress-ng --help` lists that option, else as
/// `--workload-sched`. None of the pipe stressors has its own, so they get
/// `--workload-sched`, a setting only the workload stressor reads: the
/// stressor itself runs under the default policy, upstream and in kbot.
fn stress_ng_sched_option(test: &str) -> String {
    if STRESS_NG_OWN_SCHED.contains(&test) {
        format!("--{test}-sched")
    } else {
        "--workload-sched".to_string()
    }
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
        "bw_pipe" | "lat_pipe" => {
            // lmbench's options, then kbot-bench's own placement.
            let mut args = lmbench_args(&p)?;
            args.extend(strings(["--sched", p.get("sched")?]));
            vec![bench(job, &job.program, args)]
        }
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
            inv.context.hackbench_iterations = true;
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

/// What a guest runs for an atomic job, in run order: kbot-bench's command
/// lines, or for stress-ng (which kbot-bench does not reimplement)
/// upstream's command line as lkp-tests runs it. The agent plans a boot
/// with it, and the server reads a reproduction's output with it.
pub fn guest_invocations(
    job: &AtomicJob,
    resolved: &BTreeMap<String, String>,
) -> Result<Vec<Invocation>> {
    if job.program == "stress-ng" {
        if let Some(plan) = upstream_invocations(job, resolved)? {
            return Ok(plan);
        }
    }
    kbot_bench_invocations(job, resolved)
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
        "bw_pipe" | "lat_pipe" => {
            vec![upstream(
                job,
                &job.program,
                lmbench_args(&p)?,
                Tool::Lmbench,
            )]
        }
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
            inv.context.hackbench_iterations = true;
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
        "stress-ng" => {
            let test = p.get("test")?;
            // programs/stress-ng/run: the common options, the stressor's
            // own options, then `--<test> nr_threads`.
            let mut args = strings([
                "--timeout",
                &n("testtime")?,
                "--times",
                "--verify",
                "--metrics",
                "--no-rand-seed",
            ]);
            // The method before the scheduler, as upstream's run orders them.
            if let Some(method) = p.resolved.get("method") {
                args.extend(strings([&format!("--{test}-method"), method]));
            }
            if let Some(sched) = p.resolved.get("sched") {
                args.extend(strings([&stress_ng_sched_option(test), sched]));
            }
            args.extend(strings([&format!("--{test}"), &n("nr_threads")?]));
            vec![upstream(job, "stress-ng", args, Tool::StressNg)]
        }
        other => return Err(unknown_program(other)),
    }))
}
