//! The full form's later steps, each answered in v1's report thread: v2
//! and Pat's `#kbot test`, a `Closes:` fix on master, and v1's slow patch
//! landing on master anyway.

use std::process::Command;
use std::time::Duration;

use kbot_api::lists::SeriesState;
use kbot_api::reports::ReportKind;
use serde_json::Value;

use super::{Commits, Report, Run};
use crate::author::{Author, Commit, NOBODY};
use crate::lab::KernelRepo;

impl Run {
    /// Phase 2: v2 is tested clean, and Pat asks whether the revert fixes
    /// v1's slowdown.
    pub(super) async fn second_version_and_a_retest(
        &mut self,
        author: &Author,
        linux: &KernelRepo,
        c: &Commits,
        report: &Report,
    ) {
        let t2 = self.crew.clock.secs();
        let v2 = self.post(author, &c.h0, &["--cover-letter", "-v2"], &c.h0, &c.v2_tip);
        let slow = linux.commit("slow");
        let test_id = format!("test-{t2}-{}@example.org", rand::random::<u32>());
        let revert = author.diff(slow, &format!("{slow}^"), "fs/pipe.c");
        self.archive.reply(
            "Pat Pipe <pat@example.org>",
            &test_id,
            &report.message_id,
            &report.subject,
            &format!("Does this fix it?\n\n#kbot test\n\n{revert}"),
        );
        self.read_list().await;
        self.mail_to(
            &test_id,
            "brings the metric back",
            "the answer to #kbot test",
        )
        .await;
        self.say(format!(
            "#kbot test: answered 'brings the metric back' ({}s)",
            self.crew.clock.secs() - t2
        ));
        loop {
            self.alive("v2 to be tested");
            let state = self.series_of(&v2.id(0)).await.state;
            match state {
                SeriesState::Tested => break,
                SeriesState::Failed | SeriesState::CannotApply | SeriesState::BuildFailed => {
                    panic!("v2 ended {state:?}")
                }
                _ => tokio::time::sleep(Duration::from_secs(5)).await,
            }
        }
        let bisections = self.client.bisections(50).await.expect("bisections");
        assert_eq!(bisections.len(), 1, "v2 started a bisection");
        self.say(format!(
            "v2: tested clean ({}s)",
            self.crew.clock.secs() - t2
        ));
    }

    /// Phase 3: a commit on master closes the report.
    pub(super) async fn a_fix_closes_the_report(
        &mut self,
        author: &Author,
        linux: &KernelRepo,
        c: &Commits,
        report: &Report,
    ) -> String {
        let t3 = self.crew.clock.secs();
        let message = format!(
            "Documentation: note the pipe scratch pages are gone\n\nCloses: {}/reports/{}",
            self.url, report.message_id
        );
        // Dated now: fixes are looked for from a day before the report on.
        let closes = author.on(
            linux.commit("doc3"),
            Commit {
                parent: &c.h0,
                message: &message,
                author: NOBODY,
                date: Some(now_iso()),
            },
        );
        author.push(&linux.dir, &closes, "master");
        let mail = self
            .mail_to(
                &report.message_id,
                &closes,
                "the fix's answer in the report's thread",
            )
            .await;
        assert!(
            mail.data.contains("is marked fixed"),
            "the fix's answer:\n{}",
            mail.data
        );
        let regressions: Value = self
            .http
            .get(format!("{}/api/v1/regressions", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("regressions")
            .json()
            .await
            .expect("regressions JSON");
        assert_eq!(
            regressions[0]["state"], "fixed",
            "the regression: {regressions}"
        );
        self.say(format!(
            "Closes: the regression is fixed and the thread told ({}s)",
            self.crew.clock.secs() - t3
        ));
        closes
    }

    /// Phase 4: v1's slow patch lands on master anyway, applied under Ann's
    /// name by a maintainer: the same change (its patch-id) on another
    /// commit, so no second report, one answer in the report's thread
    /// naming where it landed, Cc the committer.
    pub(super) async fn the_slow_patch_lands_anyway(
        &mut self,
        author: &Author,
        linux: &KernelRepo,
        closes: &str,
        report: &Report,
    ) {
        let t4 = self.crew.clock.secs();
        let maintainer = author.as_committer("Mai Ntainer", "mai@example.org");
        let landed = maintainer.on(
            linux.commit("slow"),
            Commit {
                parent: closes,
                message: "fs/pipe: zero scratch pages under pipe->mutex in pipe_write()",
                author: ("Ann Other", "ann@example.org"),
                date: Some(now_iso()),
            },
        );
        author.push(&linux.dir, &landed, "master");
        let mail = self
            .mail_to(
                &report.message_id,
                &format!("commit:    {landed}"),
                "the landing's answer in the report's thread",
            )
            .await;
        for line in [
            "has landed (the same `git patch-id`",
            "branch:    master",
            "committer: Mai Ntainer <mai@example.org>",
        ] {
            assert!(
                mail.data.contains(line),
                "no {line:?} in the landing's answer"
            );
        }
        for who in ["<mai@example.org>", "<pat@example.org>"] {
            assert!(
                mail.rcpt_to.iter().any(|r| r == who),
                "{who} is not told of the landing"
            );
        }
        let reports = self.client.reports().await.expect("reports");
        let regressions = reports
            .iter()
            .filter(|r| r.kind == ReportKind::Regression)
            .count();
        assert_eq!(regressions, 1, "regression reports after the landing");
        self.say(format!(
            "landing: answered in the report's thread ({}s)",
            self.crew.clock.secs() - t4
        ));
    }
}

fn now_iso() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
