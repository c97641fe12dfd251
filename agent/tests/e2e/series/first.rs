//! The first posts and every check of their answers: the series that
//! cannot apply, the build break and what its hostile Makefile reached,
//! v1's report in patch 2's thread and its culprit, the KCIDB document and
//! the server's git.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kbot_api::bisections::BisectionState;
use kbot_api::lists::SeriesState;
use kbot_testkit::smtp_sink::header;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::posts::subdirs;
use super::{Bait, Commits, Report, Run, LIST, PAT, ROBOT, WEB};
use crate::author::{Author, Posted};
use crate::lab::{self, KernelRepo};

impl Run {
    /// Phase 1: v1, a series that does not apply, a build break.
    pub(super) async fn first_posts(
        &mut self,
        author: &Author,
        linux: &KernelRepo,
        c: &Commits,
        bait: &Bait,
        agent_dir: &Path,
    ) -> Report {
        let cached = cached_kernels(agent_dir);
        let t_post = self.crew.clock.secs();
        let v1 = self.post(author, &c.h0, &["--cover-letter", "-v1"], &c.h0, &c.v1_tip);
        let noapply = self.post(author, &c.h0, &[], &c.hidden, &c.noapply);
        let broken = self.post(author, &c.h0, &["--cover-letter"], &c.h0, &c.broken);
        let chat = format!("chat-{t_post}-{}@example.org", rand::random::<u32>());
        self.archive.reply(
            "Ann Other <ann@example.org>",
            &chat,
            &v1.id(3),
            "[PATCH v1 3/3] Documentation: a note on the kernel API",
            "Looks fine to me.",
        );
        self.read_list().await;

        self.cannot_apply(&noapply, t_post).await;
        self.build_error(&broken, t_post, bait, agent_dir, &cached)
            .await;
        let report = self.report_of_v1(&v1, &c.h0, t_post).await;
        self.culprit_is_patch_2(&v1, linux, agent_dir).await;
        self.kcidb_and_git(&v1).await;
        self.chat = chat;
        report
    }

    async fn cannot_apply(&mut self, noapply: &Posted, t_post: u64) {
        let key = noapply.id(0);
        let mail = self
            .mail_to(
                &key,
                "[cannot apply to linux/master]",
                "the cannot-apply answer",
            )
            .await;
        self.say(format!(
            "noapply: answered {} ({}s)",
            header(&mail.data, "Subject"),
            self.crew.clock.secs() - t_post
        ));
        let s = self.series_of(&key).await;
        assert_eq!(s.state, SeriesState::CannotApply, "the non-applying series");
        assert_eq!(s.submission, None, "the non-applying series was tested");
    }

    /// Answered in the thread of patch 2 (the one that breaks it), found by
    /// building patch 1 on its own; what its hostile Makefile reached.
    async fn build_error(
        &mut self,
        broken: &Posted,
        t_post: u64,
        bait: &Bait,
        agent_dir: &Path,
        cached: &BTreeMap<PathBuf, String>,
    ) {
        let mail = self
            .mail_to(
                &broken.id(2),
                "[auto build test ERROR on linux/master]",
                "the build error answer",
            )
            .await;
        let text = &mail.data;
        for line in ["kbot_e2e_limit", ">> "] {
            assert!(
                text.contains(line),
                "no {line:?} in the build error answer:\n{text}"
            );
        }
        self.say(format!(
            "break: answered with the compiler's error ({}s)",
            self.crew.clock.secs() - t_post
        ));
        let uid = text
            .lines()
            .find_map(|l| l.split_once("error: hostile uid ").map(|(_, u)| u.trim()))
            .expect("the answer quotes the hostile build's uid line");
        assert_ne!(uid, "0", "the posted patch's build ran as root");
        let identity = std::fs::read_to_string(agent_dir.join("agent.json")).expect("agent.json");
        let identity: Value = serde_json::from_str(&identity).expect("agent.json is JSON");
        let token = identity["agent_token"].as_str().expect("an agent token");
        assert!(
            !text.contains(token),
            "the build error answer holds the agent's token"
        );
        assert!(
            text.contains("error: hostile agent.json: head: cannot open"),
            "the hostile build read agent.json:\n{text}"
        );
        assert!(
            !text.lines().any(|l| l.contains("KBOT_") && l.contains('=')),
            "the build error answer holds a KBOT_ variable:\n{text}"
        );
        // (A `wrote` line is a write into the sandbox's own root, whose
        // skeleton has the parents of its mounts: the host's directories
        // are checked below.)
        assert!(
            !text.contains("error: hostile connected"),
            "the hostile build connected out:\n{text}"
        );
        let connections = bait.connections.lock().expect("lock").clone();
        assert!(
            connections.is_empty(),
            "the hostile build connected to the test's listener: {connections:?}"
        );
        let sleeper = Command::new("pgrep")
            .args(["-f", &format!("sleep {}", bait.sleeper)])
            .stdout(Stdio::null())
            .status()
            .expect("pgrep");
        assert!(
            !sleeper.success(),
            "the hostile build's setsid sleeper outlived its build"
        );
        let left: Vec<PathBuf> = [agent_dir, &self.ccache_dir]
            .iter()
            .flat_map(|d| kbot_testkit::files_under(d, None))
            .filter(|f| f.ends_with("kbot-hostile-was-here"))
            .collect();
        assert!(
            left.is_empty(),
            "the hostile build wrote outside its object directory: {left:?}"
        );
        // (Empty on a cold cache: scripts/test runs the robot scenario first.)
        let now = cached_kernels(agent_dir);
        for (file, digest) in cached {
            assert_eq!(now.get(file), Some(digest), "{} changed", file.display());
        }
        let pages = self.job_log_pages_lack(token).await;
        self.say(format!(
            "break: the hostile build ran as uid {uid}, read no token or KBOT_ value, reached no \
             listener, left no process or file, changed none of {} cached kernel files; \
             {pages} job log pages hold no token",
            cached.len()
        ));
    }

    /// Every job's log page so far (ids are sequential): none holds the
    /// agent's token. How many there were.
    async fn job_log_pages_lack(&self, token: &str) -> u32 {
        let mut page = 1;
        loop {
            let response = self
                .http
                .get(format!("{}/jobs/{page}/log", self.url))
                .bearer_auth(&self.token)
                .send()
                .await
                .expect("GET a job's log page");
            if !response.status().is_success() {
                break;
            }
            let body = response.text().await.expect("the log page");
            assert!(
                !body.contains(token),
                "job {page}'s log page holds the agent's token"
            );
            page += 1;
        }
        assert!(
            page > 1,
            "no job log page was readable at {}/jobs/1/log",
            self.url
        );
        page - 1
    }

    async fn report_of_v1(&mut self, v1: &Posted, h0: &str, t_post: u64) -> Report {
        let patch2 = v1.id(2);
        let mail = self
            .mail_to(
                &patch2,
                &format!("Reported-by: kernel test robot <{ROBOT}>"),
                "v1's report in patch 2's thread",
            )
            .await;
        let text = &mail.data;
        let subject = header(text, "Subject");
        self.say(format!(
            "v1: reported in patch 2's thread ({}s after posting): {subject}",
            self.crew.clock.secs() - t_post
        ));
        assert_eq!(
            subject,
            "Re: [PATCH v1 2/3] fs/pipe: zero scratch pages under pipe->mutex in pipe_write()"
        );
        assert!(
            header(text, "References").contains(&patch2),
            "References lack patch 2"
        );
        assert!(
            header(text, "To").contains(PAT.1),
            "the report is To: {}",
            header(text, "To")
        );
        assert!(
            header(text, "Cc").contains(LIST),
            "the report is Cc: {}",
            header(text, "Cc")
        );
        assert!(
            mail.rcpt_to.contains(&format!("<{}>", PAT.1)),
            "{} is not a recipient: {:?}",
            PAT.1,
            mail.rcpt_to
        );
        let lines = [
            format!("url: {}/git/linux.git", self.url),
            format!("patch link: {WEB}/{patch2}/"),
            "| Closes: ".to_owned(),
        ];
        for line in &lines {
            assert!(
                text.contains(line.as_str()),
                "no {line:?} in the report:\n{text}"
            );
        }
        assert!(
            text.lines()
                .any(|l| l.starts_with("base: ") && l.contains(h0)),
            "the report's base: line does not name h0 {h0}:\n{text}"
        );
        assert!(
            !text.lines().any(|l| l.starts_with("[still regression")),
            "the report calls the series tip a branch head"
        );
        Report {
            message_id: header(text, "Message-ID"),
            subject,
        }
    }

    /// The first bad commit is patch 2 as applied, which the agent fetched
    /// from the server's git (the upstream repository never had it).
    async fn culprit_is_patch_2(&self, v1: &Posted, linux: &KernelRepo, agent_dir: &Path) {
        let detail = self.detail_of(v1).await;
        let bisections = self.client.bisections(50).await.expect("bisections");
        let first_bad = bisections
            .iter()
            .find(|b| b.state == BisectionState::Reported)
            .and_then(|b| b.first_bad.as_ref())
            .map(|c| c.sha.clone())
            .expect("a reported bisection with a first bad commit");
        let part2 = detail
            .parts
            .iter()
            .find(|p| p.index == 2)
            .and_then(|p| p.commit.clone())
            .expect("patch 2 applied");
        assert_eq!(first_bad, part2, "the first bad commit is not patch 2's");
        let mirrors = subdirs(&agent_dir.join("mirrors"));
        assert!(
            mirrors.iter().any(|m| lab::has_commit(m, &first_bad)),
            "the agent built {first_bad} without having it"
        );
        assert!(
            !linux.has(&first_bad),
            "the upstream repository has the series commit: the server's git was not needed"
        );
        self.say(format!(
            "v1: first bad commit {} is patch 2 as applied ({} base)",
            &first_bad[..12],
            detail.series.base_how.as_deref().unwrap_or("?")
        ));
    }

    /// The series' pair as a KCIDB v5.3 document, checked by KCIDB's own
    /// schema (kcidb-io); the series tip fetchable from the server's git
    /// with a token, not without (`/git/` is closed by default).
    async fn kcidb_and_git(&self, v1: &Posted) {
        let detail = self.detail_of(v1).await;
        let submission = detail.series.submission.expect("v1 was tested");
        let kcidb: Value = self
            .http
            .get(format!(
                "{}/api/v1/submissions/{submission}/kcidb",
                self.url
            ))
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .expect("the KCIDB document")
            .json()
            .await
            .expect("KCIDB JSON");
        let mut python = Command::new("python3")
            .args([
                "-c",
                "import json, sys, kcidb_io; kcidb_io.schema.V5_3.validate(json.load(sys.stdin))",
            ])
            .stdin(Stdio::piped())
            .spawn()
            .expect("python3");
        std::io::Write::write_all(
            &mut python.stdin.take().expect("stdin"),
            kcidb.to_string().as_bytes(),
        )
        .expect("to python3");
        assert!(
            python.wait().expect("python3").success(),
            "KCIDB v5.3 refuses the series pair's document"
        );
        let count = |what: &str, ok: &dyn Fn(&Value) -> bool| {
            kcidb[what]
                .as_array()
                .map_or(0, |all| all.iter().filter(|v| ok(v)).count())
        };
        assert!(
            count("builds", &|b| b["status"] == "PASS"
                && b["architecture"] == "x86_64")
                > 0,
            "the KCIDB document has no passed x86_64 build"
        );
        assert!(
            count("tests", &|t| t["status"] == "DONE"
                && t["number"]["value"].as_f64().is_some_and(|v| v > 0.0))
                > 0,
            "the KCIDB document has no measured test"
        );
        self.say(format!(
            "KCIDB: {} checkouts, {} builds, {} tests, valid v5.3",
            count("checkouts", &|_| true),
            count("builds", &|_| true),
            count("tests", &|_| true)
        ));
        let git_url = format!("{}/git/linux.git", self.url);
        let tip = detail.series.tip.expect("the series tip");
        let with_token = Command::new("git")
            .args([
                "-c",
                &format!("http.extraHeader=Authorization: Bearer {}", self.token),
            ])
            .args(["ls-remote", &git_url])
            .output()
            .expect("git ls-remote");
        assert!(
            String::from_utf8_lossy(&with_token.stdout).contains(&tip),
            "the series tip is not fetchable with a token from {git_url}"
        );
        let anonymous = Command::new("git")
            .args(["ls-remote", &git_url])
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("git ls-remote");
        assert!(
            !anonymous.success(),
            "an anonymous reader fetched {git_url}"
        );
    }
}

/// The digests of the kernels the agent has cached (not their meta.json,
/// which the agent rewrites when it uses a kernel).
fn cached_kernels(agent_dir: &Path) -> BTreeMap<PathBuf, String> {
    kbot_testkit::files_under(agent_dir, None)
        .into_iter()
        .filter(|f| {
            f.components().any(|c| c.as_os_str() == "build-cache")
                && f.file_name().is_some_and(|n| n != "meta.json")
        })
        .map(|f| {
            let bytes = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let digest = hex::encode(Sha256::digest(&bytes));
            (f, digest)
        })
        .collect()
}
