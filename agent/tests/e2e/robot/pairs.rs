//! After the bisections: a change of another kind, a change below the
//! mode's sight, an upstream job file, and the report's run reproduced.

use std::process::{Command, Stdio};

use kbot_api::submissions::{ComparisonView, SubmitRequest, Verdict};
use kbot_core::job::SkipKind;

use super::Run;
use crate::lab;

const BW_PIPE: &str = "bw_pipe.PIPE.bandwidth.MB/sec";

/// A comparison as one line: the metric, its verdict, the means and what
/// the mode is blind to.
fn row(c: &ComparisonView) -> String {
    let mean = |m: Option<f64>| m.map_or("-".to_owned(), |m| format!("{m:.1}"));
    let change = c
        .change_percent
        .map(|p| format!(" ({p:+.2}%)"))
        .unwrap_or_default();
    // What the mode cannot see matters where it says `same`.
    let blind = match &c.measured_by {
        Some(m) if c.blind_same() => format!(", measured by {}, blind to {}", m.mode, m.blind_to),
        _ => String::new(),
    };
    format!(
        "{}: {}, {} -> {}{change}{blind}",
        c.metric,
        c.verdict,
        mean(c.base_mean),
        mean(c.head_mean)
    )
}

impl Run {
    /// h0..`head` of `job_file`, bisection off, at most `max_runs` a side.
    async fn pair(&self, job_file: String, head: &str, max_runs: u32) -> i64 {
        self.lab
            .client
            .submit(&SubmitRequest {
                repo: "linux".into(),
                job_file,
                base: Some(self.linux.commit("h0").into()),
                head: self.linux.commit(head).into(),
                priority: 0,
                max_runs: Some(max_runs),
                bisect: Some(false),
            })
            .await
            .unwrap_or_else(|e| panic!("submitting h0..{head}: {e}"))
            .id
    }

    /// lmbench's bw_pipe (64 KiB writes, two runs a side of three samples)
    /// on h0 against two branches, both pairs queued at once:
    /// - `ring` (a 2-slot pipe ring): each write blocks every 8 KiB, and the
    ///   monitor rows show it as context switches (`vmstat.system.cs`,
    ///   `different`);
    /// - `contend` (pipe_write releases and retakes the pipe mutex once
    ///   more, the seed report's change in miniature) costs only when the
    ///   reader and the writer contend on different CPUs, which a 1-vCPU
    ///   exact clock cannot show: `same`, labelled below the mode's sight,
    ///   never a bare "no change".
    pub(super) async fn ring_and_contend(&mut self) {
        let job = format!(
            "testcase: bw_pipe\nkconfig: {}\ncompiler: gcc-12\nruns: 2\nnr_threads: 1\n\
             bw_pipe:\n  size: 64k\n  total: 8m\n  repetitions: 3\narch: x86_64\n",
            self.kconfig
        );
        let t = self.crew.clock.secs();
        let ring = self.pair(job.clone(), "ring", 2).await;
        let contend = self.pair(job, "contend", 2).await;

        self.until_done("ring", ring).await;
        let results = self.lab.client.results(ring).await.expect("results");
        let rows = results
            .comparisons
            .iter()
            .filter(|c| c.metric == "vmstat.system.cs" || c.metric == BW_PIPE)
            .map(row)
            .collect::<Vec<_>>()
            .join("; ");
        self.crew.say(format!(
            "ring pair (submission {ring}, {}s): {rows}",
            self.crew.clock.secs() - t
        ));
        assert!(
            results
                .comparisons
                .iter()
                .any(|c| c.metric == "vmstat.system.cs"
                    && c.verdict == Verdict::Different
                    && c.change_percent.unwrap_or(0.0) > 50.0),
            "the 2-slot pipe ring does not show as more context switches (vmstat.system.cs)"
        );

        self.until_done("contend", contend).await;
        let results = self.lab.client.results(contend).await.expect("results");
        let rows: Vec<_> = results
            .comparisons
            .iter()
            .filter(|c| c.metric == BW_PIPE)
            .collect();
        let shown: Vec<String> = rows.iter().copied().map(row).collect();
        self.crew.say(format!(
            "contend pair (submission {contend}, {}s): {}",
            self.crew.clock.secs() - t,
            shown.join("; ")
        ));
        assert!(
            rows.len() == 1
                && rows[0].blind_same()
                && rows[0]
                    .measured_by
                    .as_ref()
                    .is_some_and(|m| m.blind_to.contains("contention between CPUs")),
            "the contend pair's bw_pipe is not a `same` labelled blind to contention between CPUs"
        );
        let page = self.lab.page(&format!("/submissions/{contend}")).await;
        for says in [
            "This <em>same</em> is below that sight",
            "Measured on the exact clock (icount), 1 vCPU",
        ] {
            assert!(
                page.contains(says),
                "the contend pair's page does not say {says:?}"
            );
        }
    }

    /// lkp-tests' stress-ng-part4.yaml as upstream has it, with `--set`
    /// (LKP's `lkp submit -s`) for this lab: a 5 s testtime, one run, and
    /// the kconfig and compiler of the kernels already built (h0 and ring:
    /// no new build). Of its matrix kbot runs switch with method pipe
    /// (Debian's stress-ng in the initramfs), with upstream's metric names;
    /// the other stressors and switch's mq and sem-sysv methods are skipped
    /// with their reasons.
    pub(super) async fn upstream_stress_ng(&mut self) {
        let path = lab::checkout().join("jobs/upstream/stress-ng-part4.yaml");
        let upstream = std::fs::read_to_string(&path).expect("the upstream job file");
        let sets: Vec<_> = [
            "testtime=5s".to_owned(),
            "runs=1".to_owned(),
            format!("kconfig={}", self.kconfig),
            "compiler=gcc-12".to_owned(),
            "arch=x86_64".to_owned(),
        ]
        .iter()
        .map(|s| kbot_core::job::set::parse_set(s).expect("a setting"))
        .collect();
        let job = kbot_core::job::set::set_variables(&upstream, &sets).expect("settings apply");
        let t = self.crew.clock.secs();
        let id = self.pair(job, "ring", 1).await;
        self.until_done("stress-ng", id).await;

        let show = self
            .lab
            .client
            .submission(id)
            .await
            .expect("the submission");
        let results = self.lab.client.results(id).await.expect("results");
        let planned: Vec<String> = show
            .atomic_jobs
            .iter()
            .map(|j| format!("{}/{:?}", j.testcase, j.options))
            .collect();
        self.crew.say(format!(
            "stress-ng pair (submission {id}, {}s): {planned:?}",
            self.crew.clock.secs() - t
        ));
        let skipped = &show.submission.skipped;
        eprintln!("  skipped: {} atomic jobs/keys, e.g.:", skipped.len());
        for s in skipped.iter().filter(|s| s.name.contains("switch")) {
            eprintln!("  {:?} {}: {}", s.kind, s.name, s.reason);
        }
        assert_eq!(
            planned.len(),
            1,
            "the upstream file's atomic jobs: switch, method pipe"
        );
        assert_eq!(results.runs.len(), 2, "the stress-ng runs");
        for run in &results.runs {
            let m = |name: &str| run.metrics.get(name).copied().unwrap_or(0.0);
            eprintln!(
                "  {:?} run: stress-ng.switch.ops {} ops_per_sec {} pass {}",
                run.side,
                m("stress-ng.switch.ops"),
                m("stress-ng.switch.ops_per_sec"),
                m("stress-ng.switch.pass")
            );
            assert!(
                m("stress-ng.switch.ops_per_sec") > 0.0
                    && m("stress-ng.switch.pass") == 1.0
                    && m("stress-ng.switch.ops") > 0.0,
                "the stress-ng runs do not carry upstream's stress-ng.switch.{{ops,ops_per_sec,pass}}"
            );
        }
        let skipped_for = |part: &str, why: &str| {
            skipped
                .iter()
                .any(|s| s.kind == SkipKind::Job && s.name.contains(part) && s.reason.contains(why))
        };
        for method in ["mq-", "sem-sysv-"] {
            assert!(
                skipped.iter().any(|s| s.kind == SkipKind::Job
                    && s.name.contains(method)
                    && s.name.contains("switch")
                    && s.reason.contains("not a pipe")),
                "switch's {method} method is not skipped with its reason"
            );
        }
        assert!(
            skipped_for("-sem-", "kbot runs:"),
            "the sem stressor of the upstream file is not skipped with its reason"
        );
    }

    /// The report's materials name a script per side of the compared job.
    /// The head's, run from an empty directory as the report's reader
    /// would (`kbot-server repro JOB`), clones the commit, builds the
    /// kernel with the run's .config (cold: no ccache), downloads the run's
    /// initramfs and boots it with the run's QEMU line. On the icount clock
    /// it must give the run's numbers to the last digit.
    pub(super) async fn reproduce(&mut self) {
        let t = self.crew.clock.secs();
        let message = &self.legs[0]
            .report
            .as_ref()
            .expect("the x86_64 report")
            .message;
        let materials = message
            .split_whitespace()
            .find(|w| w.starts_with("http") && w.contains("/archive/"))
            .expect("the report links its materials")
            .to_owned();
        let listing = reqwest::get(&materials)
            .await
            .and_then(|r| r.error_for_status())
            .expect("the materials")
            .text()
            .await
            .expect("the materials");
        let job: i64 = listing
            .lines()
            .find_map(|l| {
                l.strip_prefix("head (job ")?
                    .split(')')
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("the materials ({materials}) name no script for the head"));
        let script = self
            .lab
            .client
            .repro(job)
            .await
            .expect("the reproduction script");
        let dir = self.work.clone();
        std::fs::write(dir.join("repro.sh"), script).expect("repro.sh");
        let git = self.linux.dir.clone();
        let out = tokio::task::spawn_blocking(move || {
            let log = std::fs::File::create(dir.join("repro.log")).expect("repro.log");
            Command::new("sh")
                .arg(dir.join("repro.sh"))
                .arg(dir.join("repro"))
                .env("KBOT_REPRO_GIT", git)
                .stderr(Stdio::from(log))
                .output()
                .expect("sh repro.sh")
        })
        .await
        .expect("the reproduction");
        let stdout = String::from_utf8_lossy(&out.stdout);
        for line in stdout.lines() {
            eprintln!("  repro| {line}");
        }
        assert!(
            out.status.success(),
            "the reproduction script of job {job} failed ({}):\n{}",
            out.status,
            lab::tail(&self.work.join("repro.log"), 20)
        );
        let same = stdout.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.len() == 4
                && words[0] == self.kpi
                && words[1].parse::<f64>().is_ok()
                && words[2].parse::<f64>().is_ok()
                && words[3] == "same"
        });
        assert!(
            same,
            "the reproduction of job {job} does not give the run's {}",
            self.kpi
        );
        assert!(
            stdout.lines().any(|l| l.starts_with("reproduced: yes")),
            "the reproduction of job {job} is not exact"
        );
        self.crew.say(format!(
            "job {job} reproduced by its script in {}s (its kernel built cold)",
            self.crew.clock.secs() - t
        ));
    }
}
