//! Runs every workload briefly through the real binary and checks that its
//! upstream-format text parses and its `--json` metrics are sane.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kbot-bench"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("kbot-bench runs")
}

fn ok_text(args: &[&str]) -> (String, String) {
    let out = bench(args);
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{args:?} failed: {so}\n{se}");
    (so, se)
}

fn ok_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let (so, _) = ok_text(&all);
    serde_json::from_str(so.trim()).expect("one JSON object on stdout")
}

fn metric(v: &Value, name: &str) -> f64 {
    v["metrics"][name]
        .as_f64()
        .unwrap_or_else(|| panic!("metric {name} missing in {v}"))
}

/// The `time -v` metrics of the process tree are present and plausible.
fn check_time_metrics(v: &Value, prefix: &str) {
    for m in [
        "elapsed_time",
        "user_time",
        "system_time",
        "voluntary_context_switches",
        "involuntary_context_switches",
        "maximum_resident_set_size",
        "minor_page_faults",
        "major_page_faults",
    ] {
        let x = metric(v, &format!("{prefix}.time.{m}"));
        assert!(x >= 0.0, "{m} = {x}");
    }
    assert!(metric(v, &format!("{prefix}.time.elapsed_time")) > 0.0);
    assert!(metric(v, &format!("{prefix}.time.maximum_resident_set_size")) > 0.0);
    let cpu = metric(v, &format!("{prefix}.time.user_time"))
        + metric(v, &format!("{prefix}.time.system_time"));
    assert!(cpu > 0.0, "no CPU time recorded for the process tree");
}

fn number_after(text: &str, prefix: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in {text:?}"));
    line[prefix.len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

#[test]
fn bw_pipe_reports_positive_bandwidth() {
    let quick = [
        "bw_pipe", "--enough", "50000", "-N", "2", "-m", "16k", "-M", "1m",
    ];
    let (_, err) = ok_text(&quick);
    let mbs = number_after(&err, "Pipe bandwidth: ");
    assert!(mbs > 0.0 && err.trim_end().ends_with("MB/sec"), "{err}");

    let mut with_sched = quick.to_vec();
    with_sched.extend(["--sched", "UNIQUE"]);
    let v = ok_json(&with_sched);
    assert!(metric(&v, "lmbench3.PIPE.bandwidth.MB/sec") > 0.0);
    check_time_metrics(&v, "lmbench3");
    assert_eq!(v["placement"]["mode"], "LMBENCH_SCHED=UNIQUE");
    assert_eq!(v["params"]["-M"], "1048576");
}

#[test]
fn lat_pipe_reports_latency() {
    let (_, err) = ok_text(&["lat_pipe", "--enough", "50000", "-N", "2"]);
    let us = number_after(&err, "Pipe latency: ");
    assert!(us > 0.0 && err.contains("microseconds"), "{err}");
}

/// will-it-scale's text: testcase, warmup, min/max/total per second, average.
fn check_wis_text(out: &str, seconds: usize, warmup: usize) -> f64 {
    let samples: Vec<&str> = out.lines().filter(|l| l.starts_with("min:")).collect();
    assert_eq!(samples.len(), seconds + warmup, "{out}");
    for s in &samples {
        let parts: Vec<&str> = s.split_whitespace().collect();
        assert!(
            parts.len() == 3 && parts[1].starts_with("max:") && parts[2].starts_with("total:"),
            "{s}"
        );
    }
    assert!(out.starts_with("testcase:"), "{out}");
    assert!(
        out.contains("\nwarmup\n") && out.contains("measurement\n"),
        "{out}"
    );
    number_after(out, "average:")
}

fn number_after_colon(out: &str, key: &str) -> f64 {
    let line = out.lines().find(|l| l.starts_with(key)).unwrap_or_default();
    line[key.len()..].trim().parse().unwrap_or(-1.0)
}

#[test]
fn pipe1_prints_harness_lines() {
    let (out, _) = ok_text(&["pipe1", "-s", "1", "--warmup-samples", "1"]);
    assert!(check_wis_text(&out, 1, 1) > 0.0, "{out}");

    let v = ok_json(&[
        "pipe1",
        "-s",
        "1",
        "--warmup-samples",
        "0",
        "--mode",
        "thread",
        "-n",
    ]);
    assert!(metric(&v, "will-it-scale.per_thread_ops") > 0.0);
    assert_eq!(v["placement"]["mode"], "unpinned (-n)");
}

#[test]
fn context_switch1_counts_round_trips() {
    let v = ok_json(&[
        "context_switch1",
        "-t",
        "2",
        "-s",
        "1",
        "--warmup-samples",
        "0",
    ]);
    let per = metric(&v, "will-it-scale.per_process_ops");
    let total = metric(&v, "will-it-scale.workload");
    assert!(per > 0.0 && (total - 2.0 * per).abs() < 1.0, "{v}");
    let out = v["output"]["stdout"].as_str().unwrap_or_default();
    assert!(
        out.starts_with("testcase:Context switch via pipes"),
        "{out}"
    );
    check_partners_share_their_task_cpus(&v, 2);

    let (out, _) = ok_text(&[
        "context_switch1",
        "--mode",
        "thread",
        "-s",
        "1",
        "--warmup-samples",
        "0",
    ]);
    assert!(number_after_colon(&out, "average:") > 0.0, "{out}");
}

/// The CPUs a placement report gives a role.
fn cpus_of(v: &Value, role: &str) -> Vec<u64> {
    let tasks = v["placement"]["tasks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let task = tasks.iter().find(|t| t["role"] == role);
    let cpus = task
        .and_then(|t| t["cpus"].as_array())
        .unwrap_or_else(|| panic!("{role} unpinned: {v}"));
    cpus.iter().filter_map(Value::as_u64).collect()
}

/// will-it-scale pins task i to core i and its partner inherits that core:
/// the report holds the CPUs each process or thread recorded itself (the run
/// fails if they differ from the request), so a partner that lands on
/// another core, a 10x slower cross-CPU ping-pong, shows here.
fn check_partners_share_their_task_cpus(v: &Value, tasks: usize) {
    assert_eq!(
        v["placement"]["tasks"].as_array().map(Vec::len),
        Some(2 * tasks),
        "{v}"
    );
    let mut seen: Vec<u64> = Vec::new();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for i in 0..tasks {
        let task = cpus_of(v, &format!("task {i}"));
        assert!(!task.is_empty(), "{v}");
        assert_eq!(cpus_of(v, &format!("partner {i}")), task, "{v}");
        if i < cores {
            assert!(
                task.iter().all(|c| !seen.contains(c)),
                "tasks share a core: {v}"
            );
        }
        seen.extend(task);
    }
}

#[test]
fn context_switch1_partners_stay_on_their_task_core() {
    let all = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .to_string();
    for mode in ["process", "thread"] {
        for tasks in ["1", all.as_str()] {
            let v = ok_json(&[
                "context_switch1",
                "-t",
                tasks,
                "--mode",
                mode,
                "-s",
                "1",
                "--warmup-samples",
                "0",
            ]);
            check_partners_share_their_task_cpus(&v, tasks.parse().unwrap_or(1));
        }
    }
    let v = ok_json(&["context_switch1", "-n", "-s", "1", "--warmup-samples", "0"]);
    assert_eq!(v["placement"]["tasks"][1]["role"], "partner 0", "{v}");
    assert!(v["placement"]["tasks"][1]["cpus"].is_null(), "{v}");
}

#[test]
fn pipen_moves_data_between_two_tasks() {
    let v = ok_json(&[
        "pipen",
        "--size",
        "32678",
        "--duration",
        "1",
        "--warmup-samples",
        "0",
    ]);
    let mbs = metric(&v, "pipen.MB/sec");
    let ops = metric(&v, "pipen.ops_per_sec");
    assert!(mbs > 0.0 && ops > 0.0, "{v}");
    assert!(
        (mbs - ops * 32678.0 / 1e6).abs() < 1e-6 * mbs.max(1.0),
        "{v}"
    );
    let roles: Vec<&str> = v["placement"]["tasks"]
        .as_array()
        .map(|t| t.iter().filter_map(|x| x["role"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(roles, ["writer 0", "reader 0"]);
}

#[test]
fn unixbench_pipe_prints_count_and_index() {
    let (out, err) = ok_text(&[
        "unixbench-pipe",
        "--duration",
        "1",
        "-i",
        "2",
        "--settle",
        "0",
    ]);
    let counts: Vec<&str> = err.lines().filter(|l| l.starts_with("COUNT|")).collect();
    assert_eq!(counts.len(), 2, "{err}");
    assert!(counts.iter().all(|l| l.ends_with("|1|lps")), "{err}");
    let score = number_after(&out, "Pipe Throughput");
    assert!(score > 0.0, "{out}");
    let index = number_after(&out, "System Benchmarks Index Score (Partial Only)");
    assert!((index - score / 12440.0 * 10.0).abs() < 0.1, "{out}");

    let v = ok_json(&[
        "unixbench-pipe",
        "--duration",
        "1",
        "-i",
        "1",
        "-c",
        "2",
        "--settle",
        "0",
    ]);
    assert!(metric(&v, "unixbench.throughput") > 0.0);
    assert!(metric(&v, "unixbench.score") > 0.0);
    check_time_metrics(&v, "unixbench");
}

#[test]
fn messaging_hackbench_and_perf_styles() {
    let (out, _) = ok_text(&["messaging", "-g", "2", "-l", "20"]);
    assert!(out.starts_with(
        "Running in process mode with 2 groups using 40 file descriptors each (== 80 tasks)"
    ));
    assert!(
        out.contains("Each sender will pass 20 messages of 100 bytes"),
        "{out}"
    );
    assert!(number_after(&out, "Time: ") >= 0.0, "{out}");

    let v = ok_json(&[
        "messaging",
        "-g",
        "1",
        "-l",
        "20",
        "--ipc",
        "pipe",
        "--mode",
        "thread",
        "--style",
        "perf",
    ]);
    let out = v["output"]["stdout"].as_str().unwrap_or_default();
    assert!(
        out.contains("# 20 sender and receiver threads per group"),
        "{out}"
    );
    assert!(out.contains("Total time: "), "{out}");
    assert!(metric(&v, "perf-bench-sched-messaging.total_time_sec") >= 0.0);

    let v = ok_json(&["messaging", "-g", "1", "-l", "200"]);
    assert!(metric(&v, "hackbench.throughput") > 0.0, "{v}");
    check_time_metrics(&v, "hackbench");
}

#[test]
fn sched_pipe_reports_ops() {
    let (out, _) = ok_text(&["sched-pipe", "-l", "2000"]);
    assert!(
        out.contains("# Executed 2000 pipe operations between two processes"),
        "{out}"
    );
    let ops: f64 = out
        .lines()
        .find(|l| l.ends_with("ops/sec"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0.0);
    assert!(ops > 0.0, "{out}");

    let v = ok_json(&["sched-pipe", "-l", "2000", "-T", "--split-cpus"]);
    assert!(metric(&v, "perf-bench-sched-pipe.ops_per_sec") > 0.0);
    assert!(metric(&v, "perf-bench-sched-pipe.usecs_per_op") > 0.0);
    assert_eq!(v["placement"]["mode"], "split-cpus");
}

#[test]
fn pipebench_meters_stdin_and_feed() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kbot-bench"))
        .args(["pipebench", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let data = vec![7u8; 3 * 1024 * 1024 + 5];
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().expect("wait");
    assert!(writer.join().is_ok());
    assert!(out.status.success());
    assert_eq!(
        out.stdout.len(),
        3 * 1024 * 1024 + 5,
        "pipebench must copy stdin to stdout"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Summary:\nPiped "), "{err}");
    assert!(err.contains("3.00 MB in 00h00m"), "{err}");

    let v = ok_json(&["pipebench", "--feed", "64m", "-q"]);
    assert_eq!(metric(&v, "pipebench.bytes"), 64.0 * 1024.0 * 1024.0);
    assert!(metric(&v, "pipebench.MB/sec") > 0.0);
}

#[test]
fn bad_arguments_get_a_usage_error_not_a_panic() {
    let cases: &[&[&str]] = &[
        &[],
        &["no-such-workload"],
        &["bw_pipe", "-m", "0"],
        &["bw_pipe", "-m", "12x"],
        &["bw_pipe", "-M", "1.5m"],
        &["bw_pipe", "-P", "0"],
        &["bw_pipe", "--sched", "bogus"],
        &["bw_pipe", "--sched", "CUSTOM"],
        &["lat_pipe", "-N", "0"],
        &["pipe1", "-t", "0"],
        &["pipe1", "-s", "abc"],
        &["context_switch1", "--mode", "fiber"],
        &["pipen", "--size", "0"],
        &["pipen", "--writer-cpu", "99999"],
        &["pipen", "--split-cpus", "--reader-cpu", "1"],
        &["unixbench-pipe", "--duration", "0"],
        &["messaging", "-g", "0"],
        &["messaging", "--ipc", "fifo"],
        &["sched-pipe", "-l", "-5"],
        &["sched-pipe", "--writer-cpu", "4096"],
        &["pipebench", "-b", "0"],
        &["pipebench", "--feed", "1m", "--feed-bs", "0"],
    ];
    for args in cases {
        let out = bench(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.is_empty(), "{args:?}: no message");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
