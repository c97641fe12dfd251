//! A lab of a dedicated builder and a machine that only tests, against the
//! real server: the board's asking queues its jobs' kernels; the builder's
//! daemon (`KBOT_AGENT_ROLES=build`) leases those orders, builds each once
//! in the build sandbox and shares it, or shares that it does not build;
//! the board (`KBOT_AGENT_ROLES=test`) then gets its jobs and downloads the
//! kernel, or fails with the builder's log, without ever running make.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use kbot_agent::client::ApiClient;
use kbot_agent::daemon::Daemon;
use kbot_agent::host_backend::HostConfig;
use kbot_agent::job_runner::{job_key, Backend, JobRunner};
use kbot_agent::process::Cancel;
use kbot_agent::roles::Roles;
use kbot_agent::shared_build::SharedBuilds;
use kbot_agent::spool::Spool;
use kbot_api::agent::{FailureKind, JobState};
use kbot_api::builds::{BuildView, OrderState, OrderView};
use kbot_testkit::agent::TestAgent;
use kbot_testkit::{TestServer, ONE_JOB};

use super::shared_builds::{builder, kernel_tree, made};

/// The builder's daemon: builds only, in `work`.
fn builder_daemon(t: &TestServer, token: String, work: &std::path::Path) -> Daemon {
    let runner = JobRunner {
        // Never used: a builder runs no job.
        backend: Backend::Host,
        builder: builder(work),
        host: HostConfig {
            kbot_bench: work.join("kbot-bench"),
            run_timeout: std::time::Duration::from_secs(60),
            perf: false,
        },
        runs_dir: work.join("runs"),
        state_dir: work.to_path_buf(),
    };
    Daemon::new(
        ApiClient::new(&t.url(""), Some(token)).expect("client"),
        Arc::new(runner),
        Arc::new(Spool::open(&work.join("spool")).expect("spool")),
        1,
        Roles {
            build: true,
            test: false,
        },
    )
}

async fn get_json<T: serde::de::DeserializeOwned>(t: &TestServer, path: &str) -> T {
    let response = t.http.get(t.url(path)).send().await.expect("get");
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builder_builds_what_a_board_needs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    let tree = tmp.path().join("linux");
    let (good, broken) = kernel_tree(&tree);
    let dir = tmp.path().join("artifacts");
    let t = TestServer::start_with(kbot_testkit::Backend::Sqlite, |c| c.artifact_dir = dir).await;
    kbot_load::seed::submission_at(t.db(), "linux", "u1", ONE_JOB, 1, 0, (&good, &broken))
        .await
        .expect("seed");
    sqlx::query("UPDATE repos SET url = $1 WHERE name = 'linux'")
        .bind(tree.display().to_string())
        .execute(t.db().write())
        .await
        .expect("repo url");
    let board = TestAgent::enroll(&t, "board-1", "boards").await;
    assert!(
        board.lease_as(0, false).await.is_none(),
        "no kernel is built yet"
    );
    let orders: Vec<OrderView> = get_json(&t, "/api/v1/builds/orders").await;
    assert_eq!(orders.len(), 2, "{orders:?}");

    // The builder takes both orders and ends.
    let wb = tmp.path().join("builder");
    let token = t.enroll("builder-1", "builders").await.agent_token;
    builder_daemon(&t, token, &wb)
        .run(Some(2))
        .await
        .expect("the builder's daemon");
    assert_eq!(
        made(&wb),
        1,
        "the good commit built once, the broken one failed"
    );
    let orders: Vec<OrderView> = get_json(&t, "/api/v1/builds/orders").await;
    assert!(
        orders
            .iter()
            .all(|o| o.state == OrderState::Done && o.agent.as_deref() == Some("builder-1")),
        "{orders:?}"
    );
    let builds: Vec<BuildView> = get_json(&t, "/api/v1/builds").await;
    let mut states: Vec<&str> = builds.iter().map(|b| b.state.as_str()).collect();
    states.sort();
    assert_eq!(states, ["failed", "ready"], "{builds:?}");

    // The board gets its jobs now, and only downloads.
    let wt = tmp.path().join("board");
    let mut outcomes = Vec::new();
    while let Some(job) = board.lease_as(0, false).await {
        let shared = SharedBuilds::new(board.client(), tokio::runtime::Handle::current(), false);
        let dir = wt.clone();
        let (j, key) = (job.clone(), job_key(&job, "x86_64"));
        let got = tokio::task::spawn_blocking(move || {
            let on_state = |_: JobState, _: &str| {};
            shared.kernel(&builder(&dir), &j, &key, &Cancel::new(), &on_state)
        })
        .await
        .expect("join")
        .expect("no agent error");
        let status = match &got {
            Ok(_) => board.upload(job.job_id, 100.0).await.status(),
            Err(f) => {
                let failure = serde_json::json!({
                    "state": "failed", "failure": "build_failed", "detail": f.detail
                });
                board.event(job.job_id, failure).await.status()
            }
        };
        assert!(status.is_success(), "{status}");
        outcomes.push((job.commit.clone(), got));
    }
    assert_eq!(made(&wt), 0, "the board never ran make");
    let jobs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs")
        .fetch_one(t.db().read())
        .await
        .expect("count");
    assert_eq!(outcomes.len() as i64, jobs);
    for (commit, got) in &outcomes {
        match got {
            Ok(kernel) => {
                assert_eq!(commit, &good);
                let image = std::fs::read(kernel.image()).expect("image");
                assert_eq!(image, "kernel image v1\n".repeat(4096).into_bytes());
            }
            Err(f) => {
                assert_eq!(commit, &broken);
                assert_eq!(f.kind, FailureKind::BuildFailed);
                assert!(f.detail.contains("error: expected ;"), "{}", f.detail);
            }
        }
    }
    t.stop().await;
}
