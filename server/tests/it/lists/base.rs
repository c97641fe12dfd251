//! The base chain of a posted series: a `base-commit:` found only in a
//! second registered repository (fetched into the list's tree); a
//! `[PATCH net-next]` without one, on the tree the list maps that tag to; a
//! patch to files whose MAINTAINERS entry names that tree; and the list's
//! own branch head, each with its rule and the rules that did not apply in
//! the series' `base_how` (the answers' `base:` line).

use serde_json::json;

use crate::lists::{add_list_with, append, series_when, Author, Posted};
use crate::sim::{id, str_of, Sim, World};
use kbot_testkit::backends;
use kbot_testkit::gitrepo::git;
use kbot_testkit::inbox::PublicInbox;

/// The mails without their `base-commit:` line (a sender who wrote none).
fn without_base(posted: Posted) -> Posted {
    let mails = posted
        .mails
        .into_iter()
        .map(|m| {
            m.lines()
                .filter(|l| !l.starts_with("base-commit: "))
                .collect::<Vec<_>>()
                .join("\n")
                + "\n"
        })
        .collect();
    Posted { mails }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_series_is_based_by_the_first_rule_that_applies() {
    let world = World::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    // net-next: the world's tree and one commit of its own.
    let net_next = tmp.path().join("net-next");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            world.repo.url(),
            net_next.to_str().expect("utf-8"),
        ],
    );
    std::fs::write(net_next.join("net.c"), "net-next\n").expect("write");
    git(&net_next, &["add", "-A"]);
    git(&net_next, &["commit", "-q", "-m", "net: a net-next commit"]);
    let nn = git(&net_next, &["rev-parse", "HEAD"]);
    // The list's tree says who keeps drivers/net/ and where.
    let maintainers = format!(
        "NETWORKING DRIVERS\nM:\tNet Keeper <net@example.org>\nT:\tgit {}\nF:\tdrivers/net/\n",
        net_next.display()
    );
    std::fs::write(world.repo.path().join("MAINTAINERS"), maintainers).expect("write");
    world.repo.git(&["add", "-A"]);
    world
        .repo
        .git(&["commit", "-q", "-m", "MAINTAINERS: networking drivers"]);
    let main = world.repo.git(&["rev-parse", "HEAD"]);

    let author = Author::new(&world);
    git(
        &author.dir,
        &["fetch", "-q", net_next.to_str().expect("utf-8"), "main"],
    );
    author.at(&nn);
    author.commit("drivers/net/a.c", "a\n", "net: driver a");
    let on_next = author.post(1, 1, &nn, &[]);
    author.at(&main);
    author.commit("fs/tagged.c", "t\n", "fs: a tagged change");
    let tagged = without_base(author.post(1, 1, &main, &["--subject-prefix=PATCH net-next"]));
    author.at(&main);
    author.commit("drivers/net/b.c", "b\n", "net: driver b");
    let kept = without_base(author.post(1, 1, &main, &[]));
    author.at(&main);
    author.commit("fs/plain.c", "p\n", "fs: a plain change");
    let plain = without_base(author.post(1, 1, &main, &[]));

    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let repo = json!({"name": "net-next", "url": net_next.to_string_lossy(), "default_branch": "main"});
        sim.post("/api/v1/repos", repo, 201).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let inbox = PublicInbox::create_v2(&dir.path().join("netdev"));
        // First alone: nothing has fetched net-next into the list's tree yet.
        append(&inbox, &on_next.mails);
        let l = add_list_with(
            &sim,
            inbox.root(),
            json!({"tree_tags": {"net-next": "net-next:main"}}),
        )
        .await;

        let view = sim.get(&format!("/api/v1/lists/{l}")).await;
        assert_eq!(
            view["list"]["tree_tags"]["net-next"], "net-next:main",
            "{view}"
        );
        let expect = |s: &serde_json::Value, base: &str, how: &str| {
            assert_eq!(str_of(&s["base"]), base, "{backend:?}: {s}");
            assert!(
                str_of(&s["base_how"]).starts_with(how),
                "{backend:?}: {how}: {s}"
            );
        };
        let testing = |s: &serde_json::Value| s["state"] == "testing";
        let s = series_when(&sim, &on_next.message_id(0), testing).await;
        expect(&s, &nn, "base-commit, from net-next");
        for p in [&tagged, &kept, &plain] {
            append(&inbox, &p.mails);
        }
        sim.post(&format!("/api/v1/lists/{l}/read"), json!({}), 200)
            .await;
        let s = series_when(&sim, &tagged.message_id(0), testing).await;
        expect(
            &s,
            &nn,
            "subject tag [net-next]: net-next/main head when posted",
        );
        let s = series_when(&sim, &kept.message_id(0), testing).await;
        expect(
            &s,
            &nn,
            "MAINTAINERS T: net-next/main head when posted; no subject tag of [PATCH] names a tree",
        );
        let s = series_when(&sim, &plain.message_id(0), testing).await;
        expect(&s, &main, "tree head (main when posted); ");
        assert!(
            str_of(&s["base_how"]).contains("MAINTAINERS names no tree for the files it touches"),
            "{s}"
        );
        let detail = sim.get(&format!("/api/v1/series/{}", id(&s))).await;
        assert_eq!(
            detail["parts"].as_array().map(Vec::len),
            Some(1),
            "{detail}"
        );
        sim.stop().await;
    }
}
