//! `#kbot` commands are who they say, and kbot reflects no mail, on every
//! backend: a real report in a posted patch's thread, then command mails
//! signed with DKIM (ed25519, the key pair of RFC 8463's example, pinned as
//! the server's DKIM keys: no DNS here) or forged; the answers checked at a
//! real SMTP server by their RCPT TO.
//!
//! Covered: a forged From (unsigned, or signed by another domain) cannot
//! close a regression; the list address cannot command; kbot's own mail is
//! no command; a 10,000-line command mail makes at most 3 actions; the same
//! Message-ID on two lists acts once; revision expressions and short fix
//! titles are refused; a fix title matches one commit exactly; an answer
//! reaches no address only the replying mail named; a signed maintainer
//! (from the tree's MAINTAINERS) closes the regression; no retest on an
//! invalid one; a stranger's retests are capped; a 40,000-id References is
//! resolved at once; over the hourly cap answers wait, pending; and
//! `#kbot dup:` refuses an unknown regression, the report's own and a
//! cycle, changing nothing.

use std::time::{Duration, Instant};

use mail_auth::common::crypto::Ed25519Key;
use mail_auth::common::headers::HeaderWriter;
use mail_auth::dkim::DkimSigner;
use mail_parser::decoders::base64::base64_decode;
use serde_json::{json, Value};

use crate::lists::{
    append, header, in_reply_to, mail_when, reply, series_when, Author, Posted, LIST, PAT,
};
use crate::sim::fleet::{Fleet, GOOD};
use crate::sim::{self, id, list, poll, str_of, Sim, World, DEADLINE, JOB, REPO};
use kbot_load::seed;
use kbot_server::config::mail::parse_dkim_keys;
use kbot_server::regressions;
use kbot_testkit::backends;
use kbot_testkit::inbox::PublicInbox;
use kbot_testkit::smtp_sink::{self, Received};

/// RFC 8463 appendix A's example ed25519 key (seed and public key).
const SEED: &str = "nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=";
const PUBLIC: &str = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
const MAINT: &str = "Maint Ainer <maint@example.org>";
const NETDEV: &str = "netdev@lists.example.org";
const ROBOT: &str = "kernel test robot <kbot@kbot.test>";

/// The server's pinned keys: example.org (the people) and evil.example (a
/// domain that signs other people's From lines).
fn pinned_keys() -> kbot_server::config::mail::DkimKeys {
    let record = format!("v=DKIM1; k=ed25519; p={PUBLIC}");
    parse_dkim_keys(&format!(
        "kbot._domainkey.example.org={record};kbot._domainkey.evil.example={record}"
    ))
    .expect("keys")
}

/// `mail` with a DKIM-Signature by `domain`'s key over its main headers.
fn signed_by(domain: &str, mail: &str) -> String {
    let key = Ed25519Key::from_seed_and_public_key(
        &base64_decode(SEED.as_bytes()).expect("seed"),
        &base64_decode(PUBLIC.as_bytes()).expect("public key"),
    )
    .expect("key");
    let signature = DkimSigner::from_key(key)
        .domain(domain)
        .selector("kbot")
        .headers(["From", "To", "Cc", "Subject", "Message-ID", "In-Reply-To"])
        .sign(mail.as_bytes())
        .expect("signed");
    format!("{}{mail}", signature.to_header())
}

fn signed(mail: &str) -> String {
    signed_by("example.org", mail)
}

/// The tree's MAINTAINERS: Maint looks after fs/pipe.c.
const MAINTAINERS: &str = "PIPE\nM:\tMaint Ainer <maint@example.org>\nS:\tMaintained\n\
    F:\tfs/pipe.c\n\nOTHER\nM:\tOther One <other@example.org>\nF:\tkernel/\n";

/// The lists, their archives and the report everything answers.
struct Thread<'a> {
    sim: &'a Sim<'a>,
    fsdevel: (i64, PublicInbox),
    netdev: (i64, PublicInbox),
    report_id: String,
    report_subject: String,
    /// Holds both archives.
    _archives: tempfile::TempDir,
}

impl<'a> Thread<'a> {
    /// Both lists, fsdevel holding `posted`; one agent runs the series,
    /// slower than its base, until kbot's report answers in its thread.
    async fn reported(
        sim: &'a Sim<'a>,
        sink: &smtp_sink::Sink,
        world: &World,
        posted: &Posted,
    ) -> Thread<'a> {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fsdevel = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
        let netdev = PublicInbox::create_v2(&tmp.path().join("netdev"));
        append(&fsdevel, &posted.mails);
        let fsdevel_id = add_list(sim, "fsdevel", fsdevel.root(), LIST).await;
        let netdev_id = add_list(sim, "netdev", netdev.root(), NETDEV).await;
        let fleet = Fleet::enroll(sim, 1).await;
        let s = series_when(sim, &posted.message_id(0), |s| s["state"] == "testing").await;
        let detail = sim.get(&format!("/api/v1/series/{}", id(&s))).await;
        for p in list(detail["parts"].clone()) {
            world.model.set(str_of(&p["commit"]), GOOD * 0.8);
        }
        let report = fleet
            .run_until(mail_when(sink, "the regression report", |d| {
                in_reply_to(d, &posted.message_id(0))
            }))
            .await;
        let data = report.data.replace("\r\n", "\n");
        Thread {
            sim,
            fsdevel: (fsdevel_id, fsdevel),
            netdev: (netdev_id, netdev),
            report_id: header(&data, "Message-ID"),
            report_subject: header(&data, "Subject"),
            _archives: tmp,
        }
    }

    fn reply(&self, from: &str, id: &str, body: &str) -> String {
        reply(from, &self.report_id, &self.report_subject, id, body)
    }

    /// Appends `mail` to fsdevel and reads it.
    async fn say(&self, mail: String) {
        append(&self.fsdevel.1, &[mail]);
        self.read(self.fsdevel.0).await;
    }

    async fn read(&self, list_id: i64) {
        self.sim
            .post(&format!("/api/v1/lists/{list_id}/read"), json!({}), 200)
            .await;
    }

    async fn commands(&self, list_id: i64) -> Vec<Value> {
        list(
            self.sim
                .get(&format!("/api/v1/lists/{list_id}/commands"))
                .await,
        )
    }

    /// The rows of mail `id` on either list, once one is recorded and settled.
    async fn taken(&self, id: &str) -> Vec<Value> {
        self.taken_n(id, 1).await
    }

    /// The rows of mail `id` once at least `count` are recorded and settled:
    /// the list's own watcher may be reading the mail when the test's read
    /// returns, and it records a mail's commands one after another.
    async fn taken_n(&self, id: &str, count: usize) -> Vec<Value> {
        poll(DEADLINE, || async {
            let mut rows = self.commands(self.fsdevel.0).await;
            rows.extend(self.commands(self.netdev.0).await);
            rows.retain(|c| c["message_id"] == id);
            rows.sort_by_key(|c| c["id"].as_i64());
            if rows.len() < count || rows.iter().any(|c| c["outcome"].as_str() == Some(STOPPED)) {
                Err(format!(
                    "{} settled commands of {id}, waiting for {count}",
                    rows.len()
                ))
            } else {
                Ok(rows)
            }
        })
        .await
    }

    async fn regression_state(&self) -> String {
        let regressions = list(self.sim.get("/api/v1/regressions").await);
        assert_eq!(regressions.len(), 1, "{regressions:#?}");
        str_of(&regressions[0]["state"]).to_owned()
    }

    async fn verify_pairs(&self) -> Vec<Value> {
        self.sim
            .submissions()
            .await
            .into_iter()
            .filter(|s| s["kind"] == "verify")
            .collect()
    }
}

/// What a claimed command says until it is acted on.
const STOPPED: &str = "kbot stopped before it acted on this command";

fn one<'a>(rows: &'a [Value], command: &str) -> &'a Value {
    let found: Vec<&Value> = rows.iter().filter(|c| c["command"] == command).collect();
    assert_eq!(found.len(), 1, "{command} in {rows:#?}");
    found[0]
}

fn answers_to(sink: &smtp_sink::Sink, id: &str) -> Vec<Received> {
    sink.received()
        .into_iter()
        .filter(|m| in_reply_to(&m.data.replace("\r\n", "\n"), id))
        .collect()
}

async fn add_list(sim: &Sim<'_>, name: &str, archive: &std::path::Path, address: &str) -> i64 {
    let body = json!({
        "name": name,
        "archive": archive.to_string_lossy(),
        "repo": REPO,
        "branch": "main",
        "job_file": JOB,
        "address": address,
        "interval_secs": 1,
        "wait_secs": 60,
        "from_start": true,
    });
    id(&sim.post("/api/v1/lists", body, 201).await)
}

/// The world's tree gets a MAINTAINERS file; Pat posts a patch to fs/pipe.c.
fn posted_patch(world: &World) -> (String, Posted) {
    std::fs::write(world.repo.path().join("MAINTAINERS"), MAINTAINERS).expect("MAINTAINERS");
    world.repo.git(&["add", "MAINTAINERS"]);
    world
        .repo
        .git(&["commit", "-q", "-m", "MAINTAINERS: add the pipe entry"]);
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(world);
    author.at(&base);
    author.commit(
        "fs/pipe.c",
        "zero pages on every write\n",
        "pipe: zero the page on every write",
    );
    let posted = author.post(1, 1, &base, &[]);
    (base, posted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_taken_from_verified_senders_with_a_role() {
    let world = World::new();
    let (base, posted) = posted_patch(&world);
    for backend in backends() {
        world.repo.git(&["checkout", "-q", "main"]);
        let sink = smtp_sink::Sink::start(smtp_sink::Plan::default()).await;
        let port = sink.addr.port();
        let sim = Sim::start_with(backend, &world, move |c| {
            c.mail = sim::mail_to(port);
            c.mail.dkim_keys = pinned_keys();
        })
        .await;
        let t = Thread::reported(&sim, &sink, &world, &posted).await;

        // A forged From: unsigned, then signed by a domain that is not Pat's.
        t.say(t.reply(PAT, "forged-1@example.org", "#kbot invalid\n"))
            .await;
        let rows = t.taken("forged-1@example.org").await;
        assert_eq!(
            str_of(&one(&rows, "invalid")["state"]),
            "refused",
            "{rows:#?}"
        );
        assert!(str_of(&rows[0]["outcome"]).contains("DKIM"), "{rows:#?}");
        let evil = signed_by(
            "evil.example",
            &t.reply(PAT, "forged-2@example.org", "#kbot invalid\n"),
        );
        t.say(evil).await;
        let rows = t.taken("forged-2@example.org").await;
        assert_eq!(str_of(&rows[0]["state"]), "refused", "{rows:#?}");
        assert_eq!(t.regression_state().await, "new");

        // The list's own address, even signed by its domain's parent.
        t.say(signed(&t.reply(
            LIST,
            "list-1@lists.example.org",
            "#kbot invalid\n",
        )))
        .await;
        let rows = t.taken("list-1@lists.example.org").await;
        assert_eq!(str_of(&rows[0]["state"]), "refused", "{rows:#?}");
        assert!(
            str_of(&rows[0]["outcome"]).contains("list address"),
            "{rows:#?}"
        );
        assert_eq!(t.regression_state().await, "new");

        // kbot's own mail quoting a command line: no command at all.
        t.say(t.reply(ROBOT, "own-1@kbot.test", "    #kbot invalid\n"))
            .await;

        // 10,000 command lines: three taken, the rest answered once.
        let verify_before = t.verify_pairs().await.len();
        let lines = [
            "#kbot retest",
            "#kbot frobnicate",
            "#kbot fix: e",
            "#kbot dup: x",
        ];
        let flood: String = (0..10_000).map(|i| format!("{}\n", lines[i % 4])).collect();
        t.say(signed(&t.reply(PAT, "flood-1@example.org", &flood)))
            .await;
        let rows = t.taken_n("flood-1@example.org", 4).await;
        assert_eq!(rows.len(), 4, "{rows:#?}");
        assert_eq!(str_of(&one(&rows, "retest")["state"]), "testing");
        assert_eq!(str_of(&one(&rows, "unknown")["state"]), "refused");
        let fix = one(&rows, "fix");
        assert!(
            fix["state"] == "refused" && str_of(&fix["outcome"]).contains("at least 10"),
            "{fix}"
        );
        assert!(str_of(&one(&rows, "too_many")["outcome"]).contains("too many commands"));
        assert!(rows.iter().all(|c| c["command"] != "dup"), "{rows:#?}");
        assert_eq!(t.verify_pairs().await.len(), verify_before + 1);
        let too_many = poll(DEADLINE, || async {
            let got = answers_to(&sink, "flood-1@example.org");
            if got.len() == 4 {
                Ok(got)
            } else {
                Err(format!("{} answers to the flood", got.len()))
            }
        })
        .await;
        assert_eq!(
            too_many.len(),
            4,
            "one answer per command taken and one for the rest"
        );

        // One Message-ID on two lists acts once.
        let cross = signed(&t.reply(PAT, "cross-1@example.org", "#kbot test linux main\n"));
        append(&t.fsdevel.1, std::slice::from_ref(&cross));
        append(&t.netdev.1, &[cross]);
        t.read(t.fsdevel.0).await;
        t.read(t.netdev.0).await;
        let rows = t.taken("cross-1@example.org").await;
        assert_eq!(rows.len(), 1, "{rows:#?}");
        assert_eq!(str_of(&rows[0]["state"]), "testing", "{rows:#?}");
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(t.taken("cross-1@example.org").await.len(), 1);
        assert_eq!(t.verify_pairs().await.len(), verify_before + 2);

        // A revision expression is refused, with an answer to Pat.
        t.say(signed(&t.reply(
            PAT,
            "rev-1@example.org",
            "#kbot test linux main~2\n",
        )))
        .await;
        let rows = t.taken("rev-1@example.org").await;
        assert!(
            str_of(&rows[0]["outcome"]).contains("no revision expressions"),
            "{rows:#?}"
        );
        mail_when(&sink, "the revision refusal", |d| {
            in_reply_to(d, "rev-1@example.org") && d.contains("no revision expressions")
        })
        .await;

        // 40,000 References, the report's last: resolved in one go.
        let mut refs: String = (0..40_000)
            .map(|i| format!("<r{i}.{backend:?}@example.net>\n "))
            .collect();
        refs.push_str(&format!("<{}>", t.report_id));
        let long = t
            .reply(PAT, "refs-1@example.org", "#kbot retest\n")
            .replace(
                &format!("References: <{}>", t.report_id),
                &format!("References: {refs}"),
            )
            .replace(
                &format!("In-Reply-To: <{}>", t.report_id),
                "In-Reply-To: <r0@example.net>",
            );
        let started = Instant::now();
        t.say(signed(&long)).await;
        let rows = t.taken("refs-1@example.org").await;
        eprintln!(
            "lists::trust[{backend:?}]: a 40,000-id References reply read and taken in {:?}",
            started.elapsed()
        );
        assert_eq!(str_of(&rows[0]["state"]), "testing", "{rows:#?}");
        // The report lookup itself, the report last of the ids (the worst
        // case): IN (...) queries, not one per id.
        let ids: Vec<String> = (0..40_000)
            .map(|i| format!("r{i}.{backend:?}@example.net"))
            .chain([t.report_id.clone()])
            .collect();
        let started = Instant::now();
        let found = kbot_server::lists::recheck::by_message_ids(sim.t.db(), &ids)
            .await
            .expect("lookup")
            .expect("the report");
        let took = started.elapsed();
        eprintln!("lists::trust[{backend:?}]: the report found among 40,001 ids in {took:?}");
        assert_eq!(found.report_message_id, t.report_id);
        assert!(took < Duration::from_secs(5), "{took:?}");

        // A stranger's retest: the day's two retests are spent.
        t.say(t.reply(
            "Eve <eve@example.net>",
            "eve-1@example.net",
            "#kbot retest\n",
        ))
        .await;
        let rows = t.taken("eve-1@example.net").await;
        assert!(
            str_of(&rows[0]["outcome"]).contains("retested 2 times"),
            "{rows:#?}"
        );
        assert!(answers_to(&sink, "eve-1@example.net").is_empty());

        // The maintainer names the fix by its title; a victim Cc'd hears nothing.
        let fix = signed(
            &t.reply(MAINT, "fix-1@example.org", "#kbot fix: pipe: reuse pages\n")
                .replace(
                    &format!("To: {LIST}\n"),
                    &format!("To: {LIST}\nCc: Victim <victim@example.net>, {PAT}\n"),
                ),
        );
        t.say(fix).await;
        let rows = t.taken("fix-1@example.org").await;
        assert_eq!(str_of(&rows[0]["state"]), "done", "{rows:#?}");
        let answer = mail_when(&sink, "the fix's answer", |d| {
            in_reply_to(d, "fix-1@example.org")
        })
        .await;
        for rcpt in [
            "<maint@example.org>",
            &format!("<{LIST}>"),
            "<pat@example.org>",
        ] {
            assert!(
                answer.rcpt_to.iter().any(|r| r == rcpt),
                "{rcpt}: {answer:?}"
            );
        }
        assert!(
            !answer.rcpt_to.iter().any(|r| r.contains("victim")),
            "{:?}",
            answer.rcpt_to
        );
        world.repo.checkout("main");
        let reuse = world.repo.commit("pipe: reuse pages");
        world.repo.commit("pipe: reuse pages more");
        let watch = json!({"repo": REPO, "branch": "main", "job_file": JOB, "interval_secs": 1});
        sim.post("/api/v1/watches", watch, 201).await;
        let rechecked = poll(DEADLINE, || async {
            let heads: Vec<String> = t
                .verify_pairs()
                .await
                .iter()
                .map(|s| str_of(&s["head"]["sha"]).to_owned())
                .collect();
            if heads.iter().any(|h| h == &reuse) {
                Ok(heads)
            } else {
                Err(format!("no verify pair of the fix among {heads:?}"))
            }
        })
        .await;
        // Two looks for fixes later, still the one pair.
        tokio::time::sleep(Duration::from_secs(21)).await;
        let verify = t.verify_pairs().await;
        assert_eq!(
            verify.len(),
            verify_before + 4,
            "{rechecked:?}: {verify:#?}"
        );

        // The maintainer closes it; then no retest, even from Pat.
        t.say(signed(&t.reply(
            MAINT,
            "invalid-2@example.org",
            "#kbot invalid\n",
        )))
        .await;
        let rows = t.taken("invalid-2@example.org").await;
        assert_eq!(str_of(&rows[0]["state"]), "done", "{rows:#?}");
        assert_eq!(t.regression_state().await, "invalid");
        t.say(signed(&t.reply(
            PAT,
            "retest-2@example.org",
            "#kbot retest\n",
        )))
        .await;
        let rows = t.taken("retest-2@example.org").await;
        assert!(
            str_of(&rows[0]["outcome"]).contains("is invalid"),
            "{rows:#?}"
        );
        mail_when(&sink, "the refused retest", |d| {
            in_reply_to(d, "retest-2@example.org")
        })
        .await;
        assert_eq!(t.verify_pairs().await.len(), verify_before + 4);

        // Never a command row for kbot's own mail, never mail to forgers.
        let all = t.commands(t.fsdevel.0).await;
        assert!(
            all.iter().all(|c| c["message_id"] != "own-1@kbot.test"),
            "{all:#?}"
        );
        for forged in [
            "forged-1@example.org",
            "forged-2@example.org",
            "list-1@lists.example.org",
        ] {
            assert!(answers_to(&sink, forged).is_empty(), "{forged}");
        }
        let events = sim.get(&format!("/api/v1/lists/{}", t.fsdevel.0)).await;
        assert!(
            list(events["events"].clone())
                .iter()
                .any(|e| str_of(&e["detail"]).contains("refused, not answered")),
            "{events:#}"
        );
        world.repo.git(&["reset", "-q", "--hard", &base]);
        sim.stop().await;
    }
}

/// A regression of `seeded`'s first atomic job on `metric`, with no report.
async fn other_regression(sim: &Sim<'_>, seeded: &seed::Seeded, metric: &str) -> i64 {
    let mut tx = sim.t.db().begin().await.expect("begin");
    let repo_id: i64 = sqlx::query_scalar("SELECT repo_id FROM submissions WHERE id = $1")
        .bind(seeded.submission_id)
        .fetch_one(&mut *tx)
        .await
        .expect("repo");
    let id = regressions::record(
        &mut tx,
        &regressions::NewRegression {
            repo_id,
            submission_id: seeded.submission_id,
            atomic_job_id: seeded.atomic_job_ids[0],
            metric,
            tbox_group: "grp",
            change_pct: Some(-5.0),
            bisection_id: None,
            report_id: None,
        },
    )
    .await
    .expect("regression")
    .expect("recorded");
    tx.commit().await.expect("commit");
    id
}

/// Regression `id` as the API shows it.
async fn regression(sim: &Sim<'_>, id: i64) -> Value {
    list(sim.get("/api/v1/regressions").await)
        .into_iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no regression {id}"))
}

/// `#kbot dup:` takes only an existing regression other than the report's
/// own that is no duplicate of it, link by link: an unknown number, the
/// report's own regression and a cycle are refused, answered, and change
/// nothing; another regression, by number, is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dup_names_another_regression_and_makes_no_cycle() {
    let world = World::new();
    let (base, posted) = posted_patch(&world);
    for backend in backends() {
        world.repo.git(&["checkout", "-q", "main"]);
        let sink = smtp_sink::Sink::start(smtp_sink::Plan::default()).await;
        let port = sink.addr.port();
        let sim = Sim::start_with(backend, &world, move |c| {
            c.mail = sim::mail_to(port);
            c.mail.dkim_keys = pinned_keys();
        })
        .await;
        let t = Thread::reported(&sim, &sink, &world, &posted).await;
        let own = id(&list(sim.get("/api/v1/regressions").await)[0]);
        let seeded = seed::submission(sim.t.db(), "other", "alice", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        let other = other_regression(&sim, &seeded, "other.metric").await;
        // A regression already marked a duplicate of this report's.
        let cyclic = other_regression(&sim, &seeded, "cyclic.metric").await;
        let mut tx = sim.t.db().begin().await.expect("begin");
        regressions::mark_duplicate(&mut tx, cyclic, own, None, "#kbot dup by a test")
            .await
            .expect("duplicate");
        tx.commit().await.expect("commit");

        let refused = [
            (
                "dup-unknown@example.org",
                "999999".to_owned(),
                "names no regression",
            ),
            (
                "dup-self@example.org",
                own.to_string(),
                "no duplicate of itself",
            ),
            ("dup-cycle@example.org", format!("#{cyclic}"), "cycle"),
        ];
        for (mail, target, why) in &refused {
            let body = format!("#kbot dup: {target}\n");
            t.say(signed(&t.reply(PAT, mail, &body))).await;
            let rows = t.taken(mail).await;
            let dup = one(&rows, "dup");
            assert_eq!(str_of(&dup["state"]), "refused", "{backend:?}: {rows:#?}");
            assert!(str_of(&dup["outcome"]).contains(why), "{why}: {rows:#?}");
            let r = regression(&sim, own).await;
            assert_eq!(str_of(&r["state"]), "new", "{mail}: {r:#}");
            assert_eq!(r["duplicate_of"], Value::Null, "{mail}: {r:#}");
            mail_when(&sink, "the dup refusal", |d| in_reply_to(d, mail)).await;
        }
        let r = regression(&sim, cyclic).await;
        assert_eq!(
            (str_of(&r["state"]), &r["duplicate_of"]),
            ("duplicate", &json!(own))
        );

        t.say(signed(&t.reply(
            PAT,
            "dup-other@example.org",
            &format!("#kbot dup: {other}\n"),
        )))
        .await;
        let rows = t.taken("dup-other@example.org").await;
        assert_eq!(str_of(&one(&rows, "dup")["state"]), "done", "{rows:#?}");
        let r = regression(&sim, own).await;
        assert_eq!(
            (str_of(&r["state"]), &r["duplicate_of"]),
            ("duplicate", &json!(other))
        );
        world.repo.git(&["reset", "-q", "--hard", &base]);
        sim.stop().await;
    }
}

/// Answers over the hourly cap stay pending: four series that do not apply,
/// a cap of two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_over_the_hourly_cap_wait() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    let mut broken = Vec::new();
    for i in 0..4 {
        author.at(&base);
        author.commit(
            "kernel/sys.c",
            &format!("unposted {i}\n"),
            "sys: a change nobody posted",
        );
        author.commit(
            "kernel/sys.c",
            &format!("unposted {i}\nposted\n"),
            &format!("sys: tidy the table, take {i}"),
        );
        broken.push(author.post(1, 1, &base, &[]));
    }
    for backend in backends() {
        let sink = smtp_sink::Sink::start(smtp_sink::Plan::default()).await;
        let port = sink.addr.port();
        let sim = Sim::start_with(backend, &world, move |c| {
            c.mail = sim::mail_to(port);
            c.mail.max_per_hour = 2;
        })
        .await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let inbox = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
        for b in &broken {
            append(&inbox, &b.mails);
        }
        add_list(&sim, "fsdevel", inbox.root(), LIST).await;
        for b in &broken {
            series_when(&sim, &b.message_id(0), |s| s["state"] == "cannot_apply").await;
        }
        let answers = poll(DEADLINE, || async {
            let answers: Vec<Value> = sim
                .reports()
                .await
                .into_iter()
                .filter(|r| r["kind"] == "answer")
                .collect();
            let sent = answers.iter().filter(|r| r["state"] == "sent").count();
            if answers.len() == 4 && sent == 2 {
                Ok(answers)
            } else {
                Err(format!("{} answers, {sent} sent", answers.len()))
            }
        })
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(sink.received().len(), 2, "{backend:?}");
        let pending = answers.iter().filter(|r| r["state"] == "pending").count();
        assert_eq!(pending, 2, "{answers:#?}");
        sim.stop().await;
    }
}
