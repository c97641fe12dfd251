//! The robot loop against simulated agents (builds cost nothing; a run's KPI
//! is a function of its commit), on every backend: bisections of planted
//! regressions checked against `git bisect` on the same history, skipped
//! commits, noisy steps, merges, improvements, duplicates by patch-id,
//! restart, cancel, watches, and the reports each writes. The search is
//! here; the reports, a bisection's and a watch's life, and the views'
//! contract are in the submodules.
//!
//! Steps against log2 of the range size (BENCHMARKS.md):
//! `cargo test -p kbot-server --test it -- --nocapture --test-threads 1 bisection::every_position`

use crate::sim;

use crate::sim::fleet::{Fleet, GOOD};
use crate::sim::{id, list, poll, str_of, svgs, Sim, World, DEADLINE, KPI, REPO};
use kbot_testkit::{backends, Backend, THREE_RUN_JOB};
use serde_json::{json, Value};

/// A 20% drop of the higher-is-better KPI.
const SLOWER: f64 = 0.8;

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

/// Steps that ended good or bad.
fn decided(d: &Value) -> usize {
    let done = |s: &&Value| matches!(str_of(&s["state"]), "good" | "bad");
    steps(d).iter().filter(done).count()
}

mod lifecycle;
mod reports;
mod views;
