//! kbot's metric names held against the names upstream LKP gives them (issue
//! #14, "Metric names").
//!
//! The upstream lists below are data written by hand from intel/lkp-tests
//! (commit bbbc29c49): each program's `programs/<p>/parse` prints
//! `<key>: <value>` lines and LKP stores them as `<testcase>.<key>`. Every
//! list names the file it came from and keeps only the cases kbot runs (the
//! pipe programs, GNU `time -v`, and the monitors kbot's agent has).
//!
//! The test drives kbot's real naming code: `kbot_core::parsers` on
//! upstream-format output (the fixtures of `core/tests/it/parsers.rs` plus a few
//! lines quoted from upstream's parse scripts), and `kbot_core::metrics`'
//! prefix and direction tables. A name kbot emits must be an upstream name
//! or be listed in the program's `kbot_only` with the reason; each listed
//! exception must still be emitted, so the list cannot go stale.
//!
//! Not covered here (other crates): the names kbot-bench prints itself
//! (`workloads/src/*.rs`, asserted by `workloads/tests/workloads.rs`; they
//! are the parsers' names below, except that kbot-bench's `pipe1` and
//! `context_switch1` also print upstream's `will-it-scale.workload`) and the
//! agent's monitors, asserted by the unit tests of `agent/src/monitors/`
//! and `agent/src/perf.rs`. Checked against upstream:
//! - `vmstat.{system.cs,system.in,cpu.us,cpu.sy,cpu.id,cpu.wa,cpu.st}` and
//!   `proc-vmstat.<counter>` match `programs/vmstat/parse` and
//!   `programs/proc-vmstat/parse`.
//! - `interrupts.<source>` matches `programs/interrupts/parse`
//!   (`interrupts.4:IO-APIC.4-edge.ttyS0`, `interrupts.LOC:Local_timer_interrupts`);
//!   upstream also prints per-CPU `CPU<n>.<source>` rows, the agent only the
//!   sum.
//! - `softirqs.<type>` and `softirqs.CPU<n>.<type>` match
//!   `programs/softirqs/parse`; `meminfo.<field>` and `meminfo.Memused`
//!   `programs/meminfo/parse` (not its `max_used_kB`);
//!   `buddyinfo.Node.<n>.zone.<zone>.<order>` `programs/buddyinfo/parse`;
//!   `slabinfo.<cache>.{active_objs,num_objs}` `programs/slabinfo/parse`
//!   (not its `active_slabs`, `num_slabs`). `schedstat.<field>` has no
//!   upstream parser: the names are the kernel's.
//! - `perf-profile.self.<event>.<symbol>` matches `programs/perf-profile/parse`
//!   (clone suffixes `.isra.N`, `.constprop.N`, `.part.N` dropped).
//! - `perf-stat.ps.<event>`, `perf-stat.total.instructions` and the
//!   `perf-stat.overall.*` rows match `programs/perf-stat/parse`; they come
//!   from `kbot_core::parsers::perf_stat`, which the agent calls and
//!   `perf_stat_names_are_lkps` below drives. Upstream's per-interval
//!   `i.<event>` rows have no counterpart (kbot counts no intervals).

use std::collections::BTreeSet;
use std::path::Path;

use kbot_core::metrics::{direction, is_kpi, is_monitor, is_perf_metric, Direction};
use kbot_core::parsers::{parse, Metrics, ParseContext, Tool};

/// One program: the names upstream's parse script prints (after
/// `<testcase>.`; a `<N>` segment stands for a task or instance count), and
/// the names kbot adds that upstream does not have, with the reason.
struct Program {
    testcase: &'static str,
    upstream: &'static [&'static str],
    kbot_only: &'static [(&'static str, &'static str)],
}

/// intel/lkp-tests programs/lmbench3/parse: the PIPE and AF_UNIX cases
/// (`PIPE.latency.us`, `PIPE.bandwidth.MB/sec`,
/// `AF_UNIX.sock.stream.{latency.us,bandwidth.MB/sec}`).
const LMBENCH3: Program = Program {
    testcase: "lmbench3",
    upstream: &[
        "PIPE.latency.us",
        "PIPE.bandwidth.MB/sec",
        "AF_UNIX.sock.stream.latency.us",
        "AF_UNIX.sock.stream.bandwidth.MB/sec",
    ],
    kbot_only: &[],
};

/// intel/lkp-tests programs/will-it-scale/parse: one `<nr_task>.<column>`
/// per runtest.py CSV column, then `scalability`, `per_process_ops`,
/// `per_thread_ops`, `workload`.
const WILL_IT_SCALE: Program = Program {
    testcase: "will-it-scale",
    upstream: &[
        "<N>.processes",
        "<N>.processes_idle",
        "<N>.threads",
        "<N>.threads_idle",
        "<N>.linear",
        "scalability",
        "per_process_ops",
        "per_thread_ops",
        "workload",
    ],
    kbot_only: &[],
};

/// intel/lkp-tests programs/unixbench/parse: `score` (when the index line is
/// there), `throughput`, `workload`, and `test.pass` / `test.fail`.
const UNIXBENCH: Program = Program {
    testcase: "unixbench",
    upstream: &["score", "throughput", "workload", "test.pass", "test.fail"],
    kbot_only: &[],
};

/// intel/lkp-tests programs/hackbench/parse: `throughput` (best time),
/// `throughput_best`, `throughput_avg`, `throughput_worst`, and per instance
/// `throughput.instance<N>` etc. (only with several instances).
const HACKBENCH: Program = Program {
    testcase: "hackbench",
    upstream: &[
        "throughput",
        "throughput_best",
        "throughput_avg",
        "throughput_worst",
    ],
    kbot_only: &[(
        "time_sec",
        "mean Time: of the runs; kbot's own, lower-is-better, also printed by kbot-bench messaging",
    )],
};

/// intel/lkp-tests programs/perf-bench-sched-pipe/parse: `ops_per_sec` only.
const PERF_SCHED_PIPE: Program = Program {
    testcase: "perf-bench-sched-pipe",
    upstream: &["ops_per_sec"],
    kbot_only: &[
        (
            "usecs_per_op",
            "perf's `usecs/op` line, which upstream's parse ignores; kbot-bench sched-pipe prints it too",
        ),
        (
            "total_time_sec",
            "perf's `Total time:` line, which upstream's parse ignores; kbot-bench sched-pipe prints it too",
        ),
    ],
};

/// intel/lkp-tests programs/perf-bench-sched-messaging/parse: `total_time_sec`.
const PERF_SCHED_MESSAGING: Program = Program {
    testcase: "perf-bench-sched-messaging",
    upstream: &["total_time_sec"],
    kbot_only: &[],
};

/// intel/lkp-tests programs/stress-ng/parse for the pipe stressors kbot
/// plans (pipe, pthread, pipeherd, ring-pipe, switch with method pipe):
/// `<stressor>.{pass,fail,ops,ops_per_sec}` from the bogo-ops table and
/// `<stressor>.<unit>{,.pass,.fail}` from the miscellaneous metrics, the unit
/// normalised by lib/tests/stats.rb `normalize` ("MB per sec pipe write
/// rate" becomes `MB_per_sec_pipe_write_rate`, "pipe read+write calls per
/// sec" `pipe_read+write_calls_per_sec`). The units are stress-ng's
/// (`stress_metrics_set` in stress-pipe.c, stress-pthread.c,
/// stress-pipeherd.c, stress-ring-pipe.c); `context_switches_per_second` is
/// an older stress-ng's wording, in upstream's
/// spec/fixtures/stats/stress-ng/01.yaml.
const STRESS_NG: Program = Program {
    testcase: "stress-ng",
    upstream: &[
        "pipe.pass",
        "pipe.fail",
        "pipe.ops",
        "pipe.ops_per_sec",
        "pipe.MB_per_sec_pipe_write_rate",
        "pipe.MB_per_sec_pipe_write_rate.pass",
        "pipe.MB_per_sec_pipe_write_rate.fail",
        "pthread.pass",
        "pthread.ops",
        "pthread.ops_per_sec",
        "pthread.nanosecs_to_start_a_pthread",
        "pthread.nanosecs_to_start_a_pthread.pass",
        "pthread.%_of_4096_pthreads_created",
        "pthread.%_of_4096_pthreads_created.pass",
        "pipeherd.pass",
        "pipeherd.ops",
        "pipeherd.ops_per_sec",
        "pipeherd.context_switches_per_bogo_op",
        "pipeherd.context_switches_per_bogo_op.pass",
        "pipeherd.context_switches_per_sec",
        "pipeherd.context_switches_per_sec.pass",
        "pipeherd.context_switches_per_second",
        "pipeherd.context_switches_per_second.pass",
        "ring-pipe.pass",
        "ring-pipe.ops",
        "ring-pipe.ops_per_sec",
        "ring-pipe.pipe_read+write_calls_per_sec",
        "ring-pipe.pipe_read+write_calls_per_sec.pass",
        "ring-pipe.MB_per_sec_data_pipe_write",
        "ring-pipe.MB_per_sec_data_pipe_write.pass",
        "switch.pass",
        "switch.ops",
        "switch.ops_per_sec",
        "switch.nanosecs_per_context_switch_pipe_method",
        "switch.nanosecs_per_context_switch_pipe_method.pass",
    ],
    kbot_only: &[],
};

/// intel/lkp-tests programs/time/parse: GNU `time -v` keys, lower-cased,
/// `(...)` dropped and blanks turned into `_`, stored as `<testcase>.time.*`.
const TIME: Program = Program {
    testcase: "hackbench.time",
    upstream: &[
        "user_time",
        "system_time",
        "percent_of_cpu_this_job_got",
        "elapsed_time",
        "average_shared_text_size",
        "average_unshared_data_size",
        "average_stack_size",
        "average_total_size",
        "maximum_resident_set_size",
        "average_resident_set_size",
        "major_page_faults",
        "minor_page_faults",
        "voluntary_context_switches",
        "involuntary_context_switches",
        "swaps",
        "file_system_inputs",
        "file_system_outputs",
        "socket_messages_sent",
        "socket_messages_received",
        "signals_delivered",
        "page_size",
        "exit_status",
    ],
    kbot_only: &[],
};

/// pipebench has no program in intel/lkp-tests: all of its names are kbot's.
const PIPEBENCH: Program = Program {
    testcase: "pipebench",
    upstream: &[],
    kbot_only: &[
        (
            "MB/sec",
            "no upstream pipebench program; named like lmbench3's MB/sec",
        ),
        ("bytes", "no upstream pipebench program"),
        ("elapsed_sec", "no upstream pipebench program"),
    ],
};

/// Whether `name` (after the testcase) is the upstream `pattern`: equal
/// dot-separated segments, `<N>` matching a decimal count.
fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), name.split('.').collect());
    p.len() == n.len()
        && p.iter().zip(&n).all(|(p, n)| {
            *p == *n || (*p == "<N>" && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn run(tool: Tool, ctx: &ParseContext, text: &str) -> Metrics {
    parse(tool, text, ctx).unwrap_or_else(|e| panic!("{tool:?} on {text:?}: {e}"))
}

/// Parses every output with the program's prefix and checks the names; also
/// checks that `want` (upstream names the samples must produce) are there.
fn check(program: &Program, outputs: &[(Tool, ParseContext, String)], want: &[&str]) {
    let prefix = format!("{}.", program.testcase);
    let mut seen = BTreeSet::new();
    for (tool, ctx, text) in outputs {
        assert_eq!(
            ctx.prefix, program.testcase,
            "sample for the wrong testcase"
        );
        for name in run(*tool, ctx, text).into_keys() {
            let key = name
                .strip_prefix(&prefix)
                .unwrap_or_else(|| panic!("{name} lacks the prefix {prefix}"))
                .to_string();
            let upstream = program.upstream.iter().any(|p| matches(p, &key));
            let listed = program.kbot_only.iter().any(|(k, _)| *k == key);
            assert!(
                upstream != listed,
                "{name}: upstream name: {upstream}, listed as kbot-only: {listed}"
            );
            seen.insert(key);
        }
    }
    for key in want {
        assert!(
            program.upstream.iter().any(|p| matches(p, key)),
            "{key} is not in the upstream list of {}",
            program.testcase
        );
        assert!(seen.contains(*key), "{prefix}{key} not emitted: {seen:?}");
    }
    for (key, reason) in program.kbot_only {
        assert!(
            seen.contains(*key),
            "{prefix}{key} is listed as kbot-only ({reason}) but no longer emitted"
        );
    }
}

fn ctx(prefix: &str) -> ParseContext {
    ParseContext::new(prefix)
}

fn sample(tool: Tool, prefix: &str, text: impl Into<String>) -> (Tool, ParseContext, String) {
    (tool, ctx(prefix), text.into())
}

#[test]
fn lmbench3_pipe_names() {
    let p = &LMBENCH3;
    check(
        p,
        &[
            sample(Tool::Lmbench, p.testcase, fixture("lmbench-bw_pipe.txt")),
            sample(Tool::Lmbench, p.testcase, fixture("lmbench-lat_pipe.txt")),
            sample(
                Tool::Lmbench,
                p.testcase,
                fixture("lmbench-results-pipe.txt"),
            ),
            // The sample lines of upstream's parse script.
            sample(
                Tool::Lmbench,
                p.testcase,
                "AF_UNIX sock stream latency: 6.2302 microseconds\n\
                 AF_UNIX sock stream bandwidth: 7058.07 MB/sec\n",
            ),
        ],
        p.upstream,
    );
}

#[test]
fn will_it_scale_names() {
    let p = &WILL_IT_SCALE;
    let harness = fixture("will-it-scale-pipe1-processes.txt");
    let processes = ParseContext {
        prefix: p.testcase.into(),
        tasks: Some(2),
        ..ParseContext::default()
    };
    let threads = ParseContext {
        threads: true,
        ..processes.clone()
    };
    check(
        p,
        &[
            (Tool::WillItScale, processes, harness.clone()),
            (Tool::WillItScale, threads, harness),
            sample(
                Tool::WillItScale,
                p.testcase,
                fixture("will-it-scale-runtest.csv"),
            ),
        ],
        &[
            "per_process_ops",
            "per_thread_ops",
            "scalability",
            "1.processes",
            "2.processes_idle",
            "2.threads",
            "2.threads_idle",
            "2.linear",
        ],
    );
}

#[test]
fn unixbench_names() {
    let p = &UNIXBENCH;
    check(
        p,
        &[sample(
            Tool::UnixBench,
            p.testcase,
            fixture("unixbench-pipe.txt"),
        )],
        &["score", "throughput", "workload"],
    );
}

#[test]
fn hackbench_names() {
    let p = &HACKBENCH;
    check(
        p,
        &[
            sample(
                Tool::Hackbench,
                p.testcase,
                fixture("hackbench-pipe-process.txt"),
            ),
            sample(
                Tool::Hackbench,
                p.testcase,
                fixture("hackbench-pipe-process-3runs.txt"),
            ),
            sample(
                Tool::Hackbench,
                p.testcase,
                fixture("hackbench-socket-threads.txt"),
            ),
        ],
        p.upstream,
    );
}

#[test]
fn perf_bench_sched_names() {
    let p = &PERF_SCHED_PIPE;
    check(
        p,
        &[
            sample(
                Tool::PerfSchedPipe,
                p.testcase,
                fixture("perf-sched-pipe.txt"),
            ),
            sample(
                Tool::PerfSchedPipe,
                p.testcase,
                fixture("perf-sched-pipe-threads.txt"),
            ),
        ],
        p.upstream,
    );
    let p = &PERF_SCHED_MESSAGING;
    check(
        p,
        &[
            sample(
                Tool::PerfSchedMessaging,
                p.testcase,
                fixture("perf-sched-messaging-pipe.txt"),
            ),
            sample(
                Tool::PerfSchedMessaging,
                p.testcase,
                fixture("perf-sched-messaging-socket-thread.txt"),
            ),
        ],
        p.upstream,
    );
}

#[test]
fn stress_ng_pipe_names() {
    let p = &STRESS_NG;
    // A pipe stressor whose bogo-ops and rate are zero (upstream's `.fail`
    // rows), in the --metrics format of the captured fixture.
    let failed = "\
stress-ng: metrc: [17121] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s CPU used per       RSS Max
stress-ng: metrc: [17121]                           (secs)    (secs)    (secs)   (real time) (usr+sys time) instance (%)          (KB)
stress-ng: metrc: [17121] pipe                  0      2.00      0.97      1.24         0.00           0.00        55.20          2408
stress-ng: metrc: [17121] miscellaneous metrics:
stress-ng: metrc: [17121] pipe                   0.00 MB per sec pipe write rate (geometic mean of 2 instances)
stress-ng: info:  [17121] for a 2.00s run time:
";
    check(
        p,
        &[
            sample(
                Tool::StressNg,
                p.testcase,
                fixture("stress-ng-pipe-metrics.txt"),
            ),
            sample(
                Tool::StressNg,
                p.testcase,
                fixture("stress-ng-pipe-metrics-brief.txt"),
            ),
            sample(Tool::StressNg, p.testcase, failed),
            sample(Tool::StressNg, p.testcase, PIPE_FAMILY),
            sample(Tool::StressNg, p.testcase, UPSTREAM_PIPEHERD),
            sample(
                Tool::StressNg,
                p.testcase,
                fixture("stress-ng-switch-metrics.txt"),
            ),
        ],
        p.upstream,
    );
}

/// pthread, pipeherd and ring-pipe in stress-ng's `--metrics` format, with
/// the units their sources print.
const PIPE_FAMILY: &str = "\
stress-ng: metrc: [2759] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s CPU used per       RSS Max
stress-ng: metrc: [2759]                           (secs)    (secs)    (secs)   (real time) (usr+sys time) instance (%)          (KB)
stress-ng: metrc: [2759] pipeherd       31374714     60.03      8.84    298.78    522650.08      101991.79        52.10          2048
stress-ng: metrc: [2759] pthread          123456     60.00     10.00     50.00      2057.60        2057.60        50.00          4096
stress-ng: metrc: [2759] ring-pipe      98765432     60.00     20.00     40.00   1646090.53     1646090.53        50.00          1024
stress-ng: metrc: [2759] miscellaneous metrics:
stress-ng: metrc: [2759] pipeherd           1.01 context switches per bogo op (average per stressor)
stress-ng: metrc: [2759] pipeherd      262868.42 context switches per sec (average per stressor)
stress-ng: metrc: [2759] pthread        35123.40 nanosecs to start a pthread (harmonic mean of 8 instances)
stress-ng: metrc: [2759] pthread          100.00 % of 4096 pthreads created (geometric mean of 8 instances)
stress-ng: metrc: [2759] ring-pipe    1646090.53 pipe read+write calls per sec (harmonic mean of 8 instances)
stress-ng: metrc: [2759] ring-pipe          6.43 MB per sec data pipe write (harmonic mean of 8 instances)
stress-ng: info:  [2759] for a 60.00s run time:
";

/// pipeherd's rows of lkp-tests' spec/fixtures/stats/stress-ng/01 (an older
/// stress-ng, `--metrics-brief`), which upstream's parse turns into the
/// names of 01.yaml.
const UPSTREAM_PIPEHERD: &str = "\
stress-ng: info:  [2759] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: info:  [2759]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: info:  [2759] pipeherd       31374714      5.03      8.84    298.78   6235302.61      101991.79
stress-ng: info:  [2759] pipeherd           1.01 context switches per bogo op (average per stressor)
stress-ng: info:  [2759] pipeherd      262868.42 context switches per second (average per stressor)
stress-ng: info:  [2759] for a 247.66s run time:
";

#[test]
fn stress_ng_pipe_family_values_are_upstreams() {
    let m = run(Tool::StressNg, &ctx("stress-ng"), UPSTREAM_PIPEHERD);
    // spec/fixtures/stats/stress-ng/01.yaml
    for (name, want) in [
        ("stress-ng.pipeherd.pass", 1.0),
        ("stress-ng.pipeherd.ops", 31374714.0),
        ("stress-ng.pipeherd.ops_per_sec", 6235302.61),
        ("stress-ng.pipeherd.context_switches_per_bogo_op.pass", 1.0),
        ("stress-ng.pipeherd.context_switches_per_bogo_op", 1.01),
        ("stress-ng.pipeherd.context_switches_per_second.pass", 1.0),
        ("stress-ng.pipeherd.context_switches_per_second", 262868.42),
    ] {
        assert_eq!(m.get(name), Some(&want), "{name}: {m:?}");
    }
    assert_eq!(m.len(), 7, "{m:?}");
}

#[test]
fn gnu_time_names() {
    let p = &TIME;
    check(
        p,
        &[sample(
            Tool::GnuTime,
            p.testcase,
            fixture("time-v-hackbench.txt"),
        )],
        p.upstream,
    );
}

#[test]
fn pipebench_names_are_kbots_own() {
    let p = &PIPEBENCH;
    check(
        p,
        &[
            sample(Tool::Pipebench, p.testcase, fixture("pipebench-q.txt")),
            sample(
                Tool::Pipebench,
                p.testcase,
                fixture("pipebench-progress.txt"),
            ),
        ],
        &[],
    );
}

/// Directions kbot's table gives the upstream names that upstream's
/// etc/index-perf-all.yaml (`1`) and etc/index-latency-all.yaml (`-0.1`)
/// list, for the programs above.
#[test]
fn directions_follow_upstream_index_tables() {
    use Direction::{HigherIsBetter, LowerIsBetter};
    let upstream = [
        // index-perf-all.yaml `lmbench3\..+\.MB\/sec: 1`
        ("lmbench3.PIPE.bandwidth.MB/sec", HigherIsBetter),
        (
            "lmbench3.AF_UNIX.sock.stream.bandwidth.MB/sec",
            HigherIsBetter,
        ),
        // index-latency-all.yaml `lmbench3\..+\.latency.us: -0.1`
        ("lmbench3.PIPE.latency.us", LowerIsBetter),
        ("lmbench3.AF_UNIX.sock.stream.latency.us", LowerIsBetter),
        // index-perf-all.yaml `will-it-scale\..+_ops: 1`
        ("will-it-scale.per_process_ops", HigherIsBetter),
        ("will-it-scale.per_thread_ops", HigherIsBetter),
        // index-perf-all.yaml `unixbench\.score: 1`, `.+\.throughput: 1`
        ("unixbench.score", HigherIsBetter),
        ("unixbench.throughput", HigherIsBetter),
        ("hackbench.throughput", HigherIsBetter),
        // index-perf-all.yaml `perf-bench-sched-pipe\.ops_per_sec: 1`
        ("perf-bench-sched-pipe.ops_per_sec", HigherIsBetter),
        // index-perf-all.yaml `stress-ng\..+_per_sec: 1`
        ("stress-ng.pipe.ops_per_sec", HigherIsBetter),
        (
            "stress-ng.pipeherd.context_switches_per_sec",
            HigherIsBetter,
        ),
        (
            "stress-ng.ring-pipe.pipe_read+write_calls_per_sec",
            HigherIsBetter,
        ),
    ];
    for (name, want) in upstream {
        assert_eq!(direction(name), want, "{name}");
        assert!(is_kpi(name), "{name} is the benchmark's own metric");
        assert!(is_perf_metric(name), "{name}");
    }
    // index-perf-all.yaml `will-it-scale\.scalability: 1`: higher is
    // better, and not through a generic suffix (it has none of them).
    assert_eq!(
        direction("will-it-scale.scalability"),
        Direction::HigherIsBetter
    );
    assert_eq!(
        direction("will-it-scale.16.scalability"),
        Direction::Undefined
    );
    // programs/hackbench/parse's other throughputs: upstream's index has
    // no entry that reaches them (`.+\.throughput` is anchored); kbot's
    // table calls them higher-is-better, like `throughput`.
    for name in [
        "hackbench.throughput_best",
        "hackbench.throughput_avg",
        "hackbench.throughput_worst",
    ] {
        assert_eq!(direction(name), HigherIsBetter, "{name}");
        assert!(is_kpi(name) && is_perf_metric(name), "{name}");
    }
    // stress-ng's units without a `_per_sec` (or `_per_item`, `_per_seek`)
    // suffix have no direction upstream, nor in kbot; its `.pass` and
    // `.fail` are function stats, neither KPIs nor directed.
    for name in [
        "stress-ng.pipeherd.context_switches_per_bogo_op",
        "stress-ng.ring-pipe.MB_per_sec_data_pipe_write",
        "stress-ng.pipe.pass",
        "stress-ng.pipe.fail",
    ] {
        assert_eq!(direction(name), Direction::Undefined, "{name}");
    }
    assert!(!is_kpi("stress-ng.pipe.pass") && !is_kpi("stress-ng.pipe.fail"));
}

/// The monitor names kbot's agent emits are monitors in kbot's tables; the
/// perf metrics among them are those of upstream's etc/perf-metrics-prefixes
/// (`vmstat.cpu.`, `vmstat.system.`, `proc-vmstat.`, `perf-stat.`, and the
/// one perf-profile row and one interrupts row it lists).
#[test]
fn monitor_names_are_monitors() {
    // intel/lkp-tests programs/vmstat/parse `keys`: the ones the agent
    // computes from /proc/stat.
    let vmstat = [
        "vmstat.system.in",
        "vmstat.system.cs",
        "vmstat.cpu.us",
        "vmstat.cpu.sy",
        "vmstat.cpu.id",
        "vmstat.cpu.wa",
        "vmstat.cpu.st",
    ];
    let others = [
        // programs/proc-vmstat/parse: `<key>` of /proc/vmstat
        "proc-vmstat.pgfault",
        "proc-vmstat.nr_free_pages",
        // programs/interrupts/parse: named sources join with `_`
        "interrupts.CAL:Function_call_interrupts",
        // programs/perf-stat/parse: `ps.<event>`, `total.instructions`
        "perf-stat.ps.context-switches",
        "perf-stat.total.instructions",
        // lib/matrix.rb add_path_length
        "perf-stat.overall.path-length",
        "perf-profile.children.cycles-pp.native_queued_spin_lock_slowpath",
    ];
    // Monitors' stats that etc/perf-metrics-prefixes does not list: they
    // need a 5% change.
    let not_perf = [
        "interrupts.4:IO-APIC.4-edge.ttyS0",
        "interrupts.LOC:Local_timer_interrupts",
        // programs/perf-profile/parse: `self.<event>.<symbol>`, event
        // `cycles:pp` with `:` turned into `-`
        "perf-profile.self.cycles-pp.pipe_write",
        // programs/softirqs/parse, meminfo/parse, buddyinfo/parse,
        // slabinfo/parse; kbot's own /proc/schedstat monitor.
        "softirqs.NET_RX",
        "softirqs.CPU0.SCHED",
        "meminfo.Active(anon)",
        "meminfo.Memused",
        "buddyinfo.Node.0.zone.Normal.3",
        "slabinfo.kmalloc-64.active_objs",
        "schedstat.ttwu_count",
    ];
    for name in vmstat.iter().chain(&others).chain(&not_perf) {
        assert!(is_monitor(name), "{name}");
        assert!(!is_kpi(name), "{name}");
    }
    for name in vmstat.iter().chain(&others) {
        assert!(is_perf_metric(name), "{name}");
    }
    for name in not_perf {
        assert!(!is_perf_metric(name), "{name}");
    }
    // etc/index-perf-all.yaml and etc/index-latency-all.yaml give vmstat no
    // direction; neither does kbot.
    for name in vmstat {
        assert_eq!(direction(name), Direction::Undefined, "{name}");
    }
}

#[test]
fn upstream_patterns_match_counts_only() {
    assert!(matches("<N>.processes", "16.processes"));
    assert!(!matches("<N>.processes", "x.processes"));
    assert!(!matches("<N>.processes", "processes"));
    assert!(matches("PIPE.bandwidth.MB/sec", "PIPE.bandwidth.MB/sec"));
}

/// intel/lkp-tests programs/perf-stat/parse on the monitor's default events
/// (programs/perf-stat/monitor): `ps.<event>` for every event counted,
/// `total.instructions`, and from the totals `overall.<stem>-miss-rate%`
/// (`<stem>-misses` over `<stem>s` + misses, `<stem>-references` or
/// `<stem>-instructions`), `overall.cycles-between-cache-misses`,
/// `overall.MPKI`, `overall.instructions-per-iTLB-miss`, `overall.ipc` and
/// `overall.cpi`.
const PERF_STAT_OVERALL: &[&str] = &[
    "cache-miss-rate%",
    "branch-miss-rate%",
    "dTLB-load-miss-rate%",
    "dTLB-store-miss-rate%",
    "iTLB-load-miss-rate%",
    "cycles-between-cache-misses",
    "MPKI",
    "instructions-per-iTLB-miss",
    "ipc",
    "cpi",
];

#[test]
fn perf_stat_names_are_lkps() {
    use kbot_core::parsers::perf_stat::{add_path_length, counts, lkp_metrics, LKP_EVENTS};
    // What `perf stat -x,` prints for every event the agent asks for.
    let csv: String = LKP_EVENTS
        .iter()
        .enumerate()
        .map(|(i, e)| format!("{},,{e},1000,100.00,,\n", 1000 * (i + 1)))
        .collect();
    let m = lkp_metrics(&counts(&csv), 2.0);
    let mut upstream: BTreeSet<String> = LKP_EVENTS
        .iter()
        .map(|e| format!("perf-stat.ps.{e}"))
        .collect();
    upstream.insert("perf-stat.total.instructions".into());
    upstream.extend(
        PERF_STAT_OVERALL
            .iter()
            .map(|k| format!("perf-stat.overall.{k}")),
    );
    let emitted: BTreeSet<String> = m.keys().cloned().collect();
    assert_eq!(emitted, upstream);
    for name in &emitted {
        assert!(
            is_monitor(name) && is_perf_metric(name) && !is_kpi(name),
            "{name}"
        );
    }
    // lib/matrix.rb `add_path_length`: with the run's one `*.workload`.
    let mut run = m.clone();
    run.insert("will-it-scale.workload".into(), 1e6);
    add_path_length(&mut run);
    let added: Vec<&String> = run.keys().filter(|k| !m.contains_key(*k)).collect();
    assert_eq!(
        added,
        ["perf-stat.overall.path-length", "will-it-scale.workload"]
    );
    assert_eq!(
        run["perf-stat.overall.path-length"],
        m["perf-stat.total.instructions"] / 1e6
    );
    assert_eq!(
        direction("perf-stat.overall.path-length"),
        Direction::LowerIsBetter
    );
}
