//! The whole conversation: posted series, answers, commands, the fix.

use super::maintainer::{maintainer_pages, maintainer_walk};
use super::*;

/// What the test posts and where.
struct Scenario {
    base: String,
    /// v3 brings v1's slowdown back (the same patch-id as v1's patch 2).
    v3: Posted,
    /// The author's own commit of v1's patch 2 (the server applies its own).
    v1_second: String,
    v1: Posted,
    broken: Posted,
    build: Posted,
    v2: Posted,
    author: Author,
}

fn scenario(world: &World) -> Scenario {
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(world);
    author.at(&base);
    author.commit(
        "Documentation/pipe.rst",
        "pipes\n",
        "Documentation: describe pipe buffers",
    );
    let v1_second = author.commit(
        "fs/pipe.c",
        "zero pages on every write\n",
        "pipe: zero the page on every write",
    );
    author.commit(
        "fs/pipe.c",
        "zero pages on every write\n/* tuned */\n",
        "pipe: comment the write path",
    );
    let v1 = author.post(3, 1, &base, &[]);
    // A patch on top of a commit that was never posted: it cannot apply.
    author.at(&base);
    author.commit(
        "kernel/sys.c",
        "local change\n",
        "sys: a change nobody posted",
    );
    author.commit(
        "kernel/sys.c",
        "local change\nposted change\n",
        "sys: tidy the syscall table",
    );
    let broken = author.post(1, 1, &base, &[]);
    author.at(&base);
    author.commit("fs/splice.c", "syntax error\n", "splice: break the build");
    let build = author.post(1, 1, &base, &[]);
    author.at(&base);
    author.commit(
        "Documentation/pipe.rst",
        "pipes\n",
        "Documentation: describe pipe buffers",
    );
    author.commit(
        "fs/pipe.c",
        "reuse pages\n",
        "pipe: zero the page on every write",
    );
    author.commit(
        "fs/pipe.c",
        "reuse pages\n/* tuned */\n",
        "pipe: comment the write path",
    );
    let v1_cover = v1.message_id(0);
    let v2 = author.post(3, 2, &base, &[&format!("--in-reply-to={v1_cover}")]);
    author.at(&base);
    author.commit(
        "Documentation/pipe.rst",
        "pipes, v3\n",
        "Documentation: describe pipe buffers",
    );
    author.commit(
        "fs/pipe.c",
        "zero pages on every write\n",
        "pipe: zero the page on every write",
    );
    author.commit(
        "fs/pipe.c",
        "zero pages on every write\n/* tuned */\n",
        "pipe: comment the write path",
    );
    let v3 = author.post(3, 3, &base, &[&format!("--in-reply-to={v1_cover}")]);
    Scenario {
        base,
        v3,
        v1_second,
        v1,
        broken,
        build,
        v2,
        author,
    }
}

/// The whole conversation: posted series, answers, commands, the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn series_are_tested_and_answered_in_their_threads() {
    let world = World::new();
    let sc = scenario(&world);
    for backend in backends() {
        let sink = smtp_sink::Sink::start(smtp_sink::Plan::default()).await;
        let port = sink.addr.port();
        let sim = Sim::start_with(backend, &world, move |c| c.mail = sim::mail_to(port)).await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let inbox = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
        append(&inbox, &sc.v1.mails);
        let chat = reply(
            "Ann Other <ann@example.org>",
            &sc.v1.message_id(2),
            &sc.v1.subject(2),
            "chat-1@example.org",
            "Looks fine to me.\n",
        );
        append(&inbox, &[chat]);
        append(&inbox, &sc.broken.mails);
        append(&inbox, &sc.build.mails);
        let posted = std::time::Instant::now();
        let l = add_list(&sim, inbox.root()).await;
        let fleet = Fleet::enroll(&sim, 2).await;

        // v1 is applied on its base-commit; the planted slowdown is patch 2.
        let v1 = series_when(&sim, &sc.v1.message_id(0), |s| s["state"] == "testing").await;
        assert_eq!(
            (str_of(&v1["base"]), str_of(&v1["base_how"])),
            (sc.base.as_str(), "base-commit"),
            "{v1}"
        );
        let mut detail = sim.get(&format!("/api/v1/series/{}", id(&v1))).await;
        let parts = list(detail["parts"].take());
        let commits: Vec<String> = parts
            .iter()
            .skip(1)
            .map(|p| str_of(&p["commit"]).to_owned())
            .collect();
        assert_eq!(commits.len(), 3, "{parts:#?}");
        for c in &commits[1..] {
            world.model.set(c, GOOD * 0.8);
        }
        let build = series_when(&sim, &sc.build.message_id(0), |s| s["state"] == "testing").await;
        world
            .model
            .fail_saying(str_of(&build["tip"]), "build_failed", BUILD_LOG);

        // Does not apply: answered, not tested.
        let broken = series_when(&sim, &sc.broken.message_id(0), |s| {
            s["state"] == "cannot_apply"
        })
        .await;
        assert!(broken["submission"].is_null(), "{broken}");
        let m = mail_when(&sink, "cannot apply", |d| {
            in_reply_to(d, &sc.broken.message_id(0))
        })
        .await;
        let data = m.data.replace("\r\n", "\n");
        assert!(
            data.contains(&format!("[cannot apply to {REPO}/main]")),
            "{data}"
        );
        // Its unposted parent is a prerequisite-patch-id no list has.
        assert!(
            data.contains("prerequisite-patch-id ")
                && data.contains("is not among the patches posted"),
            "{data}"
        );

        // Tested, bisected inside the series, answered in patch 2's thread.
        let report = fleet
            .run_until(mail_when(&sink, "the regression report", |d| {
                in_reply_to(d, &sc.v1.message_id(2))
            }))
            .await;
        expect_report(&report, &sc.v1, &commits[1]);
        // BENCHMARKS.md quotes this line (`--nocapture`).
        eprintln!(
            "lists[{backend:?}]: series in the archive -> report in patch 2's thread: {} ms",
            posted.elapsed().as_millis()
        );
        let v1 = series_when(&sim, &sc.v1.message_id(0), |s| s["state"] == "tested").await;
        assert!(
            str_of(&v1["ref_name"]).starts_with("refs/kbot/series/fsdevel/"),
            "{v1}"
        );
        fetch_series(&sim, &v1, &commits[2]);
        maintainer_pages(&sim, &v1, &commits, &[inbox.root(), world.repo.path()]).await;
        if backend == kbot_testkit::Backend::Sqlite {
            maintainer_walk(&sim, &v1, &commits).await;
        }
        let data = report.data.replace("\r\n", "\n");
        assert!(
            !data.contains(&world.repo.path().display().to_string()),
            "{data}"
        );

        // The build break: its compiler lines.
        fleet
            .run_until(series_when(&sim, &sc.build.message_id(0), |s| {
                s["state"] == "build_failed"
            }))
            .await;
        let m = mail_when(&sink, "build error", |d| {
            in_reply_to(d, &sc.build.message_id(0))
        })
        .await;
        let data = m.data.replace("\r\n", "\n");
        assert!(
            data.contains(">> fs/splice.c:1:1: error: unknown type name 'syntax'"),
            "{data}"
        );
        assert!(
            data.contains("| Reported-by: kernel test robot <kbot@kbot.test>"),
            "{data}"
        );

        // v2, `#kbot test` with the fix inline, a stranger's `#kbot invalid`.
        let report_id = header(&report.data.replace("\r\n", "\n"), "Message-ID");
        let report_subject = header(&report.data.replace("\r\n", "\n"), "Subject");
        let fix = fix_patch(&sc.author, &sc.v1_second);
        let test = reply(
            PAT,
            &report_id,
            &report_subject,
            "test-1@example.org",
            &format!("Does this fix it?\n\n#kbot test\n\n{fix}"),
        );
        let stranger = reply(
            "Eve <eve@example.org>",
            &report_id,
            &report_subject,
            "invalid-1@example.org",
            "#kbot invalid\n",
        );
        append(&inbox, &sc.v2.mails);
        append(&inbox, &[test, stranger]);
        sim.post(&format!("/api/v1/lists/{l}/read"), json!({}), 200)
            .await;
        // The stranger's refusal is recorded, not mailed (see trust.rs).
        let refused = poll(DEADLINE, || async {
            let commands = list(sim.get(&format!("/api/v1/lists/{l}/commands")).await);
            commands
                .into_iter()
                .find(|c| c["message_id"] == "invalid-1@example.org")
                .ok_or_else(|| "the stranger's command is not recorded yet".to_owned())
        })
        .await;
        assert_eq!(str_of(&refused["state"]), "refused", "{refused}");
        let answered = fleet
            .run_until(mail_when(&sink, "the fix's result", |d| {
                in_reply_to(d, "test-1@example.org") && d.contains("brings the metric back")
            }))
            .await;
        assert!(
            answered.rcpt_to.iter().any(|r| r == "<pat@example.org>"),
            "{answered:?}"
        );
        assert!(
            !sink
                .received()
                .iter()
                .any(|m| in_reply_to(&m.data.replace("\r\n", "\n"), "invalid-1@example.org")),
            "a stranger's refusal is not mailed"
        );
        let v2 = fleet
            .run_until(series_when(&sim, &sc.v2.message_id(0), |s| {
                s["state"] == "tested"
            }))
            .await;
        assert_eq!(str_of(&v2["base_how"]), "base-commit", "{v2}");
        let bisections = sim.bisections().await;
        assert_eq!(bisections.len(), 1, "v2 regresses nothing: {bisections:#?}");

        // A fix with `Closes:` lands on the watched branch.
        let regressions = list(sim.get("/api/v1/regressions").await);
        assert_eq!(regressions.len(), 1, "{regressions:#?}");
        assert_eq!(
            str_of(&regressions[0]["state"]),
            "new",
            "the stranger's command changed nothing"
        );
        world.repo.checkout("main");
        let message = format!("pipe: reuse pages\n\nCloses: https://kbot.test/reports/{report_id}");
        let closes = world.repo.commit_by(&message, Some(PAT));
        let watch = json!({"repo": REPO, "branch": "main", "job_file": JOB, "interval_secs": 1});
        sim.post("/api/v1/watches", watch, 201).await;
        let fixed = fleet
            .run_until(mail_when(&sink, "the fix landed", |d| {
                in_reply_to(d, &report_id) && d.contains(&closes)
            }))
            .await;
        assert!(fixed.data.contains("is marked fixed"), "{}", fixed.data);
        let regressions = list(sim.get("/api/v1/regressions").await);
        assert_eq!(
            str_of(&regressions[0]["state"]),
            "fixed",
            "{regressions:#?}"
        );

        // v3 brings the slowdown back: no second report, a pointer to the first.
        append(&inbox, &sc.v3.mails);
        sim.post(&format!("/api/v1/lists/{l}/read"), json!({}), 200)
            .await;
        let v3 = series_when(&sim, &sc.v3.message_id(0), |s| s["state"] != "waiting").await;
        let mut detail = sim.get(&format!("/api/v1/series/{}", id(&v3))).await;
        for p in list(detail["parts"].take()).iter().skip(2) {
            world.model.set(str_of(&p["commit"]), GOOD * 0.8);
        }
        let still = fleet
            .run_until(mail_when(&sink, "v3's pointer", |d| {
                in_reply_to(d, &sc.v3.message_id(2))
            }))
            .await;
        let data = still.data.replace("\r\n", "\n");
        assert!(
            data.contains("still has the regression") && data.contains(&report_id),
            "{data}"
        );
        let reports = sim.reports().await;
        let regression_reports = reports.iter().filter(|r| r["kind"] == "regression").count();
        assert_eq!(regression_reports, 1, "{reports:#?}");
        world.repo.git(&["reset", "-q", "--hard", &sc.base]);
        sim.stop().await;
    }
}

/// The report of patch 2: threaded, addressed and tagged as 0-day's are.
fn expect_report(m: &Received, v1: &Posted, first_bad: &str) {
    let data = m.data.replace("\r\n", "\n");
    let patch2 = v1.message_id(2);
    assert_eq!(
        header(&data, "Subject"),
        format!("Re: {}", v1.subject(2)),
        "{data}"
    );
    let refs = header(&data, "References");
    assert!(
        refs.contains(&v1.message_id(0)) && refs.ends_with(&patch2),
        "{refs}"
    );
    assert!(smtp_sink::addressed(&data, "To", PAT), "{data}");
    for rcpt in [
        "<pat@example.org>",
        &format!("<{LIST}>"),
        "<maint@example.org>",
    ] {
        assert!(
            m.rcpt_to.iter().any(|r| r == rcpt),
            "{rcpt} in {:?}",
            m.rcpt_to
        );
    }
    assert!(data.contains(&format!("commit: {first_bad}")), "{data}");
    assert!(
        data.contains(&format!("patch link: {WEB}/{patch2}/")),
        "{data}"
    );
    assert!(
        data.contains("\nurl: ") && data.contains("refs/kbot/series/fsdevel/"),
        "{data}"
    );
    assert!(
        data.contains("| Reported-by: kernel test robot <kbot@kbot.test>"),
        "{data}"
    );
    assert!(data.contains("| Closes: "), "{data}");
}

/// The applied series can be fetched from the server with git.
fn fetch_series(sim: &Sim<'_>, series: &Value, tip: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    git(tmp.path(), &["init", "-q", "--bare", "x.git"]);
    let dir = tmp.path().join("x.git");
    let url = sim.t.url(&format!("/git/{REPO}.git"));
    let refspec = format!("+{0}:{0}", str_of(&series["ref_name"]));
    let auth = format!("http.extraHeader=Authorization: Bearer {}", sim.token);
    git(&dir, &["-c", &auth, "fetch", "-q", &url, &refspec]);
    assert_eq!(git(&dir, &["rev-parse", str_of(&series["ref_name"])]), tip);
}

/// A fix on top of the first bad patch, as the author would paste it.
fn fix_patch(author: &Author, first_bad: &str) -> String {
    author.at(first_bad);
    author.commit("fs/pipe.c", "reuse pages\n", "pipe: reuse the zeroed page");
    let out = git(&author.dir, &["format-patch", "-1", "--stdout"]);
    let diff = out.find("diff --git").map(|i| &out[i..]).unwrap_or(&out);
    diff.split("\n-- \n").next().unwrap_or(diff).to_owned()
}
