//! Versions of a series linked by b4's `change-id:`, not by their title:
//! v1 regresses and is reported; v2, retitled and posted in a new thread,
//! is clean, and its thread hears the KPI of each version with the verdict
//! that changed. A v3 as clean as v2 says nothing.

use serde_json::json;

use crate::lists::{add_list, append, in_reply_to, mail_when, series_when, Author, Posted};
use crate::sim::fleet::{Fleet, GOOD};
use crate::sim::{self, id, str_of, Sim, World};
use kbot_testkit::backends;
use kbot_testkit::inbox::PublicInbox;

const CHANGE_ID: &str = "20261204-pipe-pages-0123456789ab";

/// The version's mail with b4's `change-id:` after its `base-commit:`.
fn with_change_id(posted: Posted) -> Posted {
    let mails = posted
        .mails
        .into_iter()
        .map(|m| {
            let at = m.find("\nbase-commit: ").expect("a base-commit line") + 1;
            let end = at + m[at..].find('\n').expect("its end") + 1;
            format!("{}change-id: {CHANGE_ID}\n{}", &m[..end], &m[end..])
        })
        .collect();
    Posted { mails }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_hears_the_kpi_of_each_version_when_its_verdict_changes() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    let mut versions = Vec::new();
    for (v, text, title) in [
        (
            1,
            "zero pages on every write\n",
            "pipe: zero the page on every write",
        ),
        (
            2,
            "zero new pages only\n",
            "pipe: zero only newly allocated pages",
        ),
        (
            3,
            "zero new pages only\n/* v3 */\n",
            "pipe: zero only new pages",
        ),
    ] {
        author.at(&base);
        author.commit("fs/pipe.c", text, title);
        versions.push(with_change_id(author.post(1, v, &base, &[])));
    }
    for backend in backends() {
        let sink = kbot_testkit::smtp_sink::Sink::start(Default::default()).await;
        let port = sink.addr.port();
        let sim = Sim::start_with(backend, &world, move |c| c.mail = sim::mail_to(port)).await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let inbox = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
        append(&inbox, &versions[0].mails);
        let l = add_list(&sim, inbox.root()).await;
        let fleet = Fleet::enroll(&sim, 2).await;

        let v1 = series_when(&sim, &versions[0].message_id(0), |s| {
            s["state"] == "testing"
        })
        .await;
        let detail = sim.get(&format!("/api/v1/series/{}", id(&v1))).await;
        world
            .model
            .set(str_of(&detail["parts"][0]["commit"]), GOOD * 0.8);
        fleet
            .run_until(mail_when(&sink, "v1's report", |d| {
                in_reply_to(d, &versions[0].message_id(0))
            }))
            .await;
        let v1 = series_when(&sim, &versions[0].message_id(0), |s| s["state"] == "tested").await;
        // The series says what its pair found, not only that it ended.
        let detail = str_of(&v1["detail"]);
        assert!(
            detail.contains(": bw_pipe.bandwidth.MB/sec -")
                && detail.contains("%, regression (bisected"),
            "{backend:?}: {v1}"
        );

        append(&inbox, &versions[1].mails);
        sim.post(&format!("/api/v1/lists/{l}/read"), json!({}), 200)
            .await;
        let answer = fleet
            .run_until(mail_when(&sink, "v2's versions", |d| {
                in_reply_to(d, &versions[1].message_id(0))
            }))
            .await;
        let data = answer.data.replace("\r\n", "\n");
        for line in [
            format!("(change-id: {CHANGE_ID})"),
            "    version  bw_pipe.bandwidth.MB/sec".to_owned(),
            "The verdict changed since v1: regression -> same.".to_owned(),
        ] {
            assert!(data.contains(&line), "{backend:?}: {line} in {data}");
        }
        let row = |v: &str| {
            data.lines()
                .find(|l| l.starts_with(&format!("    {v} ")))
                .unwrap_or_default()
        };
        assert!(row("v1").ends_with("%  regression"), "{backend:?}: {data}");
        assert!(row("v2").ends_with("%  same"), "{backend:?}: {data}");

        // v3 is as clean as v2: nothing to say.
        append(&inbox, &versions[2].mails);
        sim.post(&format!("/api/v1/lists/{l}/read"), json!({}), 200)
            .await;
        let v3 = fleet
            .run_until(series_when(&sim, &versions[2].message_id(0), |s| {
                s["state"] == "tested"
            }))
            .await;
        assert!(
            str_of(&v3["detail"]).ends_with(", same"),
            "{backend:?}: {v3}"
        );
        let mails = sink.received();
        assert_eq!(mails.len(), 2, "{backend:?}: v1's report and v2's table");
        sim.stop().await;
    }
}
