//! The agent daemon against the real kbot-server (SQLite, and PostgreSQL
//! when KBOT_TEST_DATABASE_URL is set): enrol, lease both sides of a
//! submission, run the real static kbot-bench on the host backend, spool and
//! upload; the server then holds both runs' metrics.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kbot_agent::build_cache::BuildCache;
use kbot_agent::client::ApiClient;
use kbot_agent::daemon::{enrol, Daemon, Enrolment};
use kbot_agent::host_backend::HostConfig;
use kbot_agent::job_runner::{Backend, JobRunner};
use kbot_agent::kernel_build::{BuildConfig, Builder};
use kbot_agent::roles::Roles;
use kbot_agent::spool::Spool;
use kbot_api::agent::BootBackend;
use kbot_testkit::gitrepo::git;
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

/// A host-backend daemon working in `work`, each workload execution
/// limited to `run_timeout_secs`.
fn host_daemon(
    server_url: &str,
    token: &str,
    work: &Path,
    bench: &Path,
    run_timeout_secs: u64,
) -> Daemon {
    let runner = JobRunner {
        backend: Backend::Host,
        builder: Builder::new(
            BuildConfig::x86_64(work, 1),
            BuildCache::open(&work.join("cache"), 1 << 20).expect("cache"),
        ),
        host: HostConfig {
            kbot_bench: bench.to_path_buf(),
            run_timeout: std::time::Duration::from_secs(run_timeout_secs),
            perf: true,
        },
        runs_dir: work.join("runs"),
        state_dir: work.to_path_buf(),
    };
    Daemon::new(
        ApiClient::new(server_url, Some(token.to_string())).expect("client"),
        Arc::new(runner),
        Arc::new(Spool::open(&work.join("spool")).expect("spool")),
        2,
        // A host-backend agent builds no kernels for the lab.
        Roles {
            build: false,
            test: true,
        },
    )
}

/// The host-backend test agent's enrolment, its identity kept in `work`.
fn host_enrolment(work: &Path, server_url: &str, token: Option<String>) -> Enrolment {
    Enrolment {
        identity_file: work.join("agent.json"),
        server: server_url.to_string(),
        token,
        name: "host-test-1".into(),
        tbox_group: "host-test".into(),
        backend: BootBackend::Host,
        hardware: kbot_agent::hwinfo::read_host().expect("hwinfo"),
        host: None,
    }
}

/// The kbot-bench binary; without one a test is skipped, except under CI,
/// where that is a failure.
fn kbot_bench_or_skip() -> Option<PathBuf> {
    let bench = kbot_bench();
    if bench.is_none() {
        let why =
            "no kbot-bench binary (cargo build -p kbot-bench or scripts/build-kbot-bench-static)";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipping: {why}");
    }
    bench
}

/// A server with user alice, who registered a two-commit repository
/// `linux` (in `tmp`); its base and head.
struct Setup {
    server: kbot_testkit::TestServer,
    tmp: tempfile::TempDir,
    user: String,
    base: String,
    head: String,
}

async fn setup(backend: kbot_testkit::Backend) -> Setup {
    let server = kbot_testkit::TestServer::start(backend).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo_dir = tmp.path().join("linux");
    std::fs::create_dir_all(&repo_dir).expect("mkdir");
    let (base, head) = repo(&repo_dir);
    let (_, user) = kbot_server::auth::create_user_token(server.db(), "alice", None)
        .await
        .expect("user token");
    let r = server
        .http
        .post(server.url("/api/v1/repos"))
        .bearer_auth(&user)
        .json(&json!({"name": "linux", "url": repo_dir.display().to_string()}))
        .send()
        .await
        .expect("repo");
    assert!(
        r.status().is_success(),
        "repo: {}",
        r.text().await.unwrap_or_default()
    );
    Setup {
        server,
        tmp,
        user,
        base,
        head,
    }
}

#[tokio::test]
async fn the_daemon_runs_both_sides_and_the_server_holds_the_results() {
    let Some(bench) = kbot_bench_or_skip() else {
        return;
    };
    for backend in kbot_testkit::backends() {
        let Setup {
            server,
            tmp,
            user,
            base,
            head,
        } = setup(backend).await;
        // A sub-second workload and one run per side: the test is about the
        // protocol, spool and monitors, not about the numbers.
        let job =
            "testcase: perf-bench-sched-pipe\nruns: 1\nperf-bench-sched-pipe:\n  loops: 20000\n";
        let id = submit(&server, &user, job, &base, &head).await;

        let (work, server_url, identity) = enrol_host_agent(&server, &tmp).await;
        let again = enrol(&host_enrolment(&work, &server_url, None))
            .await
            .expect("the persisted identity is reused without a token");
        assert_eq!(again.agent_token, identity.agent_token);
        let daemon = host_daemon(&server_url, &identity.agent_token, &work, &bench, 300);
        let spool = daemon.spool.clone();
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

/// A submission through the REST API; its id.
async fn submit(
    server: &kbot_testkit::TestServer,
    user: &str,
    job: &str,
    base: &str,
    head: &str,
) -> i64 {
    let r = server
        .http
        .post(server.url("/api/v1/submissions"))
        .bearer_auth(user)
        .json(&json!({"repo": "linux", "job_file": job, "base": base, "head": head, "max_runs": 1}))
        .send()
        .await
        .expect("submit");
    let status = r.status();
    let body = r.text().await.expect("submission body");
    assert!(status.is_success(), "submit: {status} {body}");
    let sub: Value = serde_json::from_str(&body).expect("submission json");
    sub["id"].as_i64().expect("submission id")
}

/// Enrols the host test agent with a new enrolment token, its work dir in
/// `tmp/agent`: the work dir, the server's URL and the agent's identity.
async fn enrol_host_agent(
    server: &kbot_testkit::TestServer,
    tmp: &tempfile::TempDir,
) -> (PathBuf, String, kbot_agent::client::Identity) {
    let work = tmp.path().join("agent");
    let server_url = server.url("").trim_end_matches('/').to_string();
    let token = server.enrollment_token().await;
    let identity = enrol(&host_enrolment(&work, &server_url, Some(token)))
        .await
        .expect("enrol");
    (work, server_url, identity)
}

/// `(state, failure, failure_detail, finished_at)` of a submission's jobs.
async fn jobs_of(
    server: &kbot_testkit::TestServer,
    submission: i64,
) -> Vec<(String, Option<String>, Option<String>, Option<i64>)> {
    use sqlx::Row;
    sqlx::query(
        "SELECT state, failure, failure_detail, finished_at FROM jobs \
         WHERE submission_id = $1 ORDER BY id",
    )
    .bind(submission)
    .fetch_all(server.db().read())
    .await
    .expect("jobs")
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    .collect()
}

/// Workloads that hang (run far past the run timeout) on the host
/// backend: the timeout fires, the workload is killed, the server marks
/// each job failed as `timeout` with the limit in the reason, and the
/// daemon goes on to the next jobs, which finish with results.
#[tokio::test]
async fn a_hung_workload_times_out_and_the_daemon_takes_the_next_job() {
    const LOOPS: &str = "2000000017"; // hours of pipe round trips
    let Some(bench) = kbot_bench_or_skip() else {
        return;
    };
    for backend in kbot_testkit::backends() {
        let Setup {
            server,
            tmp,
            user,
            base,
            head,
        } = setup(backend).await;
        let job = |loops: &str| {
            format!("testcase: perf-bench-sched-pipe\nruns: 1\nperf-bench-sched-pipe:\n  loops: {loops}\n")
        };
        let hung = submit(&server, &user, &job(LOOPS), &base, &head).await;
        let quick = submit(&server, &user, &job("20000"), &base, &head).await;

        let (work, server_url, identity) = enrol_host_agent(&server, &tmp).await;
        let daemon = host_daemon(&server_url, &identity.agent_token, &work, &bench, 2);
        let started = std::time::Instant::now();
        daemon.run(Some(4)).await.expect("four jobs run");
        assert!(started.elapsed() < std::time::Duration::from_secs(30));

        let failed = jobs_of(&server, hung).await;
        assert_eq!(failed.len(), 2, "{failed:?}");
        for (state, failure, detail, _) in &failed {
            assert_eq!(state, "failed", "{backend:?}: {failed:?}");
            assert_eq!(failure.as_deref(), Some("timeout"));
            let detail = detail.as_deref().unwrap_or_default();
            assert!(
                detail.starts_with("timed out after 2 s in the workload: `")
                    && detail.contains(LOOPS),
                "{detail}"
            );
        }
        let done = jobs_of(&server, quick).await;
        assert!(done.iter().all(|j| j.0 == "finished"), "{done:?}");
        // The daemon took the quick jobs after the hung ones failed.
        let last_failure = failed.iter().filter_map(|j| j.3).max();
        assert!(
            done.iter().all(|j| j.3 > last_failure),
            "{failed:?} {done:?}"
        );
        let left: Vec<String> = std::fs::read_dir("/proc")
            .expect("/proc")
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(LOOPS))
            .collect();
        assert!(
            left.is_empty(),
            "the hung workload outlived its timeout: {left:?}"
        );
        server.stop().await;
    }
}
