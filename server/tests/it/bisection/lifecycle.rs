//! A bisection's and a watch's life beyond the search: a server restart
//! mid-bisection, a cancel, a watch following its branch and hearing that
//! its pair ended.

use super::*;

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
