//! The reports a bisection writes: mailed to the blamed commit's author,
//! written with mail off, one per change across cherry-picks (by patch-id),
//! and answered when the change lands elsewhere.

use kbot_testkit::smtp_sink;

use super::*;

/// The author of the planted regressions in the report tests.
const BOB: &str = "Bob Blame <bob@example.org>";

/// On the current branch: two commits, Bob's regression, two more commits.
/// Returns (the regression, the head).
fn blamed(world: &World, name: &str) -> (String, String) {
    world.repo.commits(name, 2);
    let bad = world.repo.commit_by("pipe: slow down writes", Some(BOB));
    let head = world.repo.commits(&format!("{name} later"), 2).pop();
    world.model.plant(&world.repo, &bad, SLOWER);
    (bad, head.expect("head"))
}

/// Bisects base..head; checks the report blames Bob's `bad` commit in the
/// robot's subject and addresses him. Returns the bisection's detail.
async fn bisect_to_bob(sim: &Sim<'_>, fleet: &Fleet<'_>, bad: &str, head: &str) -> Value {
    let d = sim.bisect(fleet, &sim.world.repo.base, head).await;
    let reports = sim.reports().await;
    let report = expect_reported(&reports, &d, bad);
    let subject = str_of(&report["subject"]);
    let start = format!("[{REPO}:main] [pipe] {}: {KPI} ", &bad[..10]);
    assert!(subject.starts_with(&start), "{subject}");
    assert!(subject.ends_with("% regression"), "{subject}");
    let recipients = report["recipients"].to_string();
    assert!(recipients.contains("bob@example.org"), "{report}");
    d
}

/// Waits until the sink has received `n` messages; returns them.
async fn mails(sink: &smtp_sink::Sink, n: usize) -> Vec<smtp_sink::Received> {
    poll(DEADLINE, || async {
        let got = sink.received();
        match got.len() {
            m if m >= n => Ok(got),
            m => Err(format!("{m} of {n} mails arrived")),
        }
    })
    .await
}

/// A server whose reports go to an SMTP sink on loopback.
async fn with_mail<'w>(backend: Backend, world: &'w World) -> (Sim<'w>, smtp_sink::Sink) {
    let sink = smtp_sink::Sink::start(smtp_sink::Plan::default()).await;
    let port = sink.addr.port();
    let sim = Sim::start_with(backend, world, move |c| c.mail = sim::mail_to(port)).await;
    (sim, sink)
}

/// The envelope and the header name Bob, the author of `bad`.
fn expect_mail_to_bob(mail: &smtp_sink::Received, bad: &str) {
    assert!(
        mail.rcpt_to.iter().any(|r| r == "<bob@example.org>"),
        "{mail:?}"
    );
    let data = mail.data.replace("\r\n", "\n");
    assert!(smtp_sink::addressed(&data, "To", BOB), "{data}");
    assert!(data.contains(&bad[..10]), "{data}");
}

/// The report of a bisection is written with mail off (`mail_off`), and with
/// mail on it reaches the SMTP server addressed to the first bad commit's
/// author.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_is_written_with_mail_off_and_mailed_to_the_author() {
    let world = World::new();
    let (bad, head) = blamed(&world, "pipe");
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let fleet = Fleet::enroll(&sim, 1).await;
        bisect_to_bob(&sim, &fleet, &bad, &head).await;
        let reports = sim.reports().await;
        assert_eq!(str_of(&reports[0]["state"]), "mail_off", "{reports:#?}");
        sim.stop().await;

        let (sim, sink) = with_mail(backend, &world).await;
        let fleet = Fleet::enroll(&sim, 1).await;
        bisect_to_bob(&sim, &fleet, &bad, &head).await;
        let got = mails(&sink, 1).await;
        assert_eq!(got.len(), 1, "{got:?}");
        expect_mail_to_bob(&got[0], &bad);
        sim.stop().await;
    }
}

/// 8. The same patch cherry-picked onto another branch, bisected after the
/// first was reported: `duplicate`, linked to the first's report, no second
/// report, and one answer in the report's thread saying where it landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cherry_picked_regression_is_a_duplicate() {
    let world = World::new();
    let (bad, head) = blamed(&world, "mainline");
    world.repo.branch_at("stable", &world.repo.base);
    world.repo.commits("stable", 2);
    let pick = world.repo.cherry_pick(&bad);
    let stable_head = world.repo.commits("stable later", 2).pop().expect("head");
    world.repo.checkout("main");
    world.model.plant(&world.repo, &pick, SLOWER);
    for backend in backends() {
        let (sim, sink) = with_mail(backend, &world).await;
        let fleet = Fleet::enroll(&sim, 2).await;
        let first = bisect_to_bob(&sim, &fleet, &bad, &head).await;
        let report_mail = mails(&sink, 1).await.remove(0);
        expect_mail_to_bob(&report_mail, &bad);

        let second = sim.bisect(&fleet, &world.repo.base, &stable_head).await;
        assert_eq!(
            (state(&second), first_bad(&second)),
            ("duplicate", pick.as_str()),
            "{second:#}"
        );
        assert_eq!(bisection(&second)["duplicate_of"], bisection(&first)["id"]);
        let reports = sim.reports().await;
        let regression: Vec<&Value> = reports
            .iter()
            .filter(|r| r["kind"] == "regression")
            .collect();
        assert_eq!(regression.len(), 1, "{backend:?}: {reports:#?}");
        expect_unreported(&reports, &second);
        expect_landed(&mails(&sink, 2).await[1], &report_mail, &pick);
        // Both are regressions to triage, linked to the report that stands:
        // the second marked a duplicate of the first by the robot.
        let expected = vec![
            (
                bisection(&first)["id"].as_i64(),
                regression[0]["id"].as_i64(),
                "new".to_owned(),
            ),
            (
                bisection(&second)["id"].as_i64(),
                regression[0]["id"].as_i64(),
                "duplicate".to_owned(),
            ),
        ];
        assert_eq!(regressions(&sim).await, expected, "{backend:?}");
        let chained: Vec<(i64, Option<i64>)> =
            sqlx::query_as("SELECT id, duplicate_of FROM regressions ORDER BY id")
                .fetch_all(sim.t.db().read())
                .await
                .expect("duplicate_of");
        assert_eq!(chained[1].1, Some(chained[0].0), "{backend:?}: {chained:?}");
        assert_eq!(
            sink.received().len(),
            2,
            "{backend:?}: one answer, no second report"
        );
        sim.stop().await;
    }
}

/// The answer in the report's thread: where the pick landed and its numbers,
/// To Bob (the report's addressee), Cc the committer.
fn expect_landed(answer: &smtp_sink::Received, report: &smtp_sink::Received, pick: &str) {
    let data = answer.data.replace("\r\n", "\n");
    let report_data = report.data.replace("\r\n", "\n");
    let report_id = smtp_sink::header(&report_data, "Message-ID");
    assert!(
        data.contains(&format!("\nIn-Reply-To: <{report_id}>\n")),
        "{data}"
    );
    let subject = smtp_sink::header(&report_data, "Subject");
    assert_eq!(
        smtp_sink::header(&data, "Subject"),
        format!("Re: {subject}"),
        "{data}"
    );
    for line in [
        format!("commit:    {pick}"),
        "branch:    stable".to_owned(),
        "committer: Cid Committer <cid@example.org>".to_owned(),
        "has landed (the same `git patch-id`".to_owned(),
    ] {
        assert!(data.contains(&line), "{line} in {data}");
    }
    assert!(smtp_sink::addressed(&data, "To", BOB), "{data}");
    for rcpt in ["<bob@example.org>", "<cid@example.org>"] {
        assert!(
            answer.rcpt_to.iter().any(|r| r == rcpt),
            "{rcpt}: {answer:?}"
        );
    }
}

/// (bisection, report, triage state) of each regression, oldest first.
async fn regressions(sim: &Sim<'_>) -> Vec<(Option<i64>, Option<i64>, String)> {
    let sql = "SELECT bisection_id, report_id, state FROM regressions ORDER BY id";
    sqlx::query_as(sql)
        .fetch_all(sim.t.db().read())
        .await
        .expect("regressions")
}
