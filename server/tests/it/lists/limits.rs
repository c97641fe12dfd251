//! Bounded work on hostile list mail, on every backend, with real git
//! repositories and a real public-inbox archive: a binary-patch inflate
//! bomb and a `*` path are refused with an event; the same patch posted
//! again under new Message-IDs is tested once; a flood from one sender gets
//! its daily quota of pairs and one answer; a series over the part limit
//! ends `too_large` with one answer; a build break in the last of 16
//! patches is bisected in at most 5 builds. `git am` itself is checked
//! against the mirror: the binary bomb is refused before it writes a file,
//! a `*` path checks out nothing else, and the address-space limit holds.
//! Parsing any mail of up to 8 MiB is a property target (`scripts/fuzz`).

use std::path::Path;
use std::time::{Duration, Instant};

use kbot_fuzz::run;
use kbot_server::lists::message::{self, MAX_MESSAGE_BYTES, MAX_REFERENCES};
use kbot_server::repos::git::{sparse_pattern, Am, AmLimits, Mirror};
use kbot_testkit::backends;
use kbot_testkit::gitrepo::git;
use kbot_testkit::inbox::PublicInbox;
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::lists::{add_list, append, series, series_when, Author, Posted, BUILD_LOG};
use crate::sim::fleet::Fleet;
use crate::sim::{id, list, poll, str_of, Sim, World, DEADLINE};

/// The size the bomb's file declares: 512 MiB of zeros, about 3 MB mailed.
const BOMB_BYTES: u64 = 512 << 20;

/// A one-patch mail adding `blob.bin`, 512 MiB of zeros, on `base`
/// (`git format-patch` writes it as a binary patch).
fn binary_bomb(author: &Author, base: &str) -> Posted {
    author.at(base);
    let file = author.dir.join("blob.bin");
    let status = std::process::Command::new("head")
        .args(["-c", &BOMB_BYTES.to_string(), "/dev/zero"])
        .stdout(std::fs::File::create(&file).expect("create blob.bin"))
        .status()
        .expect("head runs");
    assert!(status.success());
    git(&author.dir, &["add", "blob.bin"]);
    git(&author.dir, &["commit", "-q", "-m", "firmware: add a blob"]);
    let posted = author.post(1, 1, base, &["--binary"]);
    std::fs::remove_file(&file).expect("rm blob.bin");
    let size = posted.mails[0].len();
    assert!(
        (1 << 20..8 << 20).contains(&size),
        "the bomb is a mail of {size} bytes"
    );
    posted
}

/// A one-patch mail changing a file named `*` that the tree does not have.
fn star_path(author: &Author, base: &str) -> Posted {
    author.at(base);
    author.commit("*", "one\n", "glob: a file nobody posted");
    author.commit("*", "one\ntwo\n", "glob: change it");
    author.post(1, 1, base, &[])
}

/// A list on a public-inbox holding `mails`; its id, and the archive's
/// folder (kept for the test's length).
async fn listed(sim: &Sim<'_>, mails: &[String]) -> (i64, tempfile::TempDir) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let inbox = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
    append(&inbox, mails);
    (add_list(sim, inbox.root()).await, tmp)
}

/// The series whose key is each of `keys`, once none is `waiting`.
async fn settled(sim: &Sim<'_>, keys: &[String]) -> Vec<Value> {
    poll(DEADLINE, || async {
        let all = series(sim).await;
        let mine: Vec<Value> = all
            .iter()
            .filter(|s| keys.iter().any(|k| s["key"] == k.as_str()))
            .cloned()
            .collect();
        let waiting = mine.iter().filter(|s| s["state"] == "waiting").count();
        if mine.len() == keys.len() && waiting == 0 {
            Ok(mine)
        } else {
            Err(format!(
                "{} of {} series, {waiting} waiting: {mine:#?}",
                mine.len(),
                keys.len()
            ))
        }
    })
    .await
}

fn in_state<'a>(all: &'a [Value], state: &str) -> Vec<&'a Value> {
    all.iter().filter(|s| s["state"] == state).collect()
}

/// The list's events of `kind`.
async fn events(sim: &Sim<'_>, list_id: i64, kind: &str) -> Vec<Value> {
    let detail = sim.get(&format!("/api/v1/lists/{list_id}")).await;
    list(detail["events"].clone())
        .into_iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

/// Answers queued (mail is off in these tests, so each stays in the outbox).
async fn answers(sim: &Sim<'_>) -> Vec<Value> {
    sim.reports()
        .await
        .into_iter()
        .filter(|r| r["kind"] == "answer")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_bomb_and_a_star_path_are_refused_with_an_event() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    let bomb = binary_bomb(&author, &base);
    let star = star_path(&author, &base);
    for backend in backends() {
        // Patch mails up to 8 MiB are taken, so the bomb reaches `git am`'s check.
        let sim = Sim::start_with(backend, &world, |c| {
            c.lists.max_patch_bytes = MAX_MESSAGE_BYTES as u64;
        })
        .await;
        let both = [bomb.mails.clone(), star.mails.clone()].concat();
        let (l, _archive) = listed(&sim, &both).await;
        let keys = [bomb.message_id(0), star.message_id(0)];
        let all = settled(&sim, &keys).await;
        for s in &all {
            assert_eq!(str_of(&s["state"]), "cannot_apply", "{backend:?}: {s}");
        }
        let bomb_series = all
            .iter()
            .find(|s| s["key"] == keys[0].as_str())
            .expect("bomb");
        assert!(
            str_of(&bomb_series["detail"])
                .contains(&format!("binary patches declare {BOMB_BYTES} bytes")),
            "{bomb_series}"
        );
        let refused = events(&sim, l, "cannot_apply").await;
        assert_eq!(refused.len(), 2, "{backend:?}: {refused:#?}");
        sim.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_posted_again_is_tested_once() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    author.at(&base);
    author.commit("fs/pipe.c", "faster\n", "pipe: faster writes");
    let posted = author.post(1, 1, &base, &[]);
    let first_id = posted.message_id(0);
    let copies: Vec<String> = (0..20)
        .map(|i| {
            posted.mails[0].replace(&format!("<{first_id}>"), &format!("<again-{i}-{first_id}>"))
        })
        .collect();
    let keys: Vec<String> = (0..20).map(|i| format!("again-{i}-{first_id}")).collect();
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let (l, _archive) = listed(&sim, &copies).await;
        let all = settled(&sim, &keys).await;
        let tested = in_state(&all, "testing");
        let duplicates = in_state(&all, "duplicate");
        assert_eq!(
            (tested.len(), duplicates.len()),
            (1, 19),
            "{backend:?}: {all:#?}"
        );
        for d in &duplicates {
            assert_eq!(d["duplicate_of"], tested[0]["id"], "{d}");
        }
        assert_eq!(events(&sim, l, "duplicate").await.len(), 19);
        assert!(
            answers(&sim).await.is_empty(),
            "duplicates are not answered"
        );
        sim.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_one_sender_gets_its_quota_and_one_answer() {
    const QUOTA: usize = 5;
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    let mut mails = Vec::new();
    let mut keys = Vec::new();
    for i in 0..30 {
        author.at(&base);
        author.commit(
            &format!("drivers/flood{i}.c"),
            "x\n",
            &format!("flood: {i}"),
        );
        let posted = author.post(1, 1, &base, &[]);
        keys.push(posted.message_id(0));
        mails.extend(posted.mails);
    }
    for backend in backends() {
        let sim = Sim::start_with(backend, &world, |c| {
            c.lists.sender_daily_pairs = QUOTA as u32;
        })
        .await;
        let (l, _archive) = listed(&sim, &mails).await;
        let all = settled(&sim, &keys).await;
        let tested = in_state(&all, "testing");
        assert_eq!(tested.len(), QUOTA, "{backend:?}: {all:#?}");
        assert_eq!(in_state(&all, "over_quota").len(), 30 - QUOTA, "{all:#?}");
        assert_eq!(events(&sim, l, "over_quota").await.len(), 30 - QUOTA);
        let answered = answers(&sim).await;
        assert_eq!(
            answered.len(),
            1,
            "{backend:?}: one quota answer: {answered:#?}"
        );
        // List pairs queue below users' and watches' (priority 0).
        let pair = sim
            .submission(tested[0]["submission"].as_i64().expect("pair"))
            .await;
        assert_eq!(pair["priority"], -1, "{pair}");
        sim.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_series_over_the_part_limit_is_too_large() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    author.at(&base);
    for i in 0..60 {
        author.commit(&format!("mm/part{i}.c"), "x\n", &format!("mm: part {i}"));
    }
    let posted = author.post(60, 1, &base, &[]);
    assert_eq!(posted.mails.len(), 61);
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let (l, _archive) = listed(&sim, &posted.mails).await;
        let all = settled(&sim, &[posted.message_id(0)]).await;
        assert_eq!(
            str_of(&all[0]["state"]),
            "too_large",
            "{backend:?}: {all:#?}"
        );
        assert!(str_of(&all[0]["detail"]).contains("60 patches"), "{all:#?}");
        assert_eq!(events(&sim, l, "too_large").await.len(), 1);
        // Another read of the list does not answer again.
        sim.post(&format!("/api/v1/lists/{l}/read"), json!({}), 200)
            .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(answers(&sim).await.len(), 1, "{backend:?}: one answer");
        sim.stop().await;
    }
}

/// A 16-patch series whose last patch breaks the build: the breaking patch
/// is bisected (patches 8, 12, 14, 15 built), not walked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_break_in_the_last_of_16_patches_takes_at_most_5_builds() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    author.at(&base);
    for i in 1..=16 {
        author.commit(&format!("fs/step{i}.c"), "x\n", &format!("fs: step {i}"));
    }
    let posted = author.post(16, 1, &base, &[]);
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let (l, _archive) = listed(&sim, &posted.mails).await;
        let fleet = Fleet::enroll(&sim, 1).await;
        let s = series_when(&sim, &posted.message_id(0), |s| s["state"] == "testing").await;
        let detail = sim.get(&format!("/api/v1/series/{}", id(&s))).await;
        let last = list(detail["parts"].clone())
            .into_iter()
            .find(|p| p["index"] == 16)
            .expect("patch 16");
        world
            .model
            .fail_saying(str_of(&last["commit"]), "build_failed", BUILD_LOG);
        let key = posted.message_id(0);
        let done = fleet
            .run_until(series_when(&sim, &key, |s| s["state"] != "testing"))
            .await;
        assert_eq!(
            str_of(&done["state"]),
            "build_failed",
            "{backend:?}: {done}"
        );
        assert!(
            str_of(&done["detail"]).starts_with("patch 16 of 16 does not build"),
            "{done}"
        );
        let probes = events(&sim, l, "build_probe").await;
        assert!(probes.len() <= 5, "{backend:?}: {probes:#?}");
        assert_eq!(probes.len(), 4, "ceil(log2 16) builds: {probes:#?}");
        sim.stop().await;
    }
}

/// Every file under `dir` larger than `limit`.
fn files_over(dir: &Path, limit: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let entry = entry.expect("entry");
            let meta = entry.metadata().expect("metadata");
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.len() > limit {
                out.push(entry.path().display().to_string());
            }
        }
    }
    out
}

/// The world's repository mirrored under `tmp/mirrors`, with `limits`.
async fn mirror(world: &World, tmp: &Path, limits: AmLimits) -> Mirror {
    let mirror =
        Mirror::at(tmp.join("mirrors/linux.git"), Duration::from_secs(60)).with_am_limits(limits);
    mirror.sync(world.repo.url()).await.expect("mirror");
    mirror
}

/// `git am` on the mirror: the bomb is refused by its declared size before
/// any file is written; a patch creating `*` applies and commits that one
/// file; a patch that needs more than the address-space limit fails.
#[tokio::test]
async fn git_am_refuses_a_bomb_and_runs_bounded() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    let bomb = binary_bomb(&author, &base);
    author.at(&base);
    author.commit("*", "star\n", "glob: add a file named star");
    let star = git(&author.dir, &["format-patch", "-1", "--stdout"]);
    let tmp = tempfile::tempdir().expect("tempdir");
    let limits = AmLimits::default();
    let m = mirror(&world, tmp.path(), limits).await;
    let committer = ("kbot", "kbot@kbot.test");

    let bombed = m
        .am(
            &base,
            bomb.mails[0].clone().into_bytes(),
            &["blob.bin".into()],
            committer,
        )
        .await
        .expect("git runs");
    let Am::Refused(said) = bombed else {
        panic!("the bomb applied: {bombed:?}");
    };
    assert!(
        said.contains("binary patches declare 536870912 bytes"),
        "{said}"
    );
    let big = files_over(tmp.path(), limits.max_binary_bytes);
    assert!(big.is_empty(), "{big:?}");

    let starred = m
        .am(&base, star.clone().into_bytes(), &["*".into()], committer)
        .await
        .expect("git runs");
    let Am::Applied(tip) = starred else {
        panic!("a `*` file does not apply: {starred:?}");
    };
    let changed = git(
        Path::new(m.path()),
        &["diff-tree", "--no-commit-id", "--name-only", "-r", &tip],
    );
    // (The author's commit also holds its format-patch output folder.)
    assert!(changed.lines().any(|f| f == "*"), "{changed}");

    // A 32 MiB text patch needs more than 16 MiB of address space; with
    // the default limits it applies.
    let big = big_text_patch(500_000);
    let starved = AmLimits {
        memory_bytes: 16 << 20,
        ..limits
    };
    let tight = Mirror::at(m.path(), Duration::from_secs(60)).with_am_limits(starved);
    let paths = ["big.txt".to_owned()];
    let out = tight.am(&base, big.clone(), &paths, committer).await;
    assert!(
        !matches!(out, Ok(Am::Applied(_))),
        "git am ran in 16 MiB: {out:?}"
    );
    let out = m.am(&base, big, &paths, committer).await;
    assert!(matches!(out, Ok(Am::Applied(_))), "{out:?}");
}

/// A mail adding `big.txt` of `lines` lines of 64 bytes.
fn big_text_patch(lines: usize) -> Vec<u8> {
    let mut mail = format!(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n\
         From: Pat Pipe <pat@example.org>\nDate: Wed, 02 Dec 2026 09:00:00 +0000\n\
         Subject: [PATCH] add a big text\n\n---\n\
         diff --git a/big.txt b/big.txt\nnew file mode 100644\n--- /dev/null\n+++ b/big.txt\n\
         @@ -0,0 +1,{lines} @@\n"
    )
    .into_bytes();
    for _ in 0..lines {
        mail.push(b'+');
        mail.extend_from_slice(&[b'y'; 63]);
        mail.push(b'\n');
    }
    mail
}

/// The sparse pattern of a path `*` checks out that path only: a worktree
/// of a tree of 12 files holds at most 2 after `read-tree`.
#[test]
fn a_star_path_checks_out_nothing_else() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("r");
    std::fs::create_dir(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    for i in 0..10 {
        std::fs::write(repo.join(format!("f{i}.c")), "x\n").expect("write");
    }
    std::fs::create_dir(repo.join("sub")).expect("mkdir");
    std::fs::write(repo.join("sub/g.c"), "x\n").expect("write");
    std::fs::write(repo.join("*"), "star\n").expect("write");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "files"]);
    let wt = tmp.path().join("wt");
    let wt_arg = wt.to_string_lossy().into_owned();
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            "--no-checkout",
            &wt_arg,
            "main",
        ],
    );
    let input = format!("{}\n{}\n", sparse_pattern("*"), sparse_pattern("[f]0.c"));
    let mut child = std::process::Command::new("git")
        .args([
            "-C",
            &wt_arg,
            "sparse-checkout",
            "set",
            "--no-cone",
            "--stdin",
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("git runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write patterns");
    assert!(child.wait().expect("git ends").success());
    git(&wt, &["read-tree", "-mu", "HEAD"]);
    let files: Vec<String> = std::fs::read_dir(&wt)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".git")
        .collect();
    assert_eq!(files, ["*"], "{files:?}");
    assert!(files.len() <= 2);
}

/// A mail of up to 8 MiB built to stress one part of the parser: a huge
/// References header, many recipients, many MIME parts, one long line, a
/// long diff, many encoded words.
fn big_mail() -> impl Strategy<Value = Vec<u8>> {
    let shape = prop::sample::select(vec![
        "references",
        "recipients",
        "parts",
        "line",
        "diff",
        "words",
    ]);
    // One case in five is large: a debug build parses 5 MiB of References in
    // about 1.5 s, so many large cases on a loaded machine near the 5 s limit.
    let size = prop_oneof![
        4 => 0usize..64 << 10,
        1 => (1usize << 20)..=MAX_MESSAGE_BYTES,
    ];
    (shape, size).prop_map(|(shape, size)| {
        let mut head = String::from("Message-ID: <big@x>\nSubject: x\n");
        let mut body = String::new();
        let unit = |s: &str, out: &mut String| {
            while out.len() + s.len() < size {
                out.push_str(s);
            }
        };
        match shape {
            "references" => {
                let mut refs = String::from("References:");
                let mut n = 0u64;
                while refs.len() < size {
                    refs.push_str(&format!(" <r{n}@x>\n"));
                    n += 1;
                }
                head.push_str(&refs);
            }
            "recipients" => {
                let mut to = String::from("To: a@x");
                unit(", \"N, M\" <b@x>\n", &mut to);
                head.push_str(&to);
                head.push('\n');
            }
            "parts" => {
                head.push_str("Content-Type: multipart/mixed; boundary=q\n");
                unit(
                    "--q\nContent-Type: text/x-patch\n\ndiff --git a/f b/f\n",
                    &mut body,
                );
            }
            "line" => unit("x", &mut body),
            "diff" => {
                body.push_str("diff --git a/f b/f\n--- a/f\n+++ b/f\n");
                unit("+line\n", &mut body);
            }
            _ => {
                let mut subject = String::from("Subject:");
                unit(" =?utf-8?q?=C3=A9?=", &mut subject);
                head.push_str(&subject);
                head.push('\n');
            }
        }
        format!("{head}\n{body}").into_bytes()
    })
}

/// Any mail of up to 8 MiB parses in bounded time (`kbot_fuzz::run` fails
/// a case over 5 s; `scripts/fuzz` runs it under a 2 GiB address space)
/// and keeps at most 64 thread ids.
#[test]
fn parsing_any_mail_up_to_8_mib_is_bounded() {
    run("list_mail", big_mail(), |raw| {
        let started = Instant::now();
        if let Ok(m) = message::parse(&raw) {
            prop_assert!(m.references.len() <= MAX_REFERENCES);
        }
        prop_assert!(started.elapsed() < Duration::from_secs(5));
        Ok(())
    });
}

/// Migration 0019 rebuilds `series` on SQLite (a CHECK cannot be altered):
/// a store's series keep their parts, build probes and supersession links.
#[tokio::test]
async fn series_keep_their_parts_and_links_through_migration_0019() {
    use crate::migrations::{execute, migrate_up_to};
    use kbot_server::db::Db;
    use kbot_testkit::TestStore;
    for backend in backends() {
        let store = TestStore::new(backend).await;
        let db = Db::connect(&store.database_url).await.expect("connect");
        migrate_up_to(&db, backend, "0019").await;
        let seeded =
            kbot_load::seed::submission(&db, "linux", "dev", kbot_load::seed::LOAD_JOB_FILE, 1, 0)
                .await
                .expect("seed");
        let pair = seeded.submission_id;
        execute(
            &db,
            "INSERT INTO lists (name, archive, archive_kind, repo_id, branch, job_name, job_file, \
               runs_cap, interval_secs, wait_secs, user_id, next_check_at, created_at) \
             SELECT 'fsdevel', '/a', 'mbox', repo_id, 'main', job_name, job_file, 3, 60, 60, \
               user_id, 0, 0 FROM submissions LIMIT 1",
        )
        .await;
        for (id, state) in [(1, "superseded"), (2, "testing")] {
            execute(
                &db,
                &format!(
                    "INSERT INTO series (id, list_id, series_key, version, total, rfc, title, \
                       author_name, author_address, state, posted_at, last_part_at, created_at, \
                       updated_at, submission_id) \
                     VALUES ({id}, 1, 'k@x', {id}, 2, 0, 't', 'Pat', 'pat@x', '{state}', 0, 0, \
                       0, 0, {pair})"
                ),
            )
            .await;
            for idx in 0..3 {
                execute(
                    &db,
                    &format!(
                        "INSERT INTO series_parts (series_id, idx, message_id) \
                         VALUES ({id}, {idx}, 'm{id}-{idx}@x')"
                    ),
                )
                .await;
            }
        }
        execute(&db, "UPDATE series SET superseded_by = 2 WHERE id = 1").await;
        execute(
            &db,
            &format!(
                "INSERT INTO series_build_probes (series_id, part_index, submission_id) \
                 VALUES (2, 1, {pair})"
            ),
        )
        .await;

        kbot_server::server::migrate(&db).await.expect("migrate");

        let parts: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM series_parts")
            .fetch_one(db.read())
            .await
            .expect("parts");
        assert_eq!(parts, 6, "{backend:?}");
        let link: Option<i64> = sqlx::query_scalar("SELECT superseded_by FROM series WHERE id = 1")
            .fetch_one(db.read())
            .await
            .expect("link");
        assert_eq!(link, Some(2), "{backend:?}");
        let probe: (i64, i64, i64) = sqlx::query_as(
            "SELECT part_index, good_index, bad_index FROM series_build_probes WHERE series_id = 2",
        )
        .fetch_one(db.read())
        .await
        .expect("probe");
        assert_eq!(
            probe,
            (1, 0, 2),
            "{backend:?}: the walk goes on as a bisection"
        );
        execute(&db, "UPDATE series SET state = 'too_large' WHERE id = 2").await;
        db.close().await;
    }
}
