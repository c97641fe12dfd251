//! What each group found, and how the lab built its kernels.

use std::collections::BTreeSet;
use std::path::Path;

use kbot_api::bisections::{BisectionDetail, BisectionState};
use kbot_api::builds::{BuildState, BuildView, OrderState, OrderView};
use kbot_api::submissions::Side;
use kbot_testkit::smtp_sink::header;
use sha2::{Digest, Sha256};

use super::{Run, AUTHOR, BUILDER};
use crate::lab::KernelRepo;

impl Run {
    /// Prints leg `i`'s pair, bisection and report; fails unless the
    /// planted slowdown was reported to its author from the leg's tbox
    /// group, the zeroing function leading its profile.
    pub(super) async fn check_leg(&mut self, i: usize) {
        let leg = &self.legs[i];
        let detail = leg.ended.clone().expect("the bisection ended");
        let b = &detail.bisection;
        self.crew.say(format!("{}: the watch's pair:", leg.name));
        eprintln!("{}", self.summary(leg.submission.expect("submitted")).await);
        eprintln!("{}", self.bisection_table(&detail));
        if let Some(verify) = b.verify_submission {
            eprintln!("  verification:\n{}", self.summary(verify).await);
        }
        eprintln!("{}", built_kernels(&leg.builder_dir, &self.linux));
        let count = |log: &Path, what: &str| {
            std::fs::read_to_string(log)
                .unwrap_or_default()
                .matches(what)
                .count()
        };
        self.crew.say(format!(
            "{} builder: {} cached kernel(s) used, {} shared; test agent: {} downloaded",
            leg.name,
            count(&leg.builder_log, "kernel found in the build cache"),
            count(&leg.builder_log, "kernel shared"),
            count(&leg.tester.log, "kernel downloaded"),
        ));

        assert_eq!(
            b.state,
            BisectionState::Reported,
            "{}: bisection {}",
            leg.name,
            b.id
        );
        let first_bad = b.first_bad.as_ref().map(|c| c.sha.as_str());
        assert_eq!(
            first_bad,
            Some(self.linux.commit("slow")),
            "{}: the first bad commit",
            leg.name
        );
        assert_eq!(
            b.tbox_group, leg.group,
            "{}: bisection {}'s tbox group",
            leg.name, b.id
        );
        // Every run of the pair, the probes and the verification came from
        // this leg's tbox group.
        let pairs = [leg.submission, b.probe_submission, b.verify_submission];
        for s in pairs.into_iter().flatten() {
            let results = self.lab.client.results(s).await.expect("results");
            let groups: BTreeSet<&str> = results
                .runs
                .iter()
                .map(|r| r.tbox_group.as_deref().unwrap_or("?"))
                .collect();
            assert!(
                groups.iter().all(|g| *g == leg.group),
                "{}: submission {s} has runs from tbox group(s) {groups:?}",
                leg.name
            );
        }
        let verify = b
            .verify_submission
            .expect("a reported bisection was verified");
        let message_id = b
            .report
            .clone()
            .expect("a reported bisection names its report");
        let report = self
            .lab
            .client
            .report(&message_id)
            .await
            .expect("the report")
            .report;
        self.crew.say(format!(
            "{}: report {} ({}, to {}): {}",
            leg.name,
            report.id,
            report.state,
            report.recipients.join(", "),
            report.subject
        ));
        self.the_report_names_the_culprit(i, &report.message);
        self.the_profile_shows_the_zeroing(i, verify).await;
        self.legs[i].report = Some(report);
    }

    /// The bisection and its steps, with the planted commits' names.
    fn bisection_table(&self, detail: &BisectionDetail) -> String {
        let b = &detail.bisection;
        let name = |sha: &str| self.linux.name_of(sha).unwrap_or("?");
        let mut out = format!(
            "bisection {}: {}, good {} ({}), bad {} ({}), metric {}, tbox group {}\n  \
             {} steps, {} builds, {} runs, {} s wall{}{}\n  \
             step  commit        name     state      runs  failed  failure          change   secs  subject",
            b.id,
            b.state,
            &b.good[..12],
            name(&b.good),
            &b.bad[..12],
            name(&b.bad),
            b.metric,
            b.tbox_group,
            b.steps,
            b.builds,
            b.runs,
            b.wall_secs,
            b.reason.as_ref().map(|r| format!("; reason: {r}")).unwrap_or_default(),
            if b.remaining.is_empty() {
                String::new()
            } else {
                format!("; remaining: {:?}", b.remaining)
            },
        );
        for s in &detail.steps {
            let change = s
                .change_percent
                .map(|c| format!("{c:+.1}%"))
                .unwrap_or_default();
            let secs = s
                .finished_at
                .map(|f| format!("{:.0}", (f - s.started_at) as f64 / 1000.0))
                .unwrap_or_default();
            out += &format!(
                "\n  {:>4}  {}  {:<7}  {:<9}  {:>4}  {:>6}  {:<15}  {change:>7}  {secs:>5}  {}",
                s.index,
                &s.sha[..12],
                name(&s.sha),
                s.state.as_str(),
                s.runs,
                s.failed_runs,
                s.failure.as_deref().unwrap_or(""),
                s.subject
            );
        }
        if let Some(c) = &b.first_bad {
            out += &format!(
                "\n  first bad: {} ({}) {} <{}>: {}",
                &c.sha[..12],
                name(&c.sha),
                c.author_name,
                c.author_email,
                c.subject
            );
        }
        out
    }

    /// To: the slowdown's author, the commit in the Subject, the group
    /// named, and the zeroing function among the top three
    /// perf-profile.self movers.
    fn the_report_names_the_culprit(&self, i: usize, message: &str) {
        let leg = &self.legs[i];
        // The header lines as written, folds included.
        let head = message.split("\n\n").next().unwrap_or_default();
        let mut shown = false;
        for line in head.lines() {
            if !line.starts_with([' ', '\t']) {
                shown = ["To:", "Cc:", "Subject:"]
                    .iter()
                    .any(|h| line.starts_with(h));
            }
            if shown {
                eprintln!("  {line}");
            }
        }
        let to = header(message, "To");
        assert!(
            to.contains(AUTHOR),
            "{}: the report's To: is {to:?}",
            leg.name
        );
        let slow = &self.linux.commit("slow")[..10];
        let subject = header(message, "Subject");
        assert!(
            subject.contains(slow),
            "{}: the report's Subject {subject:?} does not name {slow}",
            leg.name
        );
        assert!(
            message.contains(&format!("/{}/", leg.group)),
            "{}: the report does not name its tbox group",
            leg.name
        );
        // Where the cycles went: the guests' kernel profiles.
        let self_rows: Vec<&str> = message
            .lines()
            .filter(|l| {
                l.find("  perf-profile.self.")
                    .is_some_and(|at| l[..at].contains(|c: char| c.is_ascii_digit()))
            })
            .collect();
        eprintln!("  the report's top perf-profile.self rows:");
        for row in self_rows.iter().take(5) {
            eprintln!("  {row}");
        }
        assert!(
            self_rows
                .iter()
                .take(3)
                .any(|r| r.contains("perf-profile.self.cpu-clock.clear_page")),
            "{}: the zeroing function (clear_page*) is not among the report's top three \
             perf-profile.self rows",
            leg.name
        );
    }

    /// The dashboard's profile page of the verification pair (its top self
    /// movers) and its differential flame graph, and call chains a reader
    /// can trust: the guest kernel unwinds with ORC, not by guessing.
    async fn the_profile_shows_the_zeroing(&self, i: usize, verify: i64) {
        let leg = self.legs[i].name;
        let page = self
            .lab
            .page(&format!("/submissions/{verify}/jobs/0/profile"))
            .await;
        let movers = top_self_movers(&page);
        self.crew.say(format!(
            "{leg}: the dashboard's top self movers of submission {verify}: {movers:?}"
        ));
        assert!(
            movers.iter().any(|m| m.starts_with("clear_page")),
            "{leg}: the zeroing function is not among the dashboard's top three self movers"
        );
        let svg = self
            .lab
            .page(&format!("/submissions/{verify}/jobs/0/profile.svg"))
            .await;
        assert!(
            svg.contains("clear_page"),
            "{leg}: the flame graph does not draw clear_page"
        );

        // A head run's folded stacks go vfs_write -> pipe_write (through
        // 6.1's new_sync_write), and no wake-up function sits between
        // vfs_read and pipe_read.
        let results = self.lab.client.results(verify).await.expect("results");
        let head = results
            .runs
            .iter()
            .find(|r| r.side == Side::Head)
            .expect("a head run")
            .job_id;
        let stacks = self.lab.page(&format!("/api/v1/jobs/{head}/profile")).await;
        let unwound = stacks.lines().find(|l| {
            ["pipe_write;", "pipe_write "].iter().any(|end| {
                l.contains(&format!(";vfs_write;{end}"))
                    || l.contains(&format!(";vfs_write;new_sync_write;{end}"))
            })
        });
        let Some(unwound) = unwound else {
            panic!("{leg}: no stack of job {head} goes vfs_write -> pipe_write");
        };
        let guessed: Vec<&str> = stacks
            .lines()
            .filter(|l| {
                ["vfs_read", "vfs_write"].iter().any(|f| {
                    ["autoremove_wake_function", "update_cfs_rq_load_avg"]
                        .iter()
                        .any(|g| l.contains(&format!(";{f};{g};")))
                })
            })
            .take(3)
            .collect();
        assert!(
            guessed.is_empty(),
            "{leg}: guessed call chains in job {head}: {guessed:?}"
        );
        let shown: String = unwound.chars().take(160).collect();
        self.crew.say(format!(
            "{leg}: job {head} unwinds vfs_write -> pipe_write: {shown}"
        ));
    }

    /// Every kernel built for `arch` this run went through the server's
    /// build store once (claims 1), with the image the test agents' caches
    /// hold (each kernel in at least one). On x86_64 the builder built
    /// every kernel on build orders (each leased once, all done) for both
    /// groups, and the machines that only test never ran make. The arm64
    /// agent builds and tests; a kernel in its cache from an earlier run
    /// asks the server nothing.
    pub(super) async fn check_shared_builds(&self, arch: &str) {
        let builds: Vec<BuildView> = self.lab.json("/api/v1/builds?limit=500").await;
        let legs: Vec<_> = self
            .legs
            .iter()
            .filter(|l| l.build_arch() == arch)
            .collect();
        let shared = std::fs::read_to_string(&legs[0].builder_log)
            .unwrap_or_default()
            .matches("kernel shared")
            .count();
        let mine: Vec<&BuildView> = builds.iter().filter(|b| b.arch == arch).collect();
        let ready: Vec<&BuildView> = mine
            .iter()
            .copied()
            .filter(|b| b.state == BuildState::Ready)
            .collect();
        let mut bad: Vec<String> = mine
            .iter()
            .filter(|b| b.claims != 1 || b.state == BuildState::Building)
            .map(|b| b.build_key.clone())
            .collect();
        let mut held = vec![0; legs.len()];
        let mut bytes = 0;
        for b in &ready {
            let image = b
                .files
                .iter()
                .find(|f| f.name == "bzImage")
                .expect("a bzImage");
            bytes += image.bytes;
            let mut anywhere = false;
            for (n, leg) in legs.iter().enumerate() {
                let path = leg
                    .tester
                    .dir
                    .join("build-cache/kernels")
                    .join(&b.build_key)
                    .join("bzImage");
                let Ok(content) = std::fs::read(&path) else {
                    continue;
                };
                anywhere = true;
                held[n] += 1;
                if hex::encode(Sha256::digest(&content)) != image.sha256 {
                    bad.push(format!(
                        "{} (image differs from {}'s)",
                        b.build_key, leg.name
                    ));
                }
            }
            if !anywhere {
                bad.push(format!("{} (in no test agent's cache)", b.build_key));
            }
        }
        let held: Vec<String> = legs
            .iter()
            .zip(&held)
            .map(|(l, n)| format!("{} {n}", l.name))
            .collect();
        self.crew.say(format!(
            "shared builds ({arch}): {} ready ({} MiB in the store), {} failed, {shared} shared by \
             the builder; held by the test agents: {}",
            ready.len(),
            bytes >> 20,
            mine.len() - ready.len(),
            held.join(", ")
        ));
        assert!(
            bad.is_empty() && shared == ready.len(),
            "builds claimed more than once, unfinished or differing: {bad:?}; {shared} shared for {} ready",
            ready.len()
        );
        if arch != "x86_64" {
            return;
        }
        let orders: Vec<OrderView> = self.lab.json("/api/v1/builds/orders?limit=500").await;
        let mine: Vec<&OrderView> = orders.iter().filter(|o| o.arch == arch).collect();
        let agents: BTreeSet<_> = mine.iter().map(|o| o.agent.as_deref()).collect();
        self.crew.say(format!(
            "build orders ({arch}): {}, by {agents:?}",
            mine.len()
        ));
        let odd: Vec<_> = mine
            .iter()
            .filter(|o| {
                o.state != OrderState::Done || o.leases != 1 || o.agent.as_deref() != Some(BUILDER)
            })
            .collect();
        assert!(
            !mine.is_empty() && odd.is_empty(),
            "build orders not done once by the builder: {odd:?}"
        );
        for leg in legs {
            let objs = leg.tester.dir.join("objs");
            assert!(
                !objs.is_dir(),
                "a test-only agent built a kernel: {} exists",
                objs.display()
            );
        }
    }
}

/// The kernels a build directory holds, with their build times.
fn built_kernels(builder_dir: &Path, linux: &KernelRepo) -> String {
    let Ok(dirs) = std::fs::read_dir(builder_dir.join("build-cache/kernels")) else {
        return String::new();
    };
    let mut lines = Vec::new();
    for dir in dirs.flatten() {
        let Ok(meta) = std::fs::read_to_string(dir.path().join("meta.json")) else {
            continue;
        };
        let Ok(meta) = serde_json::from_str::<serde_json::Value>(&meta) else {
            continue;
        };
        let commit = meta["key"]["commit"].as_str().unwrap_or("?");
        let secs = meta["build_secs"].as_f64().unwrap_or(f64::NAN);
        lines.push(format!(
            "  kernel {} ({}) built in {secs:.0} s",
            &commit[..commit.len().min(12)],
            linux.name_of(commit).unwrap_or("?"),
        ));
    }
    lines.sort();
    lines.join("\n")
}

/// The first three functions of the profile page's self-time movers.
fn top_self_movers(page: &str) -> Vec<String> {
    let Some(start) = page.find("<table id=\"movers-self\">") else {
        return Vec::new();
    };
    let table = &page[start..];
    let table = &table[..table.find("</table>").unwrap_or(table.len())];
    table
        .split("<tr><td><code>")
        .skip(1)
        .filter_map(|row| row.split('<').next())
        .take(3)
        .map(str::to_owned)
        .collect()
}
