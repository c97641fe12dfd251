//! A patch kbot reported on a list lands in a watched tree, applied by a
//! maintainer under another author's name: the watch finds the regression
//! and bisects it to that commit, whose `git patch-id` is the reported
//! patch's. No second report: one answer in the report's thread names the
//! tree, branch, commit and committer with the numbers measured there, To
//! the patch's author, Cc the committer and the tree's list; the watch's
//! regression is linked to the report that stands. (`bisection.rs` has the
//! same for a change picked to another branch and found by bisection.)

use serde_json::json;

use crate::lists::{
    add_list, append, header, in_reply_to, mail_when, series_when, Author, LIST, PAT,
};
use crate::sim::fleet::{Fleet, GOOD};
use crate::sim::{self, id, list, str_of, Sim, World, JOB};
use kbot_testkit::inbox::PublicInbox;
use kbot_testkit::{backends, gitrepo::git};

const ANN: &str = "Ann Other <ann@example.org>";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reported_patch_that_lands_is_followed_into_the_tree() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    author.at(&base);
    author.commit(
        "fs/pipe.c",
        "zero pages on every write\n",
        "pipe: zero the page on every write",
    );
    let posted = author.post(1, 1, &base, &[]);
    for backend in backends() {
        world.repo.git(&["reset", "-q", "--hard", &base]);
        let sink = kbot_testkit::smtp_sink::Sink::start(Default::default()).await;
        let port = sink.addr.port();
        let sim = Sim::start_with(backend, &world, move |c| c.mail = sim::mail_to(port)).await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let inbox = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
        append(&inbox, &posted.mails);
        add_list(&sim, inbox.root()).await;
        let fleet = Fleet::enroll(&sim, 2).await;

        // The posted patch regresses and is reported in its thread.
        let s = series_when(&sim, &posted.message_id(0), |s| s["state"] == "testing").await;
        let detail = sim.get(&format!("/api/v1/series/{}", id(&s))).await;
        let applied = str_of(&detail["parts"][0]["commit"]).to_owned();
        world.model.set(&applied, GOOD * 0.8);
        let report = fleet
            .run_until(mail_when(&sink, "the report", |d| {
                in_reply_to(d, &posted.message_id(0))
            }))
            .await;
        let report_id = header(&report.data.replace("\r\n", "\n"), "Message-ID");

        // The same change lands on the watched branch under Ann's name.
        let landed = land(&world, "fs/pipe.c", "zero pages on every write\n");
        world.model.plant(&world.repo, &landed, 0.8);
        let watch = json!({"repo": crate::sim::REPO, "branch": "main", "job_file": JOB, "interval_secs": 1});
        sim.post("/api/v1/watches", watch, 201).await;
        let answer = fleet
            .run_until(mail_when(&sink, "the landing", |d| {
                in_reply_to(d, &report_id) && d.contains(&landed)
            }))
            .await;
        let data = answer.data.replace("\r\n", "\n");
        assert!(
            kbot_testkit::smtp_sink::addressed(&data, "To", PAT),
            "{data}"
        );
        for line in [
            format!("commit:    {landed} (\"pipe: zero the page on every write\")"),
            "branch:    main".to_owned(),
            format!("author:    {ANN}"),
            "committer: Cid Committer <cid@example.org>".to_owned(),
            "ran the job there, the commit against its parent:".to_owned(),
        ] {
            assert!(data.contains(&line), "{backend:?}: {line} in {data}");
        }
        // Registered from a path: the server's own git URL, not the path.
        let tree = data
            .lines()
            .find(|l| l.starts_with("tree:"))
            .unwrap_or_default();
        let own = format!("/git/{}.git", crate::sim::REPO);
        assert!(tree.ends_with(&own), "{backend:?}: {tree}");
        for rcpt in [
            "<pat@example.org>",
            "<cid@example.org>",
            &format!("<{LIST}>"),
        ] {
            assert!(
                answer.rcpt_to.iter().any(|r| r == rcpt),
                "{rcpt}: {answer:?}"
            );
        }
        eprintln!("lists::landed[{backend:?}]: the answer:\n{data}");

        // One report, and the watch's regression is linked to it.
        let reports = sim.reports().await;
        let regression: Vec<_> = reports
            .iter()
            .filter(|r| r["kind"] == "regression")
            .collect();
        assert_eq!(regression.len(), 1, "{backend:?}: {reports:#?}");
        let found = list(sim.get("/api/v1/regressions").await);
        assert_eq!(found.len(), 2, "{backend:?}: {found:#?}");
        // Both regressions (the posted patch's, the tree's) are the report's.
        for r in &found {
            assert_eq!(r["report_id"], regression[0]["id"], "{backend:?}: {r:#}");
        }
        assert_eq!(
            sink.received().len(),
            2,
            "{backend:?}: the report and the answer"
        );
        sim.stop().await;
    }
    world.repo.git(&["reset", "-q", "--hard", &base]);
}

/// Commits `text` as `file` on the world's checked-out branch, authored by
/// Ann (the committer is the harness's Cid Committer).
fn land(world: &World, file: &str, text: &str) -> String {
    let path = world.repo.path().join(file);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, text).expect("write");
    world.repo.git(&["add", "-A"]);
    let by = format!("--author={ANN}");
    world.repo.git(&[
        "commit",
        "-q",
        "-m",
        "pipe: zero the page on every write",
        &by,
    ]);
    git(world.repo.path(), &["rev-parse", "HEAD"])
}
