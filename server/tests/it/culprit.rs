//! One culprit, one mail: the same first bad commit bisected on two tbox
//! groups (as 0-day's x86_64 4K and arm64 64K test boxes) is one report with
//! a section per group, sent once the gather window is over; a third group
//! that finds it after the mail left answers in the report's thread. Every
//! regression links to the one report, and `#kbot`-style triage sees them
//! all. Simulated agents, a real SMTP server on loopback, both backends.

use std::time::Duration;

use kbot_testkit::smtp_sink::{addressed, header};
use kbot_testkit::{backends, smtp_sink, THREE_RUN_JOB};
use serde_json::json;

use crate::sim::fleet::Fleet;
use crate::sim::{self, id, poll, str_of, Sim, World, DEADLINE, KPI, REPO};

const BOB: &str = "Bob Blame <bob@example.org>";
const GROUPS: [&str; 3] = ["x86-4k", "arm64-64k", "late-box"];

/// The sim job pinned to one tbox group.
async fn submit_on(sim: &Sim<'_>, group: &str, base: &str, head: &str) -> i64 {
    let job_file = format!("{THREE_RUN_JOB}tbox_group: {group}\n");
    let body = json!({"repo": REPO, "job_file": job_file, "base": base, "head": head});
    id(&sim.post("/api/v1/submissions", body, 201).await)
}

/// (bisection, report, state) of each regression, oldest first.
async fn regressions(sim: &Sim<'_>) -> Vec<(Option<i64>, Option<i64>, String)> {
    sqlx::query_as("SELECT bisection_id, report_id, state FROM regressions ORDER BY id")
        .fetch_all(sim.t.db().read())
        .await
        .expect("regressions")
}

/// The gather window is over: what a wait of `KBOT_MAIL_GATHER_SECS` does.
async fn gather_window_ends(sim: &Sim<'_>) {
    sqlx::query("UPDATE report_outbox SET next_attempt_at = 0 WHERE state = 'pending'")
        .execute(sim.t.db().write())
        .await
        .expect("due now");
}

async fn mails(sink: &smtp_sink::Sink, n: usize) -> Vec<String> {
    poll(DEADLINE, || async {
        let got = sink.received();
        match got.len() {
            m if m >= n => Ok(got
                .iter()
                .map(|r| r.data.replace("\r\n", "\n"))
                .collect::<Vec<_>>()),
            m => Err(format!("{m} of {n} mails arrived")),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_culprit_on_several_tbox_groups_is_one_mail() {
    let world = World::new();
    world.repo.commits("culprit", 2);
    let bad = world
        .repo
        .commit_by("pipe: zero a page per write", Some(BOB));
    let head = world.repo.commits("culprit later", 3).pop().expect("head");
    world.model.plant(&world.repo, &bad, 0.8);
    for backend in backends() {
        let sink = smtp_sink::Sink::start(smtp_sink::Plan::default()).await;
        let port = sink.addr.port();
        let sim = Sim::start_with(backend, &world, move |c| {
            c.mail = sim::mail_to(port);
            // Longer than the test: the window ends when the test says so.
            c.mail.gather = Duration::from_secs(3600);
        })
        .await;
        let fleet =
            Fleet::enroll_groups(&sim, &[(GROUPS[0], 1), (GROUPS[1], 1), (GROUPS[2], 1)]).await;
        let base = world.repo.base.clone();

        // Two groups find the culprit within the window: one report.
        let first = [
            submit_on(&sim, GROUPS[0], &base, &head).await,
            submit_on(&sim, GROUPS[1], &base, &head).await,
        ];
        let done = fleet.run_until(sim.ended(&first, DEADLINE)).await;
        for d in &done {
            assert_eq!(
                str_of(&d["bisection"]["state"]),
                "reported",
                "{backend:?}: {d:#}"
            );
            assert_eq!(str_of(&d["bisection"]["first_bad"]["sha"]), bad);
        }
        let reports = sim.reports().await;
        assert_eq!(reports.len(), 1, "{backend:?}: {reports:#?}");
        let report = &reports[0];
        assert_eq!(str_of(&report["state"]), "pending", "{report}");
        assert!(
            sink.received().is_empty(),
            "{backend:?}: sent inside the window"
        );
        let rows = regressions(&sim).await;
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(
            rows.iter().all(|r| r.1 == report["id"].as_i64()),
            "{rows:?}"
        );

        gather_window_ends(&sim).await;
        let mail = mails(&sink, 1).await.remove(0);
        assert!(addressed(&mail, "To", BOB), "{mail}");
        let subject = header(&mail, "Subject");
        assert!(
            subject.contains(&bad[..10]) && subject.contains(KPI),
            "{subject}"
        );
        // The primary finding names one group; the section the other, with
        // its own compare table after the 0-day rule.
        let body = &mail[mail.find("\n\n").expect("body")..];
        assert!(body.contains("In addition to that, the commit also has significant impact on the following tests:"), "{body}");
        // Each group's compare table, its axes naming the group.
        for group in &GROUPS[..2] {
            let axes = format!("/64k/{group}/bw_pipe\n");
            assert!(
                body.contains(&axes),
                "{backend:?}: no {group} table in {body}"
            );
        }
        // Whichever group ended second is the section after the 0-day rule.
        let sections = GROUPS[..2]
            .iter()
            .filter(|g| body.contains(&format!("***\n{g}: ")))
            .count();
        assert_eq!(sections, 1, "{body}");
        assert_eq!(
            body.matches(&format!("| testcase: change | bw_pipe: {KPI}"))
                .count(),
            1,
            "{body}"
        );
        let message_id = header(&mail, "Message-ID").to_owned();

        // A third group after the mail left: a reply in its thread.
        let late = submit_on(&sim, GROUPS[2], &base, &head).await;
        let d = fleet
            .run_until(sim.ended(&[late], DEADLINE))
            .await
            .remove(0);
        assert_eq!(str_of(&d["bisection"]["state"]), "reported", "{d:#}");
        let got = mails(&sink, 2).await;
        let reply = &got[1];
        assert_eq!(header(reply, "In-Reply-To"), message_id, "{reply}");
        assert!(header(reply, "Subject").starts_with("Re: "), "{reply}");
        assert!(addressed(reply, "To", BOB), "{reply}");
        assert!(reply.contains(GROUPS[2]), "{reply}");
        let reports = sim.reports().await;
        let kinds: Vec<&str> = reports.iter().map(|r| str_of(&r["kind"])).collect();
        assert_eq!(
            kinds.iter().filter(|k| **k == "regression").count(),
            1,
            "{kinds:?}"
        );
        let rows = regressions(&sim).await;
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert!(
            rows.iter().all(|r| r.1 == report["id"].as_i64()),
            "{backend:?}: {rows:?}"
        );
        // The bisection detail of a joined finding points at the one report.
        assert_eq!(d["bisection"]["report_id"], report["id"], "{d:#}");

        assert_eq!(sink.received().len(), 2, "{backend:?}: a third mail");
        sim.stop().await;
    }
}
