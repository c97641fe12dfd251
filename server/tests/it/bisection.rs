//! The robot loop against simulated agents (builds cost nothing; a run's KPI
//! is a function of its commit), on every backend: bisections of planted
//! regressions checked against `git bisect` on the same history, skipped
//! commits, noisy steps, merges, improvements, duplicates by patch-id,
//! restart, cancel, watches, and the reports each writes.
//!
//! Steps against log2 of the range size (BENCHMARKS.md):
//! `cargo test -p kbot-server --test it -- --nocapture --test-threads 1 bisection::every_position`

use crate::sim;
use kbot_testkit::smtp_sink;

use crate::sim::fleet::{Fleet, GOOD};
use crate::sim::{id, list, poll, str_of, svgs, Sim, World, DEADLINE, KPI, REPO};
use kbot_testkit::{backends, Backend, THREE_RUN_JOB};
use serde_json::{json, Value};

/// A 20% drop of the higher-is-better KPI.
const SLOWER: f64 = 0.8;
/// The author of the planted regressions in the report tests.
const BOB: &str = "Bob Blame <bob@example.org>";

fn bisection(d: &Value) -> &Value {
    &d["bisection"]
}

fn state(d: &Value) -> &str {
    str_of(&d["bisection"]["state"])
}

fn first_bad(d: &Value) -> &str {
    str_of(&d["bisection"]["first_bad"]["sha"])
}

fn steps(d: &Value) -> &[Value] {
    d["steps"].as_array().map_or(&[], Vec::as_slice)
}

/// The step that tested `sha`.
fn step_at<'a>(d: &'a Value, sha: &str) -> &'a Value {
    steps(d)
        .iter()
        .find(|s| s["sha"] == sha)
        .unwrap_or_else(|| panic!("no step tested {sha}: {d:#}"))
}

/// `(sha, state, runs)` of each step, in order.
fn path(d: &Value) -> Vec<(String, String, u64)> {
    let row = |s: &Value| {
        let runs = s["runs"].as_u64().unwrap_or_default();
        (
            str_of(&s["sha"]).to_owned(),
            str_of(&s["state"]).to_owned(),
            runs,
        )
    };
    steps(d).iter().map(row).collect()
}

fn count(d: &Value, field: &str) -> u64 {
    d["bisection"][field].as_u64().unwrap_or_default()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The bisection ended `reported` on `sha`, and `reports` holds its report.
fn expect_reported<'r>(reports: &'r [Value], d: &Value, sha: &str) -> &'r Value {
    assert_eq!((state(d), first_bad(d)), ("reported", sha), "{d:#}");
    assert_eq!(count(d, "steps") as usize, steps(d).len(), "{d:#}");
    let b = bisection(d);
    let report = reports
        .iter()
        .find(|r| r["bisection_id"] == b["id"])
        .unwrap_or_else(|| panic!("no report of bisection {b}: {reports:#?}"));
    assert!(str_of(&report["subject"]).contains(&sha[..10]), "{report}");
    report
}

/// No report of this bisection, and it links to none.
fn expect_unreported(reports: &[Value], d: &Value) {
    let b = bisection(d);
    assert!(
        reports.iter().all(|r| r["bisection_id"] != b["id"]),
        "{reports:#?}"
    );
}

/// On a fresh server on `backend`: `agents` simulated agents bisect
/// base..head for each head, concurrently. Returns the bisections' details
/// (in `heads` order) and the reports.
async fn bisect_all(
    backend: Backend,
    world: &World,
    agents: usize,
    heads: &[&str],
) -> (Vec<Value>, Vec<Value>) {
    let sim = Sim::start(backend, world).await;
    let fleet = Fleet::enroll(&sim, agents).await;
    let mut origins = Vec::new();
    for head in heads {
        origins.push(sim.submit(&world.repo.base, head).await);
    }
    let limit = DEADLINE * u32::try_from(heads.len()).unwrap_or(1);
    let done = fleet.run_until(sim.ended(&origins, limit)).await;
    let reports = sim.reports().await;
    sim.stop().await;
    (done, reports)
}

async fn bisect_one(
    backend: Backend,
    world: &World,
    agents: usize,
    head: &str,
) -> (Value, Vec<Value>) {
    let (mut done, reports) = bisect_all(backend, world, agents, &[head]).await;
    (done.pop().expect("one bisection"), reports)
}

/// 1. One planted regression at each position 1..=16 of a 16-commit range:
/// the first bad commit is the planted one, in about log2(16) steps (one
/// agent: plain binary search). Prints steps against `git bisect`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_position_of_a_16_commit_range() {
    let world = World::new();
    let ranges: Vec<Vec<String>> = (1..=16)
        .map(|p| {
            let shas = world.range(&format!("p{p:02}"), 16);
            world.model.plant(&world.repo, &shas[p - 1], SLOWER);
            shas
        })
        .collect();
    let oracle: Vec<_> = ranges.iter().map(|r| world.git_bisect(&r[15])).collect();
    let heads: Vec<&str> = ranges.iter().map(|r| r[15].as_str()).collect();
    for backend in backends() {
        let (done, reports) = bisect_all(backend, &world, 1, &heads).await;
        println!("{backend:?}, 16 commits, log2 = 4, 1 agent");
        println!("| bad at | git bisect steps | kbot steps | builds | runs | wall s |");
        for (p, (d, git)) in done.iter().zip(&oracle).enumerate() {
            let planted = &ranges[p][p];
            assert_eq!(git.first_bad.as_ref(), Some(planted));
            let report = expect_reported(&reports, d, planted);
            assert_eq!(str_of(&report["state"]), "mail_off", "{report}");
            let n = count(d, "steps");
            println!(
                "| {} | {} | {n} | {} | {} | {} |",
                p + 1,
                git.tested.len(),
                count(d, "builds"),
                count(d, "runs"),
                bisection(d)["wall_secs"]
            );
            // One agent: one commit at a time, the ones `git bisect` picks.
            let tested: Vec<String> = path(d).into_iter().map(|s| s.0).collect();
            assert_eq!(tested, git.tested, "{backend:?} position {}: {d:#}", p + 1);
        }
        let total: u64 = done.iter().map(|d| count(d, "steps")).sum();
        let git_total: usize = oracle.iter().map(|g| g.tested.len()).sum();
        println!(
            "mean steps: kbot {:.2}, git bisect {:.2}",
            total as f64 / 16.0,
            git_total as f64 / 16.0
        );
        assert!(total <= 16 * 4 + 4, "{backend:?}: {total} steps in all");
    }
}

/// A bisection never leaves its pair's tbox group: with agents of two
/// groups leasing, the origin pair, every probe and the verification all
/// run in the group that took the pair's first run, and the report names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bisection_stays_in_its_tbox_group() {
    let world = World::new();
    let shas = world.range("groups", 8);
    world.model.plant(&world.repo, &shas[4], SLOWER);
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let fleet = Fleet::enroll_groups(&sim, &[("arm64k", 2), ("x86-4k", 2)]).await;
        let origin = sim.submit(&world.repo.base, &shas[7]).await;
        let done = fleet
            .run_until(sim.ended(&[origin], DEADLINE))
            .await
            .pop()
            .expect("one bisection");
        assert_eq!(first_bad(&done), shas[4], "{backend:?}: {done:#}");
        let (groups, runs) = {
            let served = fleet.served.borrow();
            let groups: std::collections::BTreeSet<&str> = served.iter().map(|s| s.group).collect();
            (groups, served.len())
        };
        assert_eq!(groups.len(), 1, "{backend:?}: runs in {groups:?}");
        let group = *groups.first().expect("a group");
        assert_eq!(
            str_of(&bisection(&done)["tbox_group"]),
            group,
            "{backend:?}"
        );
        assert!(runs > 2 * 3, "{backend:?}: only {runs} runs");
        sim.stop().await;
    }
}

/// The same range bisected on two tbox groups (both find the regression)
/// builds each commit once: the second group's probes download what the
/// first built, and the other way round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bisection_on_two_groups_builds_each_probe_once() {
    let world = World::new();
    let shas = world.range("shared", 8);
    world.model.plant(&world.repo, &shas[4], SLOWER);
    let groups = ["x86-4k", "x86-lab"];
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let fleet = Fleet::enroll_groups(&sim, &[(groups[0], 1), (groups[1], 1)])
            .await
            .sharing_builds();
        let mut origins = Vec::new();
        for group in groups {
            let job_file = format!("{THREE_RUN_JOB}tbox_group: {group}\n");
            let body = json!({"repo": REPO, "job_file": job_file,
                "base": world.repo.base, "head": shas[7]});
            origins.push(id(&sim.post("/api/v1/submissions", body, 201).await));
        }
        let done = fleet.run_until(sim.ended(&origins, DEADLINE * 2)).await;
        for d in &done {
            assert_eq!(first_bad(d), shas[4], "{backend:?}: {d:#}");
        }
        let served: std::collections::BTreeSet<(String, &str)> = fleet
            .served
            .borrow()
            .iter()
            .map(|s| (s.commit.clone(), s.group))
            .collect();
        let commits: std::collections::BTreeSet<&String> = served.iter().map(|s| &s.0).collect();
        let built = fleet.built.borrow().clone();
        let mut once = built.clone();
        once.sort();
        once.dedup();
        assert_eq!(
            once.len(),
            built.len(),
            "{backend:?}: built twice: {built:?}"
        );
        assert_eq!(built.len(), commits.len(), "{backend:?}: {served:?}");
        assert!(
            served.len() > commits.len(),
            "{backend:?}: the groups shared no commit: {served:?}"
        );
        let claims: i64 = sqlx::query_scalar("SELECT CAST(SUM(claims) AS BIGINT) FROM builds")
            .fetch_one(sim.t.db().read())
            .await
            .expect("claims");
        assert_eq!(claims as usize, commits.len(), "{backend:?}");
        println!(
            "{backend:?}: {} commits served on {} (commit, group) pairs, {} built",
            commits.len(),
            served.len(),
            built.len()
        );
        sim.stop().await;
    }
}

/// 2. Two regressions in one range: the first is found (three agents, so
/// steps run in parallel).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_regressions_find_the_first() {
    let world = World::new();
    let shas = world.range("two", 16);
    world.model.plant(&world.repo, &shas[4], 0.85);
    world.model.plant(&world.repo, &shas[11], 0.85);
    assert_eq!(
        world.git_bisect(&shas[15]).first_bad.as_ref(),
        Some(&shas[4])
    );
    for backend in backends() {
        let (d, reports) = bisect_one(backend, &world, 3, &shas[15]).await;
        expect_reported(&reports, &d, &shas[4]);
    }
}

/// 3 and 4. A commit whose runs all fail (`failure`) is skipped: with a
/// tested good commit between it and the regression the bisection still
/// finds the bad commit; right before the regression it cannot decide and
/// ends `inconclusive` with both left, as `git bisect` does.
async fn unusable_neighbour(failure: &'static str) {
    let world = World::new();
    let decidable = world.range("decidable", 16);
    world.model.fail(&decidable[7], failure);
    world.model.plant(&world.repo, &decidable[9], SLOWER);
    let undecidable = world.range("undecidable", 16);
    world.model.fail(&undecidable[7], failure);
    world.model.plant(&world.repo, &undecidable[8], SLOWER);
    let git = world.git_bisect(&decidable[15]);
    assert_eq!(git.first_bad.as_ref(), Some(&decidable[9]));
    let left = sorted(world.git_bisect(&undecidable[15]).remaining);
    assert_eq!(left, sorted(undecidable[7..9].to_vec()));
    for backend in backends() {
        let heads = [decidable[15].as_str(), undecidable[15].as_str()];
        let (done, reports) = bisect_all(backend, &world, 1, &heads).await;
        let (d, u) = (&done[0], &done[1]);
        expect_reported(&reports, d, &decidable[9]);
        let skipped = step_at(d, &decidable[7]);
        assert_eq!(str_of(&skipped["state"]), "skip", "{d:#}");
        assert_eq!(str_of(&skipped["failure"]), failure, "{d:#}");

        assert_eq!(state(u), "inconclusive", "{backend:?}: {u:#}");
        let remaining: Vec<String> = list(bisection(u)["remaining"].clone())
            .iter()
            .map(|s| str_of(s).to_owned())
            .collect();
        assert_eq!(sorted(remaining), left, "{u:#}");
        assert!(bisection(u)["first_bad"].is_null(), "{u:#}");
        assert!(!str_of(&bisection(u)["reason"]).is_empty(), "{u:#}");
        assert_eq!(str_of(&step_at(u, &undecidable[7])["state"]), "skip");
        expect_unreported(&reports, u);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbuildable_neighbour() {
    unusable_neighbour("build_failed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boot_failure() {
    unusable_neighbour("boot_failed").await;
}

/// 5. The first probe's first runs spread over both ends, so the step asks
/// for more runs (beyond the other steps' count) before it decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noisy_middle_needs_more_runs() {
    let world = World::new();
    let shas = world.range("noisy", 16);
    world.model.plant(&world.repo, &shas[5], SLOWER);
    let spread = [1.0, 0.8, 0.81, 0.79, 0.805, 0.795];
    world
        .model
        .noisy(&shas[7], spread.iter().map(|f| f * GOOD).collect());
    for backend in backends() {
        let (d, reports) = bisect_one(backend, &world, 1, &shas[15]).await;
        expect_reported(&reports, &d, &shas[5]);
        let noisy = step_at(&d, &shas[7]);
        // Bad once the extra runs outweigh the spread, or undecided at the
        // cap and then passed over like a skipped commit: either way not
        // called good, and the answer stands.
        let verdict = str_of(&noisy["state"]);
        assert!(["bad", "undecided"].contains(&verdict), "{d:#}");
        // Every step starts with the same runs; any step (not only the noisy
        // one) may ask for more, so the initial count is the fewest taken.
        let others = steps(&d).iter().filter(|s| s["sha"] != shas[7].as_str());
        let initial = others.filter_map(|s| s["runs"].as_u64()).min().unwrap_or(0);
        let runs = noisy["runs"].as_u64().unwrap_or_default();
        assert!(
            initial > 0 && runs > initial,
            "{backend:?}: {runs} runs vs {initial}: {d:#}"
        );
    }
}

/// 6. A side branch merged into the range carries the regression: the
/// bisection blames the side branch's commit, as `git bisect` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merges_in_the_range() {
    let world = World::new();
    let side = world.range("side", 3);
    world.repo.commits("mainline", 2);
    let merge = world.repo.merge("side", "Merge branch 'side'");
    let head = world.repo.commits("after", 2).pop().expect("head");
    world.model.plant(&world.repo, &side[1], SLOWER);
    assert!(world.model.level(&merge) < GOOD);
    assert_eq!(world.git_bisect(&head).first_bad.as_ref(), Some(&side[1]));
    for backend in backends() {
        let (d, reports) = bisect_one(backend, &world, 2, &head).await;
        expect_reported(&reports, &d, &side[1]);
    }
}

/// 7. A pair that comes out `different` but better starts no bisection and
/// writes no report. (A regression submitted after it is the barrier: once
/// that one is reported, the improvement's pair has long been settled.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_improvement_is_neither_bisected_nor_reported() {
    let world = World::new();
    let faster = world.range("faster", 4);
    world.model.plant(&world.repo, &faster[1], 1.25);
    let slower = world.range("slower", 4);
    world.model.plant(&world.repo, &slower[1], SLOWER);
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let fleet = Fleet::enroll(&sim, 2).await;
        let improved = sim.submit(&world.repo.base, &faster[3]).await;
        fleet.run_until(sim.settled(improved)).await;
        let path = format!("/api/v1/submissions/{improved}/comparisons");
        let comparisons = list(sim.get(&path).await);
        let kpi = comparisons
            .iter()
            .find(|c| c["metric"] == KPI)
            .unwrap_or_else(|| panic!("no {KPI} in {comparisons:#?}"));
        assert_eq!(str_of(&kpi["verdict"]), "different", "{kpi}");
        assert!(
            kpi["head_mean"].as_f64() > kpi["base_mean"].as_f64(),
            "{kpi}"
        );

        let d = sim.bisect(&fleet, &world.repo.base, &slower[3]).await;
        let reports = sim.reports().await;
        expect_reported(&reports, &d, &slower[1]);
        assert_eq!(reports.len(), 1, "{backend:?}: {reports:#?}");
        let bisections = sim.bisections().await;
        assert_eq!(bisections.len(), 1, "{backend:?}: {bisections:#?}");
        sim.stop().await;
    }
}

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

/// A header's raw value, as the message has it.
/// (bisection, report, triage state) of each regression, oldest first.
async fn regressions(sim: &Sim<'_>) -> Vec<(Option<i64>, Option<i64>, String)> {
    let sql = "SELECT bisection_id, report_id, state FROM regressions ORDER BY id";
    sqlx::query_as(sql)
        .fetch_all(sim.t.db().read())
        .await
        .expect("regressions")
}

/// Steps that ended good or bad.
fn decided(d: &Value) -> usize {
    let done = |s: &&Value| matches!(str_of(&s["state"]), "good" | "bad");
    steps(d).iter().filter(done).count()
}

/// 9. A server restart after two steps: the bisection resumes and takes the
/// same path (commits, verdicts, runs) as one without a restart, and no
/// probe run is served twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_bisection_repeats_no_step() {
    let world = World::new();
    let shas = world.range("restart", 16);
    world.model.plant(&world.repo, &shas[10], SLOWER);
    for backend in backends() {
        let (plain, _) = bisect_one(backend, &world, 1, &shas[15]).await;

        let sim = Sim::start(backend, &world).await;
        let fleet = Fleet::enroll(&sim, 1).await;
        let origin = sim.submit(&world.repo.base, &shas[15]).await;
        let before = fleet
            .run_until(sim.bisection_when(origin, |d| decided(d) >= 2))
            .await;
        assert_eq!(state(&before), "running", "{before:#}");
        let agents = fleet.credentials();
        let mut served = fleet.served.take();
        drop(fleet);

        let sim = sim.restart().await;
        let fleet = Fleet::rejoin(&sim, &agents);
        let mut done = fleet.run_until(sim.ended(&[origin], DEADLINE)).await;
        let d = done.pop().expect("bisection");
        served.extend(fleet.served.take());
        expect_reported(&sim.reports().await, &d, &shas[10]);
        assert_eq!(path(&d), path(&plain), "{backend:?}");
        for field in ["steps", "builds", "runs"] {
            assert_eq!(count(&d, field), count(&plain, field), "{field}");
        }
        let mut probe_runs = Vec::new();
        for s in &served {
            let kind = sim.submission(s.submission_id).await["kind"].clone();
            if kind == "bisect" {
                probe_runs.push((s.commit.clone(), s.run_index));
            }
        }
        let n = probe_runs.len();
        probe_runs.sort();
        probe_runs.dedup();
        assert_eq!(
            probe_runs.len(),
            n,
            "{backend:?}: a probe run was served twice"
        );
        sim.stop().await;
    }
}

/// 10. Cancel: the bisection ends `cancelled`, its queued probe runs are
/// cancelled (nothing is left to lease), and nothing is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_a_bisection() {
    let world = World::new();
    let shas = world.range("cancel", 16);
    world.model.plant(&world.repo, &shas[10], SLOWER);
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let fleet = Fleet::enroll(&sim, 1).await;
        let origin = sim.submit(&world.repo.base, &shas[15]).await;
        let d = fleet
            .run_until(sim.bisection_when(origin, |d| decided(d) >= 1))
            .await;
        let bid = id(bisection(&d));
        // The agent is gone: the next step's runs wait in the queue.
        let probes = poll(DEADLINE, || async {
            let probes: Vec<Value> = sim
                .submissions()
                .await
                .into_iter()
                .filter(|s| s["kind"] == "bisect")
                .collect();
            let queued = probes
                .iter()
                .any(|s| s["jobs"]["queued"].as_u64() > Some(0));
            if queued {
                Ok(probes)
            } else {
                Err(format!("no queued probe run: {probes:#?}"))
            }
        })
        .await;
        let path = format!("/api/v1/bisections/{bid}/cancel");
        let view = sim.post(&path, json!({}), 200).await;
        assert_eq!(str_of(&view["state"]), "cancelled", "{view}");
        let d = sim.bisection(bid).await;
        assert_eq!(state(&d), "cancelled", "{d:#}");
        assert!(!bisection(&d)["finished_at"].is_null(), "{d:#}");
        assert!(steps(&d).iter().all(|s| s["state"] != "testing"), "{d:#}");
        for p in &probes {
            let jobs = &sim.submission(id(p)).await["jobs"];
            assert_eq!(
                (jobs["queued"].as_u64(), jobs["active"].as_u64()),
                (Some(0), Some(0)),
                "{jobs}"
            );
            assert!(jobs["cancelled"].as_u64() > Some(0), "{jobs}");
        }
        assert!(
            fleet.lease_one().await.is_none(),
            "{backend:?}: a job after cancel"
        );
        let reports = sim.reports().await;
        assert!(reports.is_empty(), "{reports:#?}");
        sim.stop().await;
    }
}

/// The watch submission of `head`: against `base`, by the robot.
async fn expect_watch_pair(sim: &Sim<'_>, head: &str, base: &str) {
    let subs = sim.submissions().await;
    let of_head = |s: &&Value| s["kind"] == "watch" && s["head"]["sha"] == head;
    let s = subs
        .iter()
        .find(of_head)
        .unwrap_or_else(|| panic!("no watch submission of {head}: {subs:#?}"));
    assert_eq!(str_of(&s["base"]["sha"]), base, "{s}");
    assert_eq!(str_of(&s["submitter"]), "kbot-robot", "{s}");
}

/// 11. A watch: the first head against its parent; the moved branch's head
/// against the last good one; a head that does not build is recorded and
/// skipped over, the next one compared against the last good head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_follows_the_branch() {
    for backend in backends() {
        let world = World::new();
        let c1 = world.repo.commit("pipe: watched 1");
        let sim = Sim::start(backend, &world).await;
        let fleet = Fleet::enroll(&sim, 1).await;
        let body =
            json!({"repo": REPO, "branch": "main", "job_file": sim::JOB, "interval_secs": 1});
        let created = sim.post("/api/v1/watches", body, 201).await;
        assert_eq!(str_of(&created["state"]), "active", "{created}");
        let watch = id(&created);
        let good_is = |sha: String| move |w: &Value| w["watch"]["last_good"] == sha;

        fleet
            .run_until(sim.watch_when(watch, good_is(c1.clone())))
            .await;
        expect_watch_pair(&sim, &c1, &world.repo.base).await;

        world.repo.commit("pipe: watched 2");
        let c3 = world.repo.commit("pipe: watched 3");
        fleet
            .run_until(sim.watch_when(watch, good_is(c3.clone())))
            .await;
        expect_watch_pair(&sim, &c3, &c1).await;

        let c4 = world.repo.commit("pipe: watched 4");
        world.model.fail(&c4, "build_failed");
        let recorded = |w: &Value| {
            let text = w["events"].to_string();
            w["watch"]["last_tested"] == c4 && text.contains(&c4[..7])
        };
        let w = fleet.run_until(sim.watch_when(watch, recorded)).await;
        assert_eq!(w["watch"]["last_good"], c3.as_str(), "{w:#}");
        expect_watch_pair(&sim, &c4, &c3).await;

        let c5 = world.repo.commit("pipe: watched 5");
        fleet
            .run_until(sim.watch_when(watch, good_is(c5.clone())))
            .await;
        expect_watch_pair(&sim, &c5, &c3).await;

        let removed = sim.delete(&format!("/api/v1/watches/{watch}"), 200).await;
        assert_eq!(str_of(&removed["state"]), "removed", "{removed}");
        sim.stop().await;
    }
}

/// 11b. A watch hears that its pair ended instead of asking: a cancelled
/// pair is told to the watch at once (one `cancelled` event), and the
/// watch, due again at once, tests the head that arrived meanwhile rather
/// than waiting out its hour-long interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_watch_pair_is_told_and_the_watch_moves_on() {
    for backend in backends() {
        let world = World::new();
        let c1 = world.repo.commit("pipe: watched 1");
        let sim = Sim::start(backend, &world).await;
        let body =
            json!({"repo": REPO, "branch": "main", "job_file": sim::JOB, "interval_secs": 3600});
        let watch = id(&sim.post("/api/v1/watches", body, 201).await);
        let running = |w: &Value| w["watch"]["current_submission"].is_i64();
        let w = sim.watch_when(watch, running).await;
        assert_eq!(w["watch"]["last_tested"], c1.as_str(), "{w:#}");
        let first = w["watch"]["current_submission"].as_i64().expect("a pair");

        let c2 = world.repo.commit("pipe: watched 2");
        let path = format!("/api/v1/submissions/{first}/cancel");
        sim.post(&path, json!({}), 200).await;
        let moved_on = |w: &Value| {
            w["watch"]["last_tested"] == c2 && w["watch"]["current_submission"].is_i64()
        };
        let w = sim.watch_when(watch, moved_on).await;
        let cancelled: Vec<&Value> = w["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["kind"] == "cancelled")
            .collect();
        assert_eq!(cancelled.len(), 1, "{w:#}");
        assert!(
            str_of(&cancelled[0]["detail"]).contains(&format!("submission {first}")),
            "{w:#}"
        );
        assert_ne!(w["watch"]["current_submission"], first, "{w:#}");
        sim.stop().await;
    }
}

const BISECTION_KEYS: &[&str] = &[
    "id",
    "repo",
    "state",
    "good",
    "bad",
    "metric",
    "tbox_group",
    "job_name",
    "origin_submission",
    "verify_submission",
    "first_bad",
    "report_id",
    "duplicate_of",
    "reason",
    "remaining",
    "steps",
    "builds",
    "runs",
    "wall_secs",
    "created_at",
    "finished_at",
];
const STEP_KEYS: &[&str] = &[
    "index",
    "sha",
    "subject",
    "state",
    "runs",
    "failed_runs",
    "failure",
    "change_percent",
    "samples",
    "started_at",
    "finished_at",
];
const REPORT_KEYS: &[&str] = &[
    "id",
    "kind",
    "subject",
    "state",
    "bisection_id",
    "submission_id",
    "recipients",
    "created_at",
    "sent_at",
];
const WATCH_KEYS: &[&str] = &[
    "id",
    "repo",
    "branch",
    "job_name",
    "tbox_group",
    "interval_secs",
    "state",
    "last_seen",
    "last_tested",
    "last_good",
    "current_submission",
    "last_error",
    "checked_at",
    "created_at",
];

const DETAIL_KEYS: &[&str] = &["bisection", "good_samples", "bad_samples", "steps"];

/// The samples the detail gives agree with its counts and with the planted
/// slowdown: every finished run has its value, the ends are apart by the
/// slowdown, and each decided step sits with the end its verdict names.
fn sample_problems(problems: &mut Vec<String>, d: &Value, first_bad: &str) {
    let values = |v: &Value| -> Vec<f64> {
        v.as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (good, bad) = (values(&d["good_samples"]), values(&d["bad_samples"]));
    if good.is_empty() || bad.is_empty() || mean(&bad) > mean(&good) * 0.9 {
        problems.push(format!("ends' samples: good {good:?}, bad {bad:?}"));
        return;
    }
    let middle = (mean(&good) + mean(&bad)) / 2.0;
    for s in steps(d) {
        let at = values(&s["samples"]);
        if at.len() as u64 != s["runs"].as_u64().unwrap_or(u64::MAX) {
            problems.push(format!("step samples {at:?} for {} runs", s["runs"]));
        }
        let near_bad = mean(&at) < middle;
        let verdict = str_of(&s["state"]);
        if matches!(verdict, "good" | "bad") && near_bad != (verdict == "bad") {
            problems.push(format!(
                "a {verdict} step's samples {at:?} sit by the other end"
            ));
        }
        if s["sha"] == first_bad && verdict != "bad" {
            problems.push(format!("the planted commit's step is {verdict}"));
        }
    }
}

/// The fields of `keys` that `v` lacks, as one line of `problems`.
fn check_keys(problems: &mut Vec<String>, what: &str, v: &Value, keys: &[&str]) {
    let missing: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| v.get(k).is_none())
        .collect();
    if !missing.is_empty() {
        problems.push(format!("{what} lacks {missing:?}: {v}"));
    }
}

/// The JSON of bisections, steps, reports, submissions and watches has the
/// fields /tmp/robot-contract.md gives them, and the links between them
/// hold. Every deviation is listed in the one failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_views_follow_the_contract() {
    let world = World::new();
    let shas = world.range("contract", 4);
    world.model.plant(&world.repo, &shas[2], SLOWER);
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let fleet = Fleet::enroll(&sim, 1).await;
        let d = sim.bisect(&fleet, &world.repo.base, &shas[3]).await;
        let mut problems = Vec::new();
        let b = bisection(&d);
        check_keys(&mut problems, "BisectionView", b, BISECTION_KEYS);
        check_keys(&mut problems, "BisectionDetail", &d, DETAIL_KEYS);
        for s in steps(&d) {
            check_keys(&mut problems, "StepView", s, STEP_KEYS);
        }
        sample_problems(&mut problems, &d, &shas[2]);
        for (field, kind) in [
            ("origin_submission", "user"),
            ("verify_submission", "verify"),
        ] {
            let sub = b[field].as_i64().unwrap_or_else(|| panic!("{field}: {b}"));
            assert_eq!(str_of(&sim.submission(sub).await["kind"]), kind, "{field}");
        }
        let reports = sim.reports().await;
        let report = expect_reported(&reports, &d, &shas[2]);
        check_keys(&mut problems, "report", report, REPORT_KEYS);
        if b["report_id"] != report["id"] {
            let ids = (&b["report_id"], &report["id"]);
            problems.push(format!(
                "report_id {} is not the report's id {}",
                ids.0, ids.1
            ));
        }
        let path = format!("/api/v1/reports/{}", report["id"]);
        let (status, full) = sim.fetch(&path).await;
        if status != 200 || full["id"] != report["id"] || !full["message"].is_string() {
            problems.push(format!("GET {path}: {status} {full}"));
        }

        // The dashboard's page of the bisection: its path through the range.
        let page = sim.t.http.get(sim.t.url(&format!("/bisections/{}", id(b))));
        let page = page
            .send()
            .await
            .expect("GET page")
            .text()
            .await
            .expect("page");
        let first_bad: String = shas[2].chars().take(12).collect();
        let probe_link = format!("href=\"/submissions/{}\"", b["probe_submission"]);
        let wanted = [
            "<table id=\"steps\">",
            "state-bad",
            first_bad.as_str(),
            "id=\"path-plot\"",
            "good median",
            "bad median",
            probe_link.as_str(),
        ];
        for want in wanted {
            if !page.contains(want) {
                problems.push(format!("/bisections/{}: no {want:?}", id(b)));
            }
        }
        sim.keep_page(&format!("/bisections/{}", id(b)), &page);
        // The path plot is XML with one mark per sample the API gives and a
        // row per step between the ends.
        let plot = svgs(&page)
            .into_iter()
            .find(|s| s.contains("id=\"path-plot\""));
        let plot = plot.unwrap_or_default();
        match roxmltree::Document::parse(&plot) {
            Ok(doc) => {
                let marks = doc
                    .descendants()
                    .filter(|n| n.attribute("class").is_some_and(|c| c.starts_with("run ")))
                    .count();
                let samples = |v: &Value| v.as_array().map_or(0, Vec::len);
                let in_api = samples(&d["good_samples"])
                    + samples(&d["bad_samples"])
                    + steps(&d)
                        .iter()
                        .map(|s| samples(&s["samples"]))
                        .sum::<usize>();
                if marks != in_api {
                    problems.push(format!("the plot has {marks} marks for {in_api} samples"));
                }
                for s in steps(&d) {
                    let row = format!("step {}", s["index"]);
                    if !plot.contains(&row) {
                        problems.push(format!("the plot has no row {row:?}"));
                    }
                }
            }
            Err(e) => problems.push(format!("the path plot is not XML ({e}): {plot}")),
        }

        let body = json!({"repo": REPO, "branch": "main", "job_file": sim::JOB});
        let watch = sim.post("/api/v1/watches", body, 201).await;
        check_keys(&mut problems, "WatchView", &watch, WATCH_KEYS);
        assert_eq!(watch["interval_secs"], 600, "{watch}");
        let detail = sim.get(&format!("/api/v1/watches/{}", id(&watch))).await;
        check_keys(&mut problems, "watch detail", &detail, &["watch", "events"]);
        let all = list(sim.get("/api/v1/watches").await);
        assert!(all.iter().any(|w| w["id"] == watch["id"]), "{all:#?}");
        sim.stop().await;
        assert!(problems.is_empty(), "{backend:?}:\n{}", problems.join("\n"));
    }
}
