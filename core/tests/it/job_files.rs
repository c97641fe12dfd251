//! The job model against LKP's rules, and every shipped job file.

use std::collections::BTreeMap;
use std::path::Path;

use kbot_core::job::{parse_job_file, AtomicJob};
use kbot_core::machine::Hardware;
use kbot_core::programs::{kbot_bench_invocations, upstream_invocations, Repeat};
use kbot_core::Error;

/// The seed report's box: 224 threads, 2 sockets, 112 cores, 128 GiB.
fn spr() -> Hardware {
    Hardware {
        arch: "x86_64".into(),
        cpu_model: "Intel(R) Xeon(R) (Sapphire Rapids)".into(),
        sockets: 2,
        cores: 112,
        threads: 224,
        numa_nodes: 2,
        memory_bytes: 128 << 30,
        page_size: 4096,
        microcode: None,
        kernel: "6.18.0".into(),
    }
}

fn two_cpus() -> Hardware {
    Hardware {
        sockets: 1,
        cores: 2,
        threads: 2,
        numa_nodes: 1,
        memory_bytes: 24 << 30,
        ..spr()
    }
}

const SEED: &str = "
testcase: lmbench3
kconfig: x86_64-rhel-9.4
compiler: gcc-14
tbox_group: lkp-spr-2sp2
test_memory_size: 50%
nr_threads: 20%
cpufreq_governor: performance
lmbench3:
  mode: development
  test: PIPE
";

fn only(text: &str) -> AtomicJob {
    let mut jobs = parse_job_file(text).expect("job file parses");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    jobs.remove(0)
}

#[test]
fn seed_job_matches_the_0day_report() {
    let job = only(SEED);
    assert_eq!(job.program, "lmbench3");
    assert_eq!(
        job.params.get("nr_threads").map(String::as_str),
        Some("20%")
    );
    assert_eq!(job.options.get("test").map(String::as_str), Some("PIPE"));
    // LKP sorts by option name: cpufreq_governor, mode, nr_threads, test, test_memory_size.
    assert_eq!(job.path_params(), "performance-development-20%-PIPE-50%");
    let (keys, values) = job.axes_header();
    assert_eq!(
        keys,
        "compiler/cpufreq_governor/kconfig/mode/nr_threads/tbox_group/test/test_memory_size/testcase"
    );
    assert_eq!(
        values,
        "gcc-14/performance/x86_64-rhel-9.4/development/20%/lkp-spr-2sp2/PIPE/50%/lmbench3"
    );
    assert_eq!(
        job.result_path("f7f4665dc520fd8bbc1db20e59945773e03744a0"),
        "lmbench3/performance-development-20%-PIPE-50%/lkp-spr-2sp2/x86_64-rhel-9.4/gcc-14/f7f4665dc520fd8bbc1db20e59945773e03744a0"
    );
}

#[test]
fn resolve_follows_lkp_params() {
    let r = only(SEED).resolve(&spr()).expect("resolves");
    assert_eq!(r["nr_threads"], "44", "20% of 224 truncated");
    assert_eq!(r["test_memory_size"], (64u64 << 30).to_string());
    assert_eq!(r["nr_cpu"], "224");
    assert_eq!(r["mode"], "development");
    // 20% of 2 CPUs is 0 in LKP; kbot runs at least one copy.
    let small = only(SEED).resolve(&two_cpus()).expect("resolves");
    assert_eq!(small["nr_threads"], "1");
}

#[test]
fn durations_sizes_and_core_counts_resolve() {
    let job =
        only("testcase: will-it-scale\nnr_task: 1c\nruntime: 5m\nwill-it-scale: {test: pipe1}\n");
    let r = job.resolve(&spr()).expect("resolves");
    assert_eq!(r["runtime"], "300");
    assert_eq!(r["nr_task"], "56", "1c = cores per socket");
    assert_eq!(r["mode"], "both", "default filled in");
    let r = only("bw_pipe: {size: 64k, total: 1.5m}\n")
        .resolve(&spr())
        .expect("resolves");
    assert_eq!(r["size"], "65536");
    assert_eq!(r["total"], "1572864");
}

/// Job parameters and hardware needs read sizes in one grammar
/// (`kbot_core::units`): what `need_memory` took, `test_memory_size` takes.
#[test]
fn sizes_read_alike_in_parameters_and_needs() {
    let job = only(&SEED.replace("test_memory_size: 50%", "test_memory_size: 2GiB"));
    assert_eq!(
        job.params.get("test_memory_size").map(String::as_str),
        Some("2GiB"),
        "kept literal for the result path"
    );
    let r = job.resolve(&spr()).expect("resolves");
    assert_eq!(r["test_memory_size"], (2u64 << 30).to_string());
    for (written, bytes) in [("2G", 2u64 << 30), ("2gb", 2 << 30), ("512KiB", 512 << 10)] {
        let job = only(&format!("test_memory_size: {written}\nneed_memory: {written}\nlmbench3: {{mode: development, test: PIPE}}\n"));
        assert_eq!(job.needs.memory_bytes, Some(bytes), "{written}");
        let r = job.resolve(&spr()).expect("resolves");
        assert_eq!(r["test_memory_size"], bytes.to_string(), "{written}");
    }
    let r = only("bw_pipe: {size: 64KiB, total: 10MB}\n")
        .resolve(&spr())
        .expect("resolves");
    assert_eq!(r["size"], "65536");
    assert_eq!(r["total"], (10u64 << 20).to_string());
    let err =
        parse_job_file("test_memory_size: 2GiBs\nlmbench3: {mode: development, test: PIPE}\n")
            .expect_err("not a size");
    assert!(matches!(err, Error::InvalidValue { .. }), "{err}");
}

#[test]
fn lists_expand_into_the_cartesian_product_in_lkp_order() {
    let jobs = parse_job_file(
        "testcase: hackbench\nnr_threads: [100%, 1600%]\niterations: 8\n\
         hackbench:\n  mode: [process, threads]\n  ipc: [pipe, socket]\n",
    )
    .expect("parses");
    let paths: Vec<String> = jobs.iter().map(AtomicJob::path_params).collect();
    assert_eq!(jobs.len(), 8);
    // Sorted by name: ipc, iterations, mode, nr_threads.
    assert_eq!(paths[0], "pipe-8-process-100%");
    assert_eq!(paths[1], "socket-8-process-100%");
    assert_eq!(paths[7], "socket-8-threads-1600%");
    assert_eq!(
        paths
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        8
    );
}

#[test]
fn multi_document_files_overlay_document_zero() {
    let text = "testcase: lmbench3\nnr_threads: [20%]\nkconfig: [a, b]\nlmbench3: {mode: development, test: PIPE}\n---\nnr_threads: 4\n";
    let jobs = parse_job_file(text).expect("parses");
    let threads: Vec<&str> = jobs
        .iter()
        .map(|j| j.params["nr_threads"].as_str())
        .collect();
    assert_eq!(threads, ["20%", "20%", "4", "4"]);
    assert_eq!(jobs[1].kconfig, "b");
    // A header document without a program is not a job by itself.
    let jobs = parse_job_file(
        "testcase: pipen\nruns: 5\n---\npipen: {size: 4096}\n---\npipen: {size: 1m}\n",
    )
    .expect("parses");
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j.runs == 5 && j.testcase == "pipen"));
}

#[test]
fn path_params_truncate_sanitise_and_default() {
    let job = AtomicJob {
        testcase: "t".into(),
        program: "pipen".into(),
        options: BTreeMap::from([
            ("size".into(), "a/b c".into()),
            ("z".into(), "x".repeat(40)),
        ]),
        params: BTreeMap::new(),
        kconfig: "k".into(),
        compiler: "c".into(),
        tbox_group: None,
        runs: 1,
        needs: Default::default(),
        kpi: Vec::new(),
    };
    assert_eq!(job.path_params(), format!("a_b_c-{}", "x".repeat(31)));
    assert!(job.result_path("abc/../d").ends_with("/any/k/c/abc____d"));
    assert_eq!(only("pipen:\n").path_params(), "defaults");
}

#[test]
fn unknown_programs_and_options_are_named() {
    let err =
        parse_job_file("testcase: x\nlmbnech3:\n  test: PIPE\n").expect_err("must be rejected");
    assert!(
        matches!(&err, Error::UnknownProgram { name, .. } if name == "lmbnech3"),
        "{err}"
    );
    assert!(
        err.to_string().contains("lmbench3"),
        "lists the known programs: {err}"
    );

    let err = parse_job_file("lmbench3:\n  tset: PIPE\n").expect_err("must be rejected");
    assert!(
        matches!(&err, Error::UnknownOption { option, .. } if option == "tset"),
        "{err}"
    );
    assert!(
        err.to_string().contains("test"),
        "lists the valid options: {err}"
    );

    let err = parse_job_file("nr_task: 4\nlmbench3: {test: PIPE}\n").expect_err("must be rejected");
    assert!(
        matches!(&err, Error::UnknownOption { option, program, .. } if option == "nr_task" && program == "lmbench3")
    );

    let err = parse_job_file("hackbench: {mode: fibres}\n").expect_err("must be rejected");
    assert!(err.to_string().contains("process, threads"), "{err}");
    let err = parse_job_file("will-it-scale: {mode: thread}\n").expect_err("must be rejected");
    assert!(err.to_string().contains("needs option \"test\""), "{err}");
    let err = parse_job_file("lmbench3: {mode: development}\n").expect_err("must be rejected");
    assert!(err.to_string().contains("needs option \"test\""), "{err}");
    let err = parse_job_file("runs: 0\npipen:\n").expect_err("must be rejected");
    assert!(matches!(err, Error::InvalidValue { .. }));
    let err = parse_job_file("kconfig: ../etc\npipen:\n").expect_err("must be rejected");
    assert!(matches!(err, Error::InvalidValue { .. }));
    let err = parse_job_file("pipen:\nhackbench:\n").expect_err("must be rejected");
    assert!(err.to_string().contains("one program"), "{err}");
    let err = parse_job_file("testcase: x\n").expect_err("must be rejected");
    assert!(err.to_string().contains("no program"), "{err}");
}

#[test]
fn a_job_file_names_its_kpis() {
    // A list, not a matrix: one job, the first name the primary.
    let job = only(&format!(
        "{SEED}kpi: [lmbench3.PIPE.latency.us, lmbench3.PIPE.bandwidth.MB/sec]\n"
    ));
    assert_eq!(
        job.kpi,
        ["lmbench3.PIPE.latency.us", "lmbench3.PIPE.bandwidth.MB/sec"]
    );
    // Not part of what names the result.
    assert_eq!(job.path_params(), only(SEED).path_params());
    // One name alone is a list of one; YAML's block list reads the same.
    let one = only("kpi: hackbench.throughput_avg\nhackbench:\n");
    assert_eq!(one.kpi, ["hackbench.throughput_avg"]);
    let block = only("kpi:\n  - hackbench.time_sec\n  - hackbench.throughput\nhackbench:\n");
    assert_eq!(block.kpi, ["hackbench.time_sec", "hackbench.throughput"]);
    // A stressor's metric matches the program's `*` segment; the file
    // written back reads the same.
    let stress = only("kpi: [stress-ng.pipe.ops_per_sec]\nstress-ng: {test: pipe}\n");
    assert_eq!(only(&stress.to_yaml().expect("serialises")), stress);
    // Without it, the default choice.
    assert!(only(SEED).kpi.is_empty());
}

#[test]
fn unknown_or_malformed_kpis_are_refused_with_the_reason() {
    let refused = |kpi: &str, program: &str| -> String {
        let text = format!("kpi: {kpi}\n{program}\n");
        let err = parse_job_file(&text).expect_err(&format!("{kpi} must be refused"));
        err.to_string()
    };
    let hackbench = "hackbench:";
    // A typo names the metrics the program writes.
    let err = refused("[hackbench.througput]", hackbench);
    assert!(err.contains("hackbench writes no such metric"), "{err}");
    assert!(err.contains("hackbench.throughput_avg"), "{err}");
    // Another benchmark's metric.
    let err = refused("[lmbench3.PIPE.latency.us]", hackbench);
    assert!(err.contains("not a metric of testcase hackbench"), "{err}");
    // Not KPIs: GNU time's figures, monitors, pass/fail stats.
    let err = refused("[hackbench.time.elapsed_time]", hackbench);
    assert!(err.contains("not a KPI"), "{err}");
    let err = refused("[stress-ng.pipe.pass]", "stress-ng: {test: pipe}");
    assert!(err.contains("not a KPI"), "{err}");
    // Malformed: not a list of names, empty, blanks, twice.
    for (kpi, why) in [
        ("[]", "must be a list of metric names"),
        ("{a: b}", "must be a list of metric names"),
        ("7", "must be a list of metric names"),
        ("[[hackbench.throughput]]", "is not a metric name"),
        ("[3]", "is not a metric name"),
        ("['']", "1 to 256 bytes without blanks"),
        ("['hackbench. throughput']", "without blanks"),
        (
            "[hackbench.throughput, hackbench.throughput]",
            "named twice",
        ),
    ] {
        let err = refused(kpi, hackbench);
        assert!(err.contains(why), "{kpi}: {err}");
    }
}

#[test]
fn malformed_yaml_reports_line_and_column() {
    let err =
        parse_job_file("testcase: x\nlmbench3:\n  test: [PIPE\n").expect_err("must be rejected");
    match &err {
        Error::JobYaml { line, column, .. } => {
            assert!(line.is_some() && column.is_some(), "{err}");
        }
        other => panic!("expected JobYaml, got {other}"),
    }
    assert!(err.to_string().contains("line"), "{err}");
    for bad in [
        "",
        "- a\n- b\n",
        "42\n",
        "pipen: 5\n",
        "pipen: {size: {a: 1}}\n",
        "pipen: {size: []}\n",
        "? [a]\n: b\n",
    ] {
        assert!(parse_job_file(bad).is_err(), "{bad:?} must be rejected");
    }
}

#[test]
fn expansion_is_bounded() {
    let list: Vec<String> = (1..=30).map(|i| i.to_string()).collect();
    let text = format!(
        "nr_threads: [{l}]\nbw_pipe:\n  size: [{l}]\n",
        l = list.join(", ")
    );
    assert!(
        parse_job_file(&text).is_ok(),
        "30 x 30 = 900 atomic jobs is within the bound"
    );
    let text = format!(
        "nr_threads: [{l}]\nbw_pipe:\n  size: [{l}]\n  total: [{l}]\n",
        l = list.join(", ")
    );
    assert!(parse_job_file(&text).is_err());
}

#[test]
fn yaml_round_trips_one_atomic_job() {
    for job in parse_job_file(
        "testcase: hackbench\ntbox_group: vm-2c\nruns: 7\nnr_threads: [100%, 4]\n\
         arch: aarch64\nneed_page_size: 64K\nneed_memory: 1.5G\n\
         cpufreq_governor: performance\nhackbench: {mode: [process, threads], ipc: pipe}\n",
    )
    .expect("parses")
    {
        assert_eq!(job.needs.page_size, Some(64 << 10));
        let yaml = job.to_yaml().expect("serialises");
        assert_eq!(only(&yaml), job, "{yaml}");
    }
    let bare = only("pipen:\n");
    assert_eq!(only(&bare.to_yaml().expect("serialises")), bare);
}

#[test]
fn invocations_follow_lkp_and_the_cli_contract() {
    let job = only(SEED);
    let r = job.resolve(&spr()).expect("resolves");
    let inv = kbot_bench_invocations(&job, &r).expect("maps");
    let argv: Vec<String> = inv.iter().map(|i| i.args.join(" ")).collect();
    assert_eq!(
        argv,
        [
            "lat_pipe -P 44 --prefix lmbench3 --json",
            "bw_pipe -P 44 --prefix lmbench3 --json"
        ]
    );
    let up = upstream_invocations(&job, &r)
        .expect("maps")
        .expect("exists");
    assert_eq!(up[1].program, "bw_pipe");
    assert_eq!(up[1].args, ["-P", "44"]);

    // A short job asks for fewer samples; both tools take lmbench's -N.
    let few = only("bw_pipe: {size: 64k, total: 8m, repetitions: 3}\n");
    let r = few.resolve(&two_cpus()).expect("resolves");
    let inv = kbot_bench_invocations(&few, &r).expect("maps");
    assert_eq!(
        inv[0].args.join(" "),
        "bw_pipe -m 65536 -M 8388608 -P 1 -N 3 --sched DEFAULT --prefix bw_pipe --json"
    );
    let up = upstream_invocations(&few, &r)
        .expect("maps")
        .expect("exists");
    assert_eq!(up[0].args.join(" "), "-m 65536 -M 8388608 -P 1 -N 3");

    let wis = only("nr_task: 100%\nwill-it-scale: {test: pipe1, mode: thread}\n");
    let r = wis.resolve(&two_cpus()).expect("resolves");
    let inv = kbot_bench_invocations(&wis, &r).expect("maps");
    assert_eq!(
        inv[0].args.join(" "),
        "pipe1 -t 2 -s 295 --mode thread --prefix will-it-scale --json"
    );
    let up = upstream_invocations(&wis, &r)
        .expect("maps")
        .expect("exists");
    assert_eq!(up[0].program, "pipe1_threads");
    assert_eq!(up[0].context.tasks, Some(2));
    assert!(up[0].context.threads);

    let hb = only("nr_threads: 1600%\niterations: 8\nhackbench: {mode: threads, ipc: pipe}\n");
    let r = hb.resolve(&two_cpus()).expect("resolves");
    let inv = kbot_bench_invocations(&hb, &r).expect("maps");
    // loops = 30000 * nr_cpu / nr_threads = 30000 * 2 / 32.
    assert_eq!(
        inv[0].args.join(" "),
        "messaging -g 32 -f 20 -l 1875 -s 100 --ipc pipe --mode thread --prefix hackbench --json"
    );
    assert_eq!(inv[0].repeat, Repeat::Times(8));
    let up = upstream_invocations(&hb, &r)
        .expect("maps")
        .expect("exists");
    assert_eq!(
        up[0].args.join(" "),
        "-g 32 -f 20 --threads --pipe -l 1875 -s 100"
    );

    let psp = only("perf-bench-sched-pipe: {loops: 10000000ops, mode: threads}\n");
    let r = psp.resolve(&spr()).expect("resolves");
    let up = upstream_invocations(&psp, &r)
        .expect("maps")
        .expect("exists");
    assert_eq!(up[0].args.join(" "), "bench sched pipe -l 10000000 -T");

    let ub = only("nr_task: 100%\nruntime: 300s\nunixbench: {test: pipe}\n");
    let r = ub.resolve(&two_cpus()).expect("resolves");
    let up = upstream_invocations(&ub, &r)
        .expect("maps")
        .expect("exists");
    assert_eq!(up[0].args.join(" "), "pipe -c 2 -i 30");
}

#[test]
fn every_shipped_job_file_parses_and_maps() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../jobs");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("jobs/ exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        let jobs = parse_job_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!jobs.is_empty());
        for job in jobs {
            for hw in [spr(), two_cpus()] {
                let r = job
                    .resolve(&hw)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let up = upstream_invocations(&job, &r)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let bench = kbot_bench_invocations(&job, &r);
                assert!(
                    bench.is_ok() || job.program == "stress-ng",
                    "{}",
                    path.display()
                );
                assert!(up.is_some() || job.program == "pipen", "{}", path.display());
            }
        }
        seen += 1;
    }
    assert!(seen >= 10, "only {seen} job files found");
}

#[test]
fn will_it_scale_without_nr_task_sweeps_task_counts_as_lkp() {
    let job = only("will-it-scale: {test: pipe1, mode: process}\n");
    assert_eq!(job.path_params(), "process-pipe1", "no nr_task in the path");
    // 224 CPUs, 112 cores, 2 nodes: 56 cores a node and (one LLC a socket)
    // 56 a cache, then 3/4 of the CPUs and all of them, each count once;
    // runtime 300 over 3 + 2 iterations, halved, less 5.
    let r = job.resolve(&spr()).expect("resolves");
    assert_eq!(r["threads_to_iterate"], "1 56 112 168 224");
    assert_eq!(r["duration"], "25");
    let inv = kbot_bench_invocations(&job, &r).expect("maps");
    let argv: Vec<String> = inv.iter().map(|i| i.args[..5].join(" ")).collect();
    assert_eq!(
        argv,
        [
            "pipe1 -t 1 -s 25",
            "pipe1 -t 56 -s 25",
            "pipe1 -t 112 -s 25",
            "pipe1 -t 168 -s 25",
            "pipe1 -t 224 -s 25"
        ]
    );
    // 2 CPUs on one node: 300 / 4 / 2 - 5 = 32 s at 1 and 2 tasks (below
    // 4 CPUs upstream adds no 3/4 count).
    let both = only("will-it-scale: {test: pipe1}\n");
    let r = both.resolve(&two_cpus()).expect("resolves");
    assert_eq!(r["threads_to_iterate"], "1 2");
    let up = upstream_invocations(&both, &r)
        .expect("maps")
        .expect("exists");
    let runs: Vec<(String, Option<u64>)> = up
        .iter()
        .map(|i| {
            (
                format!("{} {}", i.program, i.args.join(" ")),
                i.context.tasks,
            )
        })
        .collect();
    assert_eq!(runs.len(), 4, "processes then threads at each count");
    assert_eq!(runs[0], ("pipe1_processes -t 1 -s 32".to_string(), Some(1)));
    assert_eq!(runs[1], ("pipe1_threads -t 1 -s 32".to_string(), Some(1)));
    assert_eq!(runs[3], ("pipe1_threads -t 2 -s 32".to_string(), Some(2)));
    // A short runtime still measures 5 s a count, as LKP's floor.
    let short = only("runtime: 20s\nwill-it-scale: {test: pipe1}\n");
    let r = short.resolve(&two_cpus()).expect("resolves");
    assert_eq!(r["duration"], "5");
}

/// lkp-tests' `lib/sysinfo.sh` `setup_threads_to_iterate` worked by hand
/// for machines of several sizes: `1 cores_per_llc node*cores_per_node...`,
/// plus `nr_cpu*3/4 nr_cpu` from 4 CPUs on, through `sort -un`.
#[test]
fn will_it_scale_sweep_is_upstreams_at_every_size() {
    let machine = |sockets, cores, threads, numa_nodes| Hardware {
        sockets,
        cores,
        threads,
        numa_nodes,
        ..spr()
    };
    let cases = [
        // 1 CPU: 1 1 1 -> 1.
        (machine(1, 1, 1, 1), "1"),
        // 2 CPUs: 1 2 2 -> 1 2.
        (machine(1, 2, 2, 1), "1 2"),
        // 3 CPUs: under 4, no 3/4 count: 1 3 3 -> 1 3.
        (machine(1, 3, 3, 1), "1 3"),
        // 4 CPUs: 1 4 4 3 4 -> 1 3 4.
        (machine(1, 4, 4, 1), "1 3 4"),
        // 4 CPUs on 2 SMT cores: 1 2 2 3 4.
        (machine(1, 2, 4, 1), "1 2 3 4"),
        // 8 CPUs: 1 8 8 6 8 -> 1 6 8 (kbot ran 1 8 8 before).
        (machine(1, 8, 8, 1), "1 6 8"),
        // 96 CPUs, 2 sockets of 24 SMT cores, 2 nodes:
        // 1 24 24 48 72 96.
        (machine(2, 48, 96, 2), "1 24 48 72 96"),
        // 96 CPUs on one socket and node, no SMT: 1 96 96 72 96.
        (machine(1, 96, 96, 1), "1 72 96"),
        // 4 nodes of 16 cores, 1 socket (sub-NUMA clustering): 1 64 16 32
        // 48 64 48 64.
        (machine(1, 64, 64, 4), "1 16 32 48 64"),
    ];
    let job = only("will-it-scale: {test: pipe1}\n");
    for (hw, want) in cases {
        let r = job.resolve(&hw).expect("resolves");
        assert_eq!(
            r["threads_to_iterate"], want,
            "{} CPUs, {} cores, {} sockets, {} nodes",
            hw.threads, hw.cores, hw.sockets, hw.numa_nodes
        );
    }
}

/// lkp-tests' `jobs/stress-ng/stress-ng-part4.yaml` as upstream has it
/// (`jobs/upstream/`): of its matrix kbot plans switch with method pipe,
/// whose command line is upstream's run script's (`--switch-method pipe`
/// before `--switch N`), and skips switch's other methods, the other
/// stressors and spinmem's and sock's variants, each with its reason.
#[test]
fn stress_ng_part4_plans_switch_with_the_pipe_method() {
    use kbot_core::job::{plan_job_file, SkipKind};
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../jobs/upstream/stress-ng-part4.yaml"),
    )
    .expect("the upstream file");
    let plan = plan_job_file(&text, &kbot_core::lkp::NoIncludes).expect("plans");
    assert_eq!(plan.jobs.len(), 1, "{:?}", plan.jobs);
    let job = &plan.jobs[0];
    assert_eq!(job.path_params(), "pipe-100%-switch-60s");
    let two = Hardware {
        sockets: 1,
        cores: 2,
        threads: 2,
        numa_nodes: 1,
        ..spr()
    };
    let r = job.resolve(&two).expect("resolves");
    let up = upstream_invocations(job, &r)
        .expect("maps")
        .expect("upstream tool");
    assert_eq!(up.len(), 1);
    assert_eq!(
        format!("{} {}", up[0].program, up[0].args.join(" ")),
        "stress-ng --timeout 60 --times --verify --metrics --no-rand-seed \
         --switch-method pipe --switch 2"
    );
    assert!(up[0].output_includes_stderr());
    let reason = |name: &str| {
        plan.skipped
            .iter()
            .find(|s| s.kind == SkipKind::Job && s.name == name)
            .map(|s| s.reason.clone())
            .unwrap_or_else(|| panic!("{name} is not skipped: {:?}", plan.skipped))
    };
    assert!(reason("stress-ng/mq-100%-switch-60s")
        .contains("through a POSIX message queue, not a pipe"));
    assert!(reason("stress-ng/sem-sysv-100%-switch-60s")
        .contains("through System V semaphores, not a pipe"));
    assert!(reason("stress-ng/100%-sem-60s")
        .contains("kbot runs: pipe, pthread, pipeherd, ring-pipe, switch"));
    assert!(
        reason("stress-ng/8bit-100%-spinmem-60s").contains("invalid value \"spinmem\" for test")
    );
    assert!(reason("stress-ng/100%-sock-60s-dgram").contains("invalid value \"sock\" for test"));
    // 59 stressors of the first document, 3 + 5 + 9 of the others, all but one skipped.
    let jobs = plan
        .skipped
        .iter()
        .filter(|s| s.kind == SkipKind::Job)
        .count();
    assert_eq!(jobs, 59 + 3 + 5 + 9 - 1, "{:?}", plan.skipped);
}

/// `method` is switch's: on another stressor stress-ng has no such option,
/// so the job is refused with the reason rather than run with a bad flag.
#[test]
fn stress_ng_method_is_for_switch_only() {
    let err = parse_job_file("stress-ng: {test: pipe, method: pipe}\n").expect_err("refused");
    assert!(
        err.to_string()
            .contains("kbot passes --<test>-method to switch only, not to pipe"),
        "{err}"
    );
    let job = only("stress-ng: {test: switch, method: pipe}\n");
    let r = job.resolve(&spr()).expect("resolves");
    let up = upstream_invocations(&job, &r)
        .expect("maps")
        .expect("upstream");
    assert_eq!(
        up[0].args[5..],
        [
            "--no-rand-seed",
            "--switch-method",
            "pipe",
            "--switch",
            "224"
        ]
    );
}

/// The pipe family of lkp-tests' `jobs/stress-ng/stress-ng-part3.yaml` and
/// `stress-ng-scheduler.yaml` (the corpus file `stress-ng-pipe-family.yaml`
/// lays it out as upstream does) resolves and maps to the command line
/// upstream's `programs/stress-ng/run` builds.
#[test]
fn stress_ng_pipe_family_runs_as_upstreams_run_script() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/lkp-jobs/jobs/stress-ng-pipe-family.yaml"),
    )
    .expect("corpus file");
    let jobs = parse_job_file(&text).expect("plans");
    let eight = Hardware {
        sockets: 1,
        cores: 8,
        threads: 8,
        numa_nodes: 1,
        ..spr()
    };
    let mut lines = Vec::new();
    for job in &jobs {
        let r = job.resolve(&eight).expect("resolves");
        let up = upstream_invocations(job, &r)
            .expect("maps")
            .expect("upstream tool");
        assert_eq!(up.len(), 1);
        lines.push(format!("{} {}", up[0].program, up[0].args.join(" ")));
        // kbot-bench has no stress-ng workload: the agent runs upstream's.
        assert!(kbot_bench_invocations(job, &r).is_err());
    }
    let common = "stress-ng --timeout 60 --times --verify --metrics --no-rand-seed";
    let mut want = vec![
        format!("{common} --pipeherd 8"),
        format!("{common} --ring-pipe 8"),
    ];
    for test in ["pipe", "pthread"] {
        for sched in ["batch", "deadline", "fifo", "idle", "other", "rr"] {
            // Neither stressor has its own --<test>-sched option.
            want.push(format!("{common} --workload-sched {sched} --{test} 8"));
        }
    }
    assert_eq!(lines, want);
    let fifo = jobs
        .iter()
        .find(|j| j.path_params() == "100%-fifo-pipe-60s")
        .expect("pipe under fifo");
    assert_eq!(fifo.options.get("sched").map(String::as_str), Some("fifo"));
}
