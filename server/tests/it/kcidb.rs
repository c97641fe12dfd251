//! `GET /api/v1/submissions/{id}/kcidb`: a pair as a KernelCI KCIDB v5.3
//! document, checked by KCIDB's own schema (the `kcidb-io` package from
//! PyPI, which `scripts/install-test-deps` installs): a pair that regressed,
//! with every run's numbers and the verdict on the head side, and a pair
//! whose head does not build.

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::sim::fleet::{Fleet, GOOD};
use crate::sim::{list, str_of, Sim, World, KPI};
use kbot_testkit::backends;

/// Validates `doc` with kcidb-io's v5.3 schema; panics with its words.
pub(crate) fn validate(doc: &Value) {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import json, sys, kcidb_io\n\
             kcidb_io.schema.V5_3.validate(json.load(sys.stdin))\n\
             print('valid')",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (scripts/install-test-deps installs kcidb-io)");
    let text = serde_json::to_vec(doc).expect("json");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&text)
        .expect("write");
    let out = child.wait_with_output().expect("python3 ran");
    assert!(
        out.status.success() && out.stdout.starts_with(b"valid"),
        "KCIDB v5.3 refuses the document: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        serde_json::to_string_pretty(doc).unwrap_or_default()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_is_a_valid_kcidb_document() {
    let world = World::new();
    let base = world.repo.base.clone();
    let slow = world.repo.commit("pipe: slow down writes");
    let broken = world.repo.commit("pipe: break the build");
    world.model.set(&slow, GOOD * 0.8);
    world.model.fail(&broken, "build_failed");
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let fleet = Fleet::enroll(&sim, 1).await;
        let regressed = sim.submit(&base, &slow).await;
        let unbuilt = sim.submit(&slow, &broken).await;
        fleet.run_until(sim.settled(regressed)).await;
        fleet.run_until(sim.settled(unbuilt)).await;

        let doc = sim
            .get(&format!("/api/v1/submissions/{regressed}/kcidb"))
            .await;
        validate(&doc);
        assert_eq!(doc["version"]["major"], 5, "{doc}");
        let checkouts = list(doc["checkouts"].clone());
        let hashes: Vec<&str> = checkouts
            .iter()
            .map(|c| str_of(&c["git_commit_hash"]))
            .collect();
        assert!(
            hashes.contains(&base.as_str()) && hashes.contains(&slow.as_str()),
            "{backend:?}: {hashes:?}"
        );
        // The sim's agents record no build: each kernel its runs booted is
        // one passed build, with the agents' arch.
        let passed: Vec<Value> = list(doc["builds"].clone())
            .into_iter()
            .filter(|b| b["status"] == "PASS")
            .collect();
        assert_eq!(passed.len(), 2, "{backend:?}: one per commit: {doc}");
        assert!(
            passed.iter().all(|b| b["architecture"].is_string()),
            "{doc}"
        );
        let results = sim
            .get(&format!("/api/v1/submissions/{regressed}/results"))
            .await;
        let runs = list(results["runs"].clone());
        let tests = list(doc["tests"].clone());
        let kpi_tests: Vec<&Value> = tests
            .iter()
            .filter(|t| t["misc"]["metric"] == KPI)
            .collect();
        assert_eq!(
            kpi_tests.len(),
            runs.len(),
            "{backend:?}: one KPI test per run"
        );
        for t in &kpi_tests {
            assert_eq!(str_of(&t["status"]), "DONE", "{t}");
            assert!(
                t["number"]["value"].as_f64().is_some_and(f64::is_finite),
                "{t}"
            );
            let head = t["misc"]["side"] == "head";
            assert_eq!(
                t["misc"]["kbot_verdict"] == "different",
                head,
                "{backend:?}: the verdict rides on the head side: {t}"
            );
        }

        let doc = sim
            .get(&format!("/api/v1/submissions/{unbuilt}/kcidb"))
            .await;
        validate(&doc);
        let missed: Vec<Value> = list(doc["tests"].clone())
            .into_iter()
            .filter(|t| t["status"] == "MISS")
            .collect();
        assert!(!missed.is_empty(), "{backend:?}: {doc}");
        assert!(
            str_of(&missed[0]["comment"]).starts_with("build_failed"),
            "{doc}"
        );
        let failed_builds = list(doc["builds"].clone())
            .into_iter()
            .filter(|b| b["status"] == "FAIL")
            .count();
        assert!(failed_builds >= 1, "{backend:?}: {doc}");

        let (status, _) = sim.fetch("/api/v1/submissions/999999/kcidb").await;
        assert_eq!(status, 404);
        sim.stop().await;
    }
}

/// A KCIDB submission endpoint as kcidb-ng serves it (`POST /submit`, a
/// bearer token): it refuses the first document with 503, then takes
/// documents that KCIDB's schema accepts and keeps them.
#[derive(Clone, Default)]
struct Endpoint {
    received: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

async fn submit(
    axum::extract::State(e): axum::extract::State<Endpoint>,
    headers: axum::http::HeaderMap,
    axum::Json(doc): axum::Json<Value>,
) -> (axum::http::StatusCode, &'static str) {
    use axum::http::StatusCode;
    let call = e.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer kcidb-secret") {
        return (StatusCode::UNAUTHORIZED, "no token");
    }
    if call == 0 {
        return (StatusCode::SERVICE_UNAVAILABLE, "try again");
    }
    let checked = doc.clone();
    let valid =
        tokio::task::spawn_blocking(move || std::panic::catch_unwind(|| validate(&checked)))
            .await
            .is_ok_and(|r| r.is_ok());
    if !valid {
        return (StatusCode::BAD_REQUEST, "not a KCIDB v5 document");
    }
    e.received.lock().expect("lock").push(doc);
    (StatusCode::OK, "OK")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_pairs_are_sent_to_kcidb_once() {
    let endpoint = Endpoint::default();
    let app = axum::Router::new()
        .route("/submit", axum::routing::post(submit))
        .with_state(endpoint.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/submit", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });

    let world = World::new();
    let base = world.repo.base.clone();
    let slow = world.repo.commit("pipe: slow down writes");
    world.model.set(&slow, GOOD * 0.8);
    for backend in backends() {
        endpoint.received.lock().expect("lock").clear();
        endpoint.calls.store(0, std::sync::atomic::Ordering::SeqCst);
        let to = url.clone();
        let sim = Sim::start_with(backend, &world, move |c| {
            c.kcidb.url = Some(to.clone());
            c.kcidb.token = Some("kcidb-secret".into());
        })
        .await;
        let fleet = Fleet::enroll(&sim, 1).await;
        let id = sim.submit(&base, &slow).await;
        fleet.run_until(sim.settled(id)).await;
        // The first call is refused; the sender tries again on its next pass.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while endpoint.received.lock().expect("lock").is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "{backend:?}: nothing reached the KCIDB endpoint"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let got = endpoint.received.lock().expect("lock").clone();
        assert_eq!(got.len(), 1, "{backend:?}");
        let hashes: Vec<String> = list(got[0]["checkouts"].clone())
            .iter()
            .map(|c| str_of(&c["git_commit_hash"]).to_string())
            .collect();
        assert!(hashes.contains(&slow), "{backend:?}: {hashes:?}");
        let (sent_at, attempts, error): (Option<i64>, i64, Option<String>) = sqlx::query_as(
            "SELECT kcidb_sent_at, kcidb_attempts, kcidb_error FROM submissions WHERE id = $1",
        )
        .bind(id)
        .fetch_one(sim.t.db().read())
        .await
        .expect("row");
        assert!(sent_at.is_some(), "{backend:?}");
        assert_eq!(
            (attempts, error),
            (2, None),
            "{backend:?}: one refusal, then sent"
        );
        // Sent once: the refusal and the document.
        assert_eq!(
            endpoint.calls.load(std::sync::atomic::Ordering::SeqCst),
            2,
            "{backend:?}"
        );
        sim.stop().await;
    }
}
