//! The seed's 0-day report (`core/tests/fixtures/seed_001_report.txt`), rendered from kbot's data with
//! kbot's identity, must match the original byte for byte where the identity
//! and texts are not kbot's own.

use crate::common::seed::{axes, runs};
use kbot_core::machine::Hardware;
use kbot_core::report::{
    self, mbox, ChangeKind, CommitRef, ReportConfig, ReportData, DEFAULT_DISCLAIMER,
    DEFAULT_SIGNATURE,
};
use kbot_core::stats::{compare_runs, StatsConfig};
use kbot_core::table::{self, RowFilter, TableInput};

const SEED: &str = include_str!("../fixtures/seed_001_report.txt");
const SEED_ID: &str = "202611041404.befe64cd-lkp@intel.com";
const SEED_DISCLAIMER: &str = "\
Results have been estimated based on internal Intel analysis and are provided
for informational purposes only. Any difference in system hardware or software
design or configuration may affect actual performance.";
const SEED_SIGNATURE: &str =
    "0-DAY CI Kernel Test Service\nhttps://github.com/intel/lkp-tests/wiki";

fn config() -> ReportConfig {
    ReportConfig {
        robot_name: "kernel test robot".into(),
        robot_address: "kbot@kbot.example.org".into(),
        message_id_domain: "kbot@kbot.example.org".into(),
        archive_url: "https://kbot.example.org/reports".into(),
        materials_url: "https://kbot.example.org/archive/".into(),
        disclaimer: DEFAULT_DISCLAIMER.into(),
        signature: DEFAULT_SIGNATURE.into(),
    }
}

/// Offsets of five runs: mean 0, symmetric.
const FIVE_RUNS: [f64; 5] = [-1.0, -1.0, 0.0, 1.0, 1.0];

const BASE_SHA: &str = "c610d2d0787961cd5b1e4a0d3c9f2e1a7b6c5d4e";
const HEAD_SHA: &str = "f7f4665dc520fd8bbc1db20e59945773e03744a0";

/// The seed's samples through kbot's statistics and `kbot_core::table`:
/// the KPI's change and the rendered compare block.
fn compare_from_samples() -> (f64, String) {
    let cmp = compare_runs(
        &runs(&FIVE_RUNS, |r| (r.1, r.2)),
        &runs(&FIVE_RUNS, |r| (r.3, r.4)),
        &StatsConfig::default(),
    )
    .expect("valid samples");
    let input = TableInput::from_comparison(
        axes(),
        CommitRef {
            sha: BASE_SHA.into(),
            subject: "fs: annotate inode timestamp accessors".into(),
        },
        CommitRef {
            sha: HEAD_SHA.into(),
            subject: "fs/pipe: unify the page pools into a single per-pipe pool".into(),
        },
        &cmp,
        RowFilter::Changed,
    );
    (cmp.metrics[0].change, table::render(&input))
}

fn seed_data() -> ReportData {
    let (change, compare_table) = compare_from_samples();
    ReportData {
        tree: "linus".into(),
        branch: "master".into(),
        repo_url: "https://git.kernel.org/cgit/linux/kernel/git/torvalds/linux.git".into(),
        commit: CommitRef {
            sha: HEAD_SHA.into(),
            subject: "fs/pipe: unify the page pools into a single per-pipe pool".into(),
        },
        base: CommitRef {
            sha: BASE_SHA.into(),
            subject: "fs: annotate inode timestamp accessors".into(),
        },
        metric: "lmbench3.PIPE.bandwidth.MB/sec".into(),
        change_percent: change,
        kind: ChangeKind::Regression,
        still_on: vec![],
        testcase: "lmbench3".into(),
        kconfig: "x86_64-rhel-9.4".into(),
        compiler: "gcc-14".into(),
        machine: Hardware {
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
        },
        measured_by: None,
        parameters: [
            ("test_memory_size", "50%"),
            ("nr_threads", "20%"),
            ("mode", "development"),
            ("test", "PIPE"),
            ("cpufreq_governor", "performance"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        other_impacts: vec![],
        compare_table,
        // 2026-11-04 14:04:30 UTC, the stamp of the seed's Message-ID.
        recorded_at_ms: 1_793_801_070_000,
        identity_key: "linux/c610d2d078..f7f4665dc5/lmbench3-PIPE/lkp-spr-2sp2".into(),
        preface: None,
        posted: None,
    }
}

#[test]
fn seed_report_matches_with_kbot_identity() {
    let cfg = config();
    let rendered = report::render(&seed_data(), &cfg).expect("valid test input");
    let id = rendered.message_id.as_str().to_owned();
    assert!(id.starts_with("202611041404."), "{id}");
    assert!(id.ends_with("-kbot@kbot.example.org"), "{id}");

    let expected = SEED
        .replace(SEED_ID, &id)
        .replace("yi1.lai@intel.com", "kbot@kbot.example.org")
        .replace(
            "https://lore.kernel.org/oe-lkp/",
            "https://kbot.example.org/reports/",
        )
        .replace(
            "https://download.01.org/0day-ci/archive/",
            "https://kbot.example.org/archive/",
        )
        .replace(SEED_DISCLAIMER, DEFAULT_DISCLAIMER)
        .replace(SEED_SIGNATURE, DEFAULT_SIGNATURE);
    // Every substituted text really occurred in the seed.
    assert!(!expected.contains("intel.com") && !expected.contains("Intel analysis"));
    assert_eq!(rendered.body, expected);
    assert_eq!(
        rendered.subject,
        "[linus:master] [fs/pipe] f7f4665dc5: lmbench3.PIPE.bandwidth.MB/sec 18.5% regression"
    );
}

#[test]
fn rendering_twice_gives_the_same_message_id() {
    let a = report::render(&seed_data(), &config()).expect("valid test input");
    let b = report::render(&seed_data(), &config()).expect("valid test input");
    assert_eq!(a, b);
    let mut other = seed_data();
    other.identity_key.push_str("/another-pair");
    let c = report::render(&other, &config()).expect("valid test input");
    assert_ne!(a.message_id, c.message_id);
}

#[test]
fn a_guest_report_says_which_mode_measured_it_and_what_it_cannot_see() {
    let mut data = seed_data();
    let mode = kbot_core::conditions::Mode::ExactSmp { cpus: 2 };
    data.measured_by = Some(format!("{mode}; cannot see {}", mode.blind_to()));
    let r = report::render(&data, &config()).expect("valid test input");
    assert!(
        r.body.contains(
            "with 128G memory\nmeasured on: exact clock (icount), 2 vCPUs; cannot see cache and TLB misses"
        ),
        "{}",
        r.body
    );
    assert!(r
        .body
        .contains("QEMU runs the vCPUs in turns), so contention between CPUs costs instructions, not waiting\nparameters:\n"));
}

#[test]
fn still_lines_improvements_and_other_impacts() {
    let mut data = seed_data();
    data.kind = ChangeKind::Improvement;
    data.still_on = vec![report::StillOn {
        tree_branch: "linux-next/master".into(),
        sha: "0123456789abcdef0123456789abcdef01234567".into(),
    }];
    data.other_impacts = vec![report::OtherImpact {
        testcase: "will-it-scale".into(),
        metric: "will-it-scale.per_process_ops".into(),
        change_percent: 4.2,
        kind: ChangeKind::Improvement,
        machine: "4 threads 1 socket with 8G memory".into(),
        parameters: vec![("test".into(), "pipe1".into())],
        compare_table: Some(report::OtherCompare {
            tbox_group: "kbot-vm".into(),
            table: "=====\nrows\n".into(),
        }),
    }];
    let r = report::render(&data, &config()).expect("valid test input");
    assert!(r.subject.ends_with("18.5% improvement"));
    assert!(r
        .body
        .contains("noticed a 18.5% improvement of lmbench3.PIPE.bandwidth.MB/sec on:"));
    assert!(r.body.contains(
        " master\n\n[still improvement on linux-next/master 0123456789abcdef0123456789abcdef01234567]\n\ntestcase: lmbench3\n"
    ));
    assert!(r.body.contains(
        "In addition to that, the commit also has significant impact on the following tests:\n\n+-"
    ));
    assert!(r.body.contains(
        "| testcase: change | will-it-scale: will-it-scale.per_process_ops 4.2% improvement |"
    ));
    // Improvements need no fix: no tags to add.
    assert!(!r.body.contains("Reported-by:"));
    assert!(r.body.contains("voluntary_context_switches\n\n***"));
    assert!(r
        .body
        .contains("***\nkbot-vm: 4 threads 1 socket with 8G memory\n=====\nrows\n\n\nDisclaimer:"));
}

#[test]
fn seed_report_as_mbox() {
    let cfg = config();
    let rendered = report::render(&seed_data(), &cfg).expect("valid test input");
    let addressing = mbox::Addressing {
        from: mbox::Mailbox::new(&cfg.robot_name, &cfg.robot_address),
        to: vec![mbox::Mailbox::new("Breno Leitao", "leitao@debian.org")],
        cc: vec![mbox::Mailbox::new(
            "Christian Brauner",
            "brauner@kernel.org",
        )],
        date_ms: 1_793_839_125_000,
        in_reply_to: None,
        references: Vec::new(),
    };
    let msg = mbox::message(&rendered, &addressing).expect("valid test input");
    let parsed = mail_parser::MessageParser::default()
        .parse(msg.as_bytes())
        .expect("parses");
    assert_eq!(parsed.subject(), Some(rendered.subject.as_str()));
    assert!(msg.ends_with(&rendered.body));
    let entry =
        mbox::mbox_entry(&msg, &cfg.robot_address, addressing.date_ms).expect("valid test input");
    assert!(entry.starts_with("From kbot@kbot.example.org Thu Nov  5 00:38:45 2026\n"));
    assert!(entry.ends_with("\n\n"));
}

/// One culprit on two tbox groups: the second finding becomes a section of
/// the first report, with its group and compare table, and is recognised as
/// covered once added (so a repeat adds nothing).
#[test]
fn a_finding_on_another_group_is_a_section_of_the_report() {
    let mut report = seed_data();
    let mut arm = seed_data();
    arm.machine.arch = "aarch64".into();
    arm.machine.page_size = 65536;
    let section = arm.as_section("lkp-arm64-64k");
    assert!(!report.covers("lkp-spr-2sp2", &section));
    assert!(report.covers("lkp-spr-2sp2", &report.as_section("lkp-spr-2sp2")));
    report.other_impacts.push(section.clone());
    assert!(report.covers("lkp-spr-2sp2", &section));
    let rendered = report::render(&report, &config()).expect("renders");
    let body = &rendered.body;
    assert!(body.contains(
        "In addition to that, the commit also has significant impact on the following tests:"
    ));
    assert!(body.contains("| testcase: change | lmbench3: lmbench3.PIPE.bandwidth.MB/sec"));
    let rule = "*".repeat(99);
    assert!(body.contains(&format!("{rule}\nlkp-arm64-64k: ")), "{body}");
    assert_eq!(
        body.matches(&report.compare_table.trim_end().to_string())
            .count(),
        2
    );
    // The subject and the Message-ID stay the first finding's.
    assert_eq!(
        rendered.message_id,
        report::render(&seed_data(), &config())
            .expect("renders")
            .message_id
    );
}
