//! The server's artifact directory on a full disk (a 2 MB tmpfs): an upload
//! answers 507 `insufficient_storage` with a JSON body and a Retry-After,
//! stores nothing (no row, no half-written or temporary file), keeps the
//! job leased so the agent can send it again, and loses nothing stored
//! before; once space is freed the same upload is stored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kbot_api::agent::{ResultUpload, UploadResponse};
use kbot_testkit::agent::{error_code, TestAgent};
use kbot_testkit::tmpfs::Tmpfs;
use kbot_testkit::{backends, Backend, TestServer, ONE_JOB};
use sqlx::Row;

fn upload(raw_output: String) -> ResultUpload {
    ResultUpload {
        metrics: BTreeMap::from([("bw_pipe.bandwidth.MB/sec".to_string(), 100.0)]),
        raw_output,
        console: Some("console\n".into()),
        kconfig: None,
        kernel_release: "6.1.0".into(),
        tuning: BTreeMap::new(),
        started_at: 1,
        finished_at: 2,
        profile: None,
    }
}

async fn put(agent: &TestAgent<'_>, job_id: i64, body: &ResultUpload) -> reqwest::Response {
    agent
        .t
        .http
        .put(agent.t.url(&format!("/api/v1/jobs/{job_id}/result")))
        .bearer_auth(&agent.token)
        .json(body)
        .send()
        .await
        .expect("upload")
}

/// Every file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(dir).expect("under dir").to_path_buf());
            }
        }
    }
    out.sort();
    out
}

async fn stored_results(server: &TestServer, job_id: i64) -> i64 {
    sqlx::query("SELECT COUNT(*) FROM results WHERE job_id = $1")
        .bind(job_id)
        .fetch_one(server.db().read())
        .await
        .expect("count")
        .get(0)
}

async fn case(backend: Backend, disk: &Tmpfs) {
    let artifacts = disk.path().join(format!("artifacts-{backend:?}"));
    let dir = artifacts.clone();
    let server = TestServer::start_with(backend, |c| c.artifact_dir = dir).await;
    server.seed("dev", ONE_JOB, 1, 0).await;
    let agent = TestAgent::enroll(&server, "box-1", "lkp-test").await;

    let first = agent.lease().await.expect("a job");
    let kept = upload(format!("first run\n{}", "a".repeat(100 << 10)));
    assert_eq!(put(&agent, first.job_id, &kept).await.status(), 200);
    let before = files(&artifacts);

    let filler = disk.fill_leaving(64 << 10);
    let second = agent.lease().await.expect("a second job");
    let big = upload(format!("second run\n{}", "b".repeat(512 << 10)));
    let refused = put(&agent, second.job_id, &big).await;
    assert!(
        refused.headers().contains_key("retry-after"),
        "{backend:?}: {:?}",
        refused.headers()
    );
    let (status, code) = error_code(refused).await;
    assert_eq!((status, code.as_str()), (507, "insufficient_storage"));
    assert_eq!(stored_results(&server, second.job_id).await, 0);
    // Only complete files of the first run: nothing half-written, no temporaries.
    assert_eq!(files(&artifacts), before, "{backend:?}");
    let first_raw = artifacts.join(format!("results/{}/output.txt", first.job_id));
    assert_eq!(
        std::fs::read_to_string(&first_raw).ok().as_deref(),
        Some(kept.raw_output.as_str())
    );
    // The lease stands: the refusal is the server's trouble, not the run's.
    let beat = agent.heartbeat_ok(second.job_id).await;
    assert!(!beat.cancelled);

    std::fs::remove_file(filler).expect("free the space");
    let stored = put(&agent, second.job_id, &big).await;
    assert_eq!(stored.status(), 200, "{backend:?}");
    let stored: UploadResponse = stored.json().await.expect("upload body");
    assert!(stored.stored);
    assert_eq!(stored_results(&server, second.job_id).await, 1);
    let raw = artifacts.join(format!("results/{}/output.txt", second.job_id));
    assert_eq!(
        std::fs::read_to_string(raw).ok().as_deref(),
        Some(big.raw_output.as_str())
    );
    server.stop().await;
    std::fs::remove_dir_all(&artifacts).expect("clean the disk");
}

#[tokio::test]
async fn a_full_artifact_disk_answers_507_and_stores_nothing_half() {
    let disk = Tmpfs::mount(2 << 20);
    for backend in backends() {
        case(backend, &disk).await;
    }
}
