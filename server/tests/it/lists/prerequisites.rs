//! A series on the patches it names as prerequisites, and a tip that does
//! not build answered in the patch that broke it.

use super::*;

/// `prerequisite-patch-id:`: a patch posted on top of one posted before is
/// applied on its base plus that patch, and its pair tests it alone against
/// them; one on top of a patch nobody posted cannot apply, and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_series_applies_on_its_posted_prerequisites() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    author.at(&base);
    author.commit("fs/pipe_pool.c", "pool\n", "pipe: add a page pool");
    let first = author.post(1, 1, &base, &[]);
    author.commit("fs/pipe_pool.c", "pool\nused\n", "pipe: use the page pool");
    let second = author.post(1, 1, &base, &[]);
    assert!(
        second.mails[0].contains("\nprerequisite-patch-id: "),
        "{}",
        second.mails[0]
    );
    author.at(&base);
    author.commit(
        "fs/splice.c",
        "unposted\n",
        "splice: a change nobody posted",
    );
    author.commit(
        "fs/splice.c",
        "unposted\nposted\n",
        "splice: on the unposted change",
    );
    let orphan = author.post(1, 1, &base, &[]);
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let inbox = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
        append(&inbox, &first.mails);
        let l = add_list(&sim, inbox.root()).await;
        let s1 = series_when(&sim, &first.message_id(0), |s| s["state"] == "testing").await;
        let d1 = sim.get(&format!("/api/v1/series/{}", id(&s1))).await;
        let pool = str_of(&d1["parts"][0]["commit"]).to_owned();

        append(&inbox, &second.mails);
        append(&inbox, &orphan.mails);
        sim.post(&format!("/api/v1/lists/{l}/read"), json!({}), 200)
            .await;
        let s2 = series_when(&sim, &second.message_id(0), |s| s["state"] != "waiting").await;
        assert_eq!(str_of(&s2["state"]), "testing", "{backend:?}: {s2}");
        assert_eq!(
            str_of(&s2["base"]),
            pool,
            "{backend:?}: on the prerequisite: {s2}"
        );
        assert_eq!(
            str_of(&s2["base_how"]),
            "base-commit + 1 prerequisite patch(es)",
            "{s2}"
        );
        let d2 = sim.get(&format!("/api/v1/series/{}", id(&s2))).await;
        assert_eq!(list(d2["parts"].clone()).len(), 1, "{d2}");
        let pair = sim
            .submission(s2["submission"].as_i64().expect("a pair"))
            .await;
        assert_eq!(str_of(&pair["base"]["sha"]), pool, "{pair}");

        let s3 = series_when(&sim, &orphan.message_id(0), |s| s["state"] != "waiting").await;
        assert_eq!(str_of(&s3["state"]), "cannot_apply", "{backend:?}: {s3}");
        assert!(
            str_of(&s3["detail"]).contains("is not among the patches posted"),
            "{s3}"
        );
        sim.stop().await;
    }
}

/// A series whose tip does not build: its patches are built one by one, and
/// the build error is answered in the thread of the patch that broke it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_break_is_answered_in_the_patch_that_broke_it() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    author.at(&base);
    author.commit(
        "Documentation/pipe.rst",
        "pipes\n",
        "Documentation: describe pipe buffers",
    );
    author.commit("fs/splice.c", "syntax error\n", "splice: break the build");
    author.commit("fs/pipe.c", "tuned\n", "pipe: tune the write path");
    let series = author.post(3, 1, &base, &[]);
    for backend in backends() {
        let sink = smtp_sink::Sink::start(smtp_sink::Plan::default()).await;
        let port = sink.addr.port();
        let sim = Sim::start_with(backend, &world, move |c| c.mail = sim::mail_to(port)).await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let inbox = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
        append(&inbox, &series.mails);
        add_list(&sim, inbox.root()).await;
        let fleet = Fleet::enroll(&sim, 1).await;
        let s = series_when(&sim, &series.message_id(0), |s| s["state"] == "testing").await;
        let detail = sim.get(&format!("/api/v1/series/{}", id(&s))).await;
        // Patch 2 breaks the build, so patch 3 does not build either.
        for part in list(detail["parts"].clone())
            .iter()
            .filter(|p| p["index"].as_u64() >= Some(2))
        {
            world
                .model
                .fail_saying(str_of(&part["commit"]), "build_failed", BUILD_LOG);
        }
        let patch2 = series.message_id(2);
        let answer = fleet
            .run_until(mail_when(&sink, "the build error", |d| {
                in_reply_to(d, &patch2)
            }))
            .await;
        let data = answer.data.replace("\r\n", "\n");
        assert!(
            data.contains("[auto build test ERROR on linux/main]"),
            "{data}"
        );
        assert!(
            data.contains(">> fs/splice.c:1:1: error: unknown type name"),
            "{data}"
        );
        assert_eq!(
            header(&data, "Subject"),
            "Re: [PATCH v1 2/3] splice: break the build",
            "{data}"
        );
        let s = series_when(&sim, &series.message_id(0), |s| s["state"] != "testing").await;
        assert_eq!(str_of(&s["state"]), "build_failed", "{backend:?}: {s}");
        assert!(
            str_of(&s["detail"]).starts_with("patch 2 of 3 does not build"),
            "{s}"
        );
        assert_eq!(sink.received().len(), 1, "{backend:?}: one answer");
        sim.stop().await;
    }
}
