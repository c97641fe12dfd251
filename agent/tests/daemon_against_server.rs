//! The agent daemon against the real kbot-server (SQLite, and PostgreSQL
//! when KBOT_TEST_DATABASE_URL is set): enrol, lease both sides of a
//! submission, run the real static kbot-bench on the host backend, spool and
//! upload; the server then holds both runs' metrics.

#[path = "../../server/tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use kbot_agent::build_cache::BuildCache;
use kbot_agent::client::ApiClient;
use kbot_agent::daemon::{enrol, Daemon, Enrolment};
use kbot_agent::host_backend::HostConfig;
use kbot_agent::job_runner::{Backend, JobRunner};
use kbot_agent::kernel_build::{BuildConfig, Builder};
use kbot_agent::spool::Spool;
use kbot_core::api::BootBackend;
use serde_json::{json, Value};

/// The kbot-bench binary built in this workspace, if any.
fn kbot_bench() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    [
        "x86_64-unknown-linux-gnu/release/kbot-bench",
        "release/kbot-bench",
        "debug/kbot-bench",
    ]
    .iter()
    .map(|p| target.join(p))
    .find(|p| p.is_file())
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A two-commit repository: the submission's base and head.
fn repo(dir: &Path) -> (String, String) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "t"]);
    git(dir, &["config", "user.email", "t@localhost"]);
    std::fs::write(dir.join("pipe.c"), "base\n").expect("write");
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "base"]);
    let base = git(dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("pipe.c"), "head\n").expect("write");
    git(dir, &["commit", "-q", "-a", "-m", "head"]);
    (base, git(dir, &["rev-parse", "HEAD"]))
}

#[tokio::test]
async fn the_daemon_runs_both_sides_and_the_server_holds_the_results() {
    let Some(bench) = kbot_bench() else {
        let why =
            "no kbot-bench binary (cargo build -p kbot-bench or scripts/build-kbot-bench-static)";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipping: {why}");
        return;
    };
    for backend in common::backends() {
        let server = common::TestServer::start(backend).await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo_dir = tmp.path().join("linux");
        std::fs::create_dir_all(&repo_dir).expect("mkdir");
        let (base, head) = repo(&repo_dir);
        let (_, user) = kbot_server::auth::create_user_token(server.db(), "alice", None)
            .await
            .expect("user token");
        let post = |path: &str, body: Value| {
            server
                .http
                .post(server.url(path))
                .bearer_auth(&user)
                .json(&body)
                .send()
        };
        let r = post(
            "/api/v1/repos",
            json!({"name": "linux", "url": repo_dir.display().to_string()}),
        )
        .await
        .expect("repo");
        assert!(
            r.status().is_success(),
            "repo: {}",
            r.text().await.unwrap_or_default()
        );
        // A sub-second workload and one run per side: the test is about the
        // protocol, spool and monitors, not about the numbers.
        let job =
            "testcase: perf-bench-sched-pipe\nruns: 1\nperf-bench-sched-pipe:\n  loops: 20000\n";
        let r = post(
            "/api/v1/submissions",
            json!({"repo": "linux", "job_file": job, "base": base, "head": head, "max_runs": 1}),
        )
        .await
        .expect("submit");
        assert!(
            r.status().is_success(),
            "submit: {}",
            r.text().await.unwrap_or_default()
        );
        let sub: Value = r.json().await.expect("submission json");
        let id = sub["id"].as_i64().expect("submission id");

        let work = tmp.path().join("agent");
        let server_url = server.url("").trim_end_matches('/').to_string();
        let hw = kbot_agent::hwinfo::read_host().expect("hwinfo");
        let identity = enrol(&Enrolment {
            identity_file: work.join("agent.json"),
            server: server_url.clone(),
            token: Some(server.enrollment_token().await),
            name: "host-test-1".into(),
            tbox_group: "host-test".into(),
            backend: BootBackend::Host,
            hardware: hw,
            host: None,
        })
        .await
        .expect("enrol");
        let again = enrol(&Enrolment {
            identity_file: work.join("agent.json"),
            server: server_url.clone(),
            token: None,
            name: "host-test-1".into(),
            tbox_group: "host-test".into(),
            backend: BootBackend::Host,
            hardware: kbot_agent::hwinfo::read_host().expect("hwinfo"),
            host: None,
        })
        .await
        .expect("the persisted identity is reused without a token");
        assert_eq!(again.agent_token, identity.agent_token);

        let runner = JobRunner {
            backend: Backend::Host,
            builder: Builder::new(
                BuildConfig::x86_64(&work, 1),
                BuildCache::open(&work.join("cache"), 1 << 20).expect("cache"),
            ),
            host: HostConfig {
                kbot_bench: bench.clone(),
                run_timeout: std::time::Duration::from_secs(300),
                perf: true,
            },
            runs_dir: work.join("runs"),
            state_dir: work.clone(),
        };
        let spool = Arc::new(Spool::open(&work.join("spool")).expect("spool"));
        let daemon = Daemon {
            client: ApiClient::new(&server_url, Some(identity.agent_token.clone()))
                .expect("client"),
            runner: Arc::new(runner),
            spool: spool.clone(),
            lease_wait_secs: 2,
        };
        daemon.run(Some(2)).await.expect("two jobs run");
        assert!(
            spool.pending().expect("spool").is_empty(),
            "everything was acknowledged"
        );

        let results: Value = server
            .http
            .get(server.url(&format!("/api/v1/submissions/{id}/results")))
            .bearer_auth(&user)
            .send()
            .await
            .expect("results")
            .json()
            .await
            .expect("results json");
        let runs = results["runs"].as_array().expect("runs");
        let sides: Vec<&str> = runs.iter().filter_map(|r| r["side"].as_str()).collect();
        assert!(
            sides.contains(&"base") && sides.contains(&"head"),
            "{results}"
        );
        for run in runs {
            let m = &run["metrics"];
            assert!(
                m["perf-bench-sched-pipe.ops_per_sec"]
                    .as_f64()
                    .is_some_and(|v| v > 0.0),
                "{run}"
            );
            assert!(
                m["perf-bench-sched-pipe.time.elapsed_time"]
                    .as_f64()
                    .is_some(),
                "{run}"
            );
            assert!(m["vmstat.system.cs"].as_f64().is_some(), "{run}");
            assert!(m["proc-vmstat.pgfault"].as_f64().is_some(), "{run}");
            if kbot_agent::perf::available() {
                assert!(m["perf-stat.ps.task-clock"].as_f64().is_some(), "{run}");
            }
        }
        server.stop().await;
    }
}
