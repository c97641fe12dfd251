//! Every parser on real (or upstream-format) output; see fixtures/README.md.

use std::path::Path;

use kbot_core::parsers::{parse, Metrics, ParseContext, Tool};
use kbot_core::Error;

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn run(tool: Tool, prefix: &str, name: &str) -> Metrics {
    parse(tool, &fixture(name), &ParseContext::new(prefix))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn assert_metric(m: &Metrics, key: &str, want: f64) {
    let got = *m
        .get(key)
        .unwrap_or_else(|| panic!("{key} missing from {m:?}"));
    assert!(
        (got - want).abs() <= want.abs() * 1e-9,
        "{key}: got {got}, want {want}"
    );
}

#[test]
fn lmbench_pipe_lines() {
    let bw = run(Tool::Lmbench, "lmbench3", "lmbench-bw_pipe.txt");
    assert_metric(&bw, "lmbench3.PIPE.bandwidth.MB/sec", 3042.74);
    assert_eq!(bw.len(), 1);
    let lat = run(Tool::Lmbench, "lmbench3", "lmbench-lat_pipe.txt");
    assert_metric(&lat, "lmbench3.PIPE.latency.us", 7.9239);
    let both = run(Tool::Lmbench, "lmbench3", "lmbench-results-pipe.txt");
    assert_metric(&both, "lmbench3.PIPE.bandwidth.MB/sec", 29142.17);
    assert_metric(&both, "lmbench3.PIPE.latency.us", 23.6719);
    assert_eq!(both.len(), 2);
}

#[test]
fn will_it_scale_harness_and_csv() {
    let text = fixture("will-it-scale-pipe1-processes.txt");
    let ctx = ParseContext {
        prefix: "will-it-scale".into(),
        tasks: Some(2),
        threads: false,
        hackbench_iterations: false,
    };
    let m = parse(Tool::WillItScale, &text, &ctx).expect("parses");
    // LKP: average / nr_task, printed with %d.
    assert_metric(&m, "will-it-scale.per_process_ops", 1_605_579.0);
    assert_metric(&m, "will-it-scale.2.processes", 3_211_158.0);
    let threads = ParseContext {
        threads: true,
        ..ctx.clone()
    };
    let m = parse(Tool::WillItScale, &text, &threads).expect("parses");
    assert!(m.contains_key("will-it-scale.per_thread_ops"));
    let no_tasks = ParseContext { tasks: None, ..ctx };
    assert!(parse(Tool::WillItScale, &text, &no_tasks).is_err());

    let csv = run(
        Tool::WillItScale,
        "will-it-scale",
        "will-it-scale-runtest.csv",
    );
    assert_metric(&csv, "will-it-scale.per_process_ops", 1_605_495.0);
    assert_metric(&csv, "will-it-scale.per_thread_ops", 1_596_102.0);
    assert_metric(&csv, "will-it-scale.1.processes", 1_605_412.0);
    assert_metric(&csv, "will-it-scale.2.threads_idle", 0.35);
    assert_metric(&csv, "will-it-scale.scalability", 3_211_158.0 / 3_210_824.0);
}

#[test]
fn unixbench_report() {
    let m = run(Tool::UnixBench, "unixbench", "unixbench-pipe.txt");
    assert_metric(&m, "unixbench.throughput", 2_612_345.6);
    assert_metric(&m, "unixbench.score", 2100.0);
    // 23:56:40 → 00:01:42 wraps past midnight: 302 s.
    assert_metric(&m, "unixbench.workload", 302.0 * 2_612_345.6);
}

#[test]
fn hackbench_runs() {
    let m = run(Tool::Hackbench, "hackbench", "hackbench-pipe-process.txt");
    // (80 tasks * 200 messages * 100 bytes) >> 10 = 1562.
    assert_metric(&m, "hackbench.throughput", 1562.0 / 0.118);
    assert_metric(&m, "hackbench.time_sec", 0.118);
    let m = run(Tool::Hackbench, "hackbench", "hackbench-socket-threads.txt");
    assert_metric(&m, "hackbench.throughput", 1562.0 / 0.416);
    let m = run(
        Tool::Hackbench,
        "hackbench",
        "hackbench-pipe-process-3runs.txt",
    );
    assert_metric(&m, "hackbench.throughput", 1562.0 / 0.105);
    assert_metric(&m, "hackbench.throughput_best", 1562.0 / 0.105);
    assert_metric(&m, "hackbench.throughput_worst", 1562.0 / 0.139);
    let avg = (0.139 + 0.127 + 0.105) / 3.0;
    assert_metric(
        &m,
        "hackbench.throughput_avg",
        ((1562.0 / avg) * 100.0_f64).round() / 100.0,
    );
}

#[test]
fn perf_bench_sched() {
    let m = run(
        Tool::PerfSchedMessaging,
        "perf-bench-sched-messaging",
        "perf-sched-messaging-pipe.txt",
    );
    assert_metric(&m, "perf-bench-sched-messaging.total_time_sec", 0.088);
    let m = run(
        Tool::PerfSchedMessaging,
        "perf-bench-sched-messaging",
        "perf-sched-messaging-socket-thread.txt",
    );
    assert_metric(&m, "perf-bench-sched-messaging.total_time_sec", 0.098);
    let simple =
        parse(Tool::PerfSchedMessaging, "0.091\n", &ParseContext::new("p")).expect("simple format");
    assert_metric(&simple, "p.total_time_sec", 0.091);

    let m = run(
        Tool::PerfSchedPipe,
        "perf-bench-sched-pipe",
        "perf-sched-pipe.txt",
    );
    assert_metric(&m, "perf-bench-sched-pipe.ops_per_sec", 190_790.0);
    assert_metric(&m, "perf-bench-sched-pipe.usecs_per_op", 5.241350);
    assert_metric(&m, "perf-bench-sched-pipe.total_time_sec", 0.524);
    let m = run(
        Tool::PerfSchedPipe,
        "perf-bench-sched-pipe",
        "perf-sched-pipe-threads.txt",
    );
    assert_metric(&m, "perf-bench-sched-pipe.ops_per_sec", 247_798.0);
}

#[test]
fn stress_ng_metrics_and_brief() {
    let m = run(Tool::StressNg, "stress-ng", "stress-ng-pipe-metrics.txt");
    assert_metric(&m, "stress-ng.pipe.ops", 1_045_991.0);
    assert_metric(&m, "stress-ng.pipe.ops_per_sec", 522_830.34);
    assert_metric(&m, "stress-ng.pipe.pass", 1.0);
    assert_metric(&m, "stress-ng.pipe.MB_per_sec_pipe_write_rate", 126.77);
    assert_eq!(m.len(), 5, "{m:?}");
    let m = run(
        Tool::StressNg,
        "stress-ng",
        "stress-ng-pipe-metrics-brief.txt",
    );
    assert_metric(&m, "stress-ng.pipe.ops", 617_833.0);
    assert_metric(&m, "stress-ng.pipe.ops_per_sec", 308_821.08);
    assert_metric(&m, "stress-ng.pipe.MB_per_sec_pipe_write_rate", 150.87);
    let zero = fixture("stress-ng-pipe-metrics-brief.txt").replace("617833", "0");
    let m = parse(Tool::StressNg, &zero, &ParseContext::new("stress-ng")).expect("parses");
    assert_metric(&m, "stress-ng.pipe.fail", 1.0);
    assert!(!m.contains_key("stress-ng.pipe.ops"));
}

/// switch with `--switch-method pipe`, as the guest runs it (the report is
/// on stress-ng's stderr, which the run merges as upstream's `2>&1` does):
/// the method in parentheses stays in the unit, as upstream's normalize
/// keeps it (`nanosecs_per_context_switch_pipe_method`).
#[test]
fn stress_ng_switch_pipe_method() {
    let m = run(Tool::StressNg, "stress-ng", "stress-ng-switch-metrics.txt");
    assert_metric(&m, "stress-ng.switch.pass", 1.0);
    assert_metric(&m, "stress-ng.switch.ops", 1_515_351.0);
    assert_metric(&m, "stress-ng.switch.ops_per_sec", 757_539.63);
    assert_metric(
        &m,
        "stress-ng.switch.nanosecs_per_context_switch_pipe_method",
        2652.52,
    );
    assert_metric(
        &m,
        "stress-ng.switch.nanosecs_per_context_switch_pipe_method.pass",
        1.0,
    );
    assert_eq!(m.len(), 5, "{m:?}");
}

#[test]
fn pipebench_summary() {
    let m = run(Tool::Pipebench, "pipebench", "pipebench-q.txt");
    assert_metric(&m, "pipebench.MB/sec", 2.91 * 1024.0);
    assert_metric(&m, "pipebench.bytes", 480.0 * 1024.0 * 1024.0);
    assert_metric(&m, "pipebench.elapsed_sec", 0.16);
    let m = run(Tool::Pipebench, "pipebench", "pipebench-progress.txt");
    assert_metric(&m, "pipebench.MB/sec", 887.53);
}

#[test]
fn gnu_time_like_lkp() {
    let m = run(Tool::GnuTime, "hackbench.time", "time-v-hackbench.txt");
    assert_metric(&m, "hackbench.time.user_time", 0.07);
    assert_metric(&m, "hackbench.time.system_time", 0.03);
    assert_metric(&m, "hackbench.time.elapsed_time", 0.14);
    assert_metric(&m, "hackbench.time.percent_of_cpu_this_job_got", 76.0);
    assert_metric(&m, "hackbench.time.maximum_resident_set_size", 1500.0);
    assert_metric(&m, "hackbench.time.minor_page_faults", 1185.0);
    assert_metric(&m, "hackbench.time.major_page_faults", 0.0);
    assert_metric(&m, "hackbench.time.voluntary_context_switches", 2153.0);
    assert_metric(&m, "hackbench.time.involuntary_context_switches", 1221.0);
    assert_metric(&m, "hackbench.time.page_size", 4096.0);
    assert_eq!(m.len(), 22, "{:?}", m.keys().collect::<Vec<_>>());
    let m = run(Tool::GnuTime, "t", "time-v-false.txt");
    assert_metric(&m, "t.exit_status", 2.0);

    let hours = "\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.50\n\tPercent of CPU this job got: ?%\n";
    let m = parse(Tool::GnuTime, hours, &ParseContext::new("x.time")).expect("parses");
    assert_metric(&m, "x.time.elapsed_time", 3723.5);
    assert_metric(&m, "x.time.percent_of_cpu_this_job_got", 0.0);

    // Two commands of one job: counters add up, max RSS is the maximum.
    let twice = format!(
        "{}{}",
        fixture("time-v-hackbench.txt"),
        fixture("time-v-false.txt")
    );
    let m = parse(Tool::GnuTime, &twice, &ParseContext::new("j.time")).expect("parses");
    assert_metric(&m, "j.time.voluntary_context_switches", 2154.0);
    assert_metric(&m, "j.time.maximum_resident_set_size", 1560.0);
    assert_metric(&m, "j.time.exit_status", 2.0);
}

#[test]
fn kbot_bench_json() {
    let out = r#"{"tool":"bw_pipe","metrics":{"lmbench3.PIPE.bandwidth.MB/sec":29142.0,"lmbench3.time.elapsed_time":12.3},"placement":{"mode":"DEFAULT","cpus":[]},"params":{}}"#;
    let m = parse(Tool::KbotBenchJson, out, &ParseContext::default()).expect("parses");
    assert_metric(&m, "lmbench3.PIPE.bandwidth.MB/sec", 29142.0);
    assert_metric(&m, "lmbench3.time.elapsed_time", 12.3);
    for bad in [
        r#"{"metrics":{"a":"fast"}}"#,
        r#"{"metrics":{"a":1e999}}"#,
        r#"{"metrics":{}}"#,
        r#"{"tool":"x"}"#,
        "not json",
    ] {
        assert!(
            parse(Tool::KbotBenchJson, bad, &ParseContext::default()).is_err(),
            "{bad}"
        );
    }
}

const TOOLS: [Tool; 10] = [
    Tool::Lmbench,
    Tool::WillItScale,
    Tool::UnixBench,
    Tool::Hackbench,
    Tool::PerfSchedMessaging,
    Tool::PerfSchedPipe,
    Tool::StressNg,
    Tool::Pipebench,
    Tool::GnuTime,
    Tool::KbotBenchJson,
];

#[test]
fn nan_inf_and_garbage_are_typed_errors() {
    let ctx = ParseContext {
        prefix: "p".into(),
        tasks: Some(2),
        threads: false,
        hackbench_iterations: false,
    };
    let cases: [(Tool, &str); 12] = [
        (Tool::Lmbench, "Pipe bandwidth: nan MB/sec\n"),
        (Tool::Lmbench, "Pipe latency: inf microseconds\n"),
        (Tool::Lmbench, "Pipe bandwidth: 12 GB/sec\n"),
        (Tool::WillItScale, "average:NaN\n"),
        (Tool::Hackbench, "Running in process mode with 1 groups using 40 file descriptors each (== 40 tasks)\nEach sender will pass 100 messages of 100 bytes\nTime: inf\n"),
        (Tool::Hackbench, "Running in process mode with 1 groups using 40 file descriptors each (== 40 tasks)\nEach sender will pass 100 messages of 100 bytes\nTime: 0.000\n"),
        (Tool::PerfSchedPipe, "  infinity ops/sec\n"),
        (Tool::PerfSchedMessaging, " Total time: 1e400 [sec]\n"),
        (Tool::GnuTime, "\tUser time (seconds): fast\n"),
        (Tool::Pipebench, "Piped 3.12 MB in 00h00m00.00s:  nan B/second\n"),
        (Tool::StressNg, "stress-ng: metrc: [1]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)\nstress-ng: metrc: [1] pipe  NaN 2.00 0.27 1.16 308821.08 432685.55\n"),
        (Tool::UnixBench, "Benchmark Run: Sun Nov 29 2026 23:56:40 - 00:01:42\nPipe Throughput  inf lps   (10.0 s, 20 samples)\n"),
    ];
    for (tool, text) in cases {
        match parse(tool, text, &ctx) {
            Err(Error::ToolOutput { .. } | Error::NonFiniteMetric { .. }) => {}
            other => panic!("{tool:?} on {text:?}: {other:?}"),
        }
    }
    let garbage = [
        "",
        "\n\n",
        "hello world\n",
        "\u{0}\u{ff}\u{7f}binary",
        "Time:\nPiped\naverage:\n",
    ];
    for tool in TOOLS {
        for g in garbage {
            assert!(parse(tool, g, &ctx).is_err(), "{tool:?} accepted {g:?}");
        }
    }
}

#[test]
fn truncated_outputs_never_panic() {
    let ctx = ParseContext {
        prefix: "p".into(),
        tasks: Some(2),
        threads: false,
        hackbench_iterations: false,
    };
    let cases = [
        (Tool::Lmbench, "lmbench-results-pipe.txt"),
        (Tool::WillItScale, "will-it-scale-pipe1-processes.txt"),
        (Tool::WillItScale, "will-it-scale-runtest.csv"),
        (Tool::UnixBench, "unixbench-pipe.txt"),
        (Tool::Hackbench, "hackbench-pipe-process-3runs.txt"),
        (Tool::PerfSchedMessaging, "perf-sched-messaging-pipe.txt"),
        (Tool::PerfSchedPipe, "perf-sched-pipe.txt"),
        (Tool::StressNg, "stress-ng-pipe-metrics.txt"),
        (Tool::Pipebench, "pipebench-progress.txt"),
        (Tool::GnuTime, "time-v-hackbench.txt"),
    ];
    for (tool, name) in cases {
        let text = fixture(name);
        for (cut, _) in text.char_indices() {
            // Ok or a typed error; a panic fails the test.
            if let Ok(m) = parse(tool, &text[..cut], &ctx) {
                assert!(m.values().all(|v| v.is_finite()), "{name} cut at {cut}");
            }
        }
    }
}

/// Found by `scripts/fuzz`: a `time -v` line without a field name, and a
/// kbot-bench metric without one, made a metric the server cannot store.
#[test]
fn unnamed_metrics_are_not_made() {
    let m = parse(
        Tool::GnuTime,
        ": 0\n\tUser time (seconds): 0.5\n",
        &ParseContext::default(),
    )
    .expect("the named field");
    assert_eq!(m.keys().collect::<Vec<_>>(), ["user_time"]);
    let bad = r#"{"metrics":{"":1.0}}"#;
    assert!(parse(Tool::KbotBenchJson, bad, &ParseContext::default()).is_err());
}
