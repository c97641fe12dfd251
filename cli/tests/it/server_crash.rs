//! The real `kbot-server` binary SIGKILLed while a result upload is in
//! flight and restarted on the same store (a SQLite file, and a PostgreSQL
//! database): the agent's own spool and client resend what the server never
//! acknowledged, and afterwards every result is stored exactly once with its
//! artifacts whole, no partial rows, one comparison of the pair and one
//! report of its regression, which a further restart does not redo.
//!
//! A relay between agent and server picks the moment: the upload's head and
//! part of its 2 MB body reached the server, or the server stored the result
//! and answered but the answer never reached the agent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kbot_agent::client::ApiClient;
use kbot_agent::spool::{Pending, Spool};
use kbot_api::agent::{BootBackend, EnrollRequest, LeasedJob, ResultUpload};
use kbot_load::seed;
use kbot_server::db::Db;
use kbot_testkit::relay::{Caught, Relay, Trap};
use kbot_testkit::{backends, Backend, TestStore, THREE_RUN_JOB};
use sqlx::Row;

const KPI: &str = "bw_pipe.bandwidth.MB/sec";
/// The head commit `seed::submission` makes.
const HEAD_SHA: &str = "00000000000000000000000000000000000000b1";

/// `kbot-server serve` as a child process on a store.
struct ServerProcess {
    child: Child,
    port: u16,
}

impl ServerProcess {
    async fn start(store: &TestStore) -> ServerProcess {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_kbot-server"))
            .arg("serve")
            .env("KBOT_DATABASE_URL", &store.database_url)
            .env("KBOT_BIND", format!("127.0.0.1:{port}"))
            .env("KBOT_ARTIFACT_DIR", artifact_dir(store))
            .env("KBOT_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .expect("kbot-server starts");
        let server = ServerProcess { child, port };
        server.wait_ready().await;
        server
    }

    async fn wait_ready(&self) {
        let url = format!("http://127.0.0.1:{}/healthz", self.port);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if reqwest::get(&url)
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("kbot-server on port {} never became healthy", self.port);
    }

    /// SIGKILL: no shutdown handler runs.
    fn kill(mut self) {
        self.child.kill().expect("SIGKILL kbot-server");
        self.child.wait().expect("reap kbot-server");
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn artifact_dir(store: &TestStore) -> PathBuf {
    store.dir.path().join("artifacts")
}

/// A run's upload: head runs 20% slower. The runs that meet a crash carry
/// 2 MB of raw output, so the body arrives at the server in many pieces.
fn upload(job: &LeasedJob, run: u32) -> ResultUpload {
    let level = if job.commit == HEAD_SHA {
        800.0
    } else {
        1000.0
    };
    let size = if matches!(run, 4 | 5) {
        2 << 20
    } else {
        4 << 10
    };
    let raw_output = format!("job {} run {run}\n", job.job_id) + &"x".repeat(size);
    ResultUpload {
        metrics: BTreeMap::from([(KPI.to_string(), level + f64::from(run % 5))]),
        raw_output,
        console: Some(format!("console of job {}\n", job.job_id)),
        kconfig: None,
        kernel_release: "6.1.0-test".into(),
        tuning: BTreeMap::new(),
        started_at: 1,
        finished_at: 2,
        profile: None,
    }
}

/// The agent's client and its token (for fresh clients of the same agent).
async fn enroll(db: &Db, url: &str) -> (ApiClient, String) {
    let token = kbot_server::auth::create_enrollment_token(db, "crash test")
        .await
        .expect("enrolment token");
    let request = EnrollRequest {
        enrollment_token: token,
        name: "box-1".into(),
        tbox_group: "lkp-test".into(),
        backend: BootBackend::Qemu,
        hardware: kbot_testkit::hardware(),
        host: None,
    };
    let client = ApiClient::new(url, None).expect("client");
    let enrolled = client.enroll(&request).await.expect("enrol");
    let token = enrolled.agent_token;
    (client.with_token(token.clone()), token)
}

/// Drains the spool through a fresh connection while `trap` stops the
/// upload, SIGKILLs the server then, and returns what the drain saw.
async fn drain_into_crash(
    relay: &mut Relay,
    server: ServerProcess,
    spool: &Spool,
    url: &str,
    token: &str,
    trap: Trap,
) -> kbot_agent::error::Result<usize> {
    relay.arm(trap);
    // A new client: the upload starts on a new connection, head first.
    let client = ApiClient::new(url, Some(token.to_string())).expect("client");
    let drain = spool.drain(&client);
    tokio::pin!(drain);
    let expected = match trap {
        Trap::MidBody(_) => Caught::MidBody,
        Trap::BeforeAnswer => Caught::Answered,
    };
    tokio::select! {
        caught = relay.caught() => assert_eq!(caught, expected),
        done = &mut drain => panic!("the upload finished past the trap: {done:?}"),
    }
    server.kill();
    drain.await
}

/// One upload into a crash: the agent keeps it, the store has it only if
/// the server answered; after a restart on the same store the spool resends
/// it. Returns the restarted server.
#[allow(clippy::too_many_arguments)]
async fn crash_and_resend(
    relay: &mut Relay,
    server: ServerProcess,
    store: &TestStore,
    spool: &Spool,
    agent: &ApiClient,
    token: &str,
    trap: Trap,
    db: &Db,
    job_id: i64,
) -> ServerProcess {
    let url = format!("http://127.0.0.1:{}", relay.port);
    let sent = drain_into_crash(relay, server, spool, &url, token, trap).await;
    let err = sent.expect_err("the server died under the upload");
    assert!(err.is_retryable(), "{err}");
    assert_eq!(spool.pending().expect("spool").len(), 1, "kept to resend");
    let stored = "SELECT COUNT(*) FROM results WHERE job_id = $1";
    let want = i64::from(trap == Trap::BeforeAnswer);
    assert_eq!(count(db, stored, job_id).await, want, "{trap:?}");

    let server = ServerProcess::start(store).await;
    relay.retarget(server.port);
    assert_eq!(spool.drain(agent).await.expect("resent"), 1, "{trap:?}");
    assert!(spool.pending().expect("spool").is_empty());
    server
}

async fn count(db: &Db, sql: &str, id: i64) -> i64 {
    sqlx::query(sql)
        .bind(id)
        .fetch_one(db.read())
        .await
        .expect("count")
        .get::<i64, _>(0)
}

async fn crash_case(backend: Backend) {
    let store = TestStore::new(backend).await;
    let db = store.connect().await;
    let seeded = seed::submission(&db, "linux", "dev", THREE_RUN_JOB, 3, 0)
        .await
        .expect("seed");
    // The head is the base's child: a regression is reported at once, with
    // nothing to bisect.
    sqlx::query("UPDATE commits SET parents = $1 WHERE id = $2")
        .bind(format!("{:040x}", 0xb0))
        .bind(seeded.head_commit_id)
        .execute(db.write())
        .await
        .expect("parent");
    let mut server = ServerProcess::start(&store).await;
    let mut relay = Relay::start(server.port).await;
    let url = format!("http://127.0.0.1:{}", relay.port);
    let (agent, token) = enroll(&db, &url).await;
    let spool_dir = tempfile::tempdir().expect("spool dir");
    let spool = Spool::open(spool_dir.path()).expect("spool");

    // Runs until the comparison wants no more (an unclear verdict queues
    // more runs); the fifth and sixth uploads meet a dying server.
    let mut uploads = BTreeMap::new();
    let mut idle = 0;
    let mut run = 0u32;
    while idle < 3 {
        let Some(job) = agent.lease(1, true).await.expect("lease").job else {
            idle += 1;
            continue;
        };
        idle = 0;
        let up = upload(&job, run);
        spool
            .put(&Pending::Result {
                job_id: job.job_id,
                upload: up.clone(),
            })
            .expect("spooled");
        uploads.insert(job.job_id, up);
        let trap = match run {
            4 => Some(Trap::MidBody(256 * 1024)),
            5 => Some(Trap::BeforeAnswer),
            _ => None,
        };
        run += 1;
        let Some(trap) = trap else {
            assert_eq!(spool.drain(&agent).await.expect("upload"), 1);
            continue;
        };
        server = crash_and_resend(
            &mut relay, server, &store, &spool, &agent, &token, trap, &db, job.job_id,
        )
        .await;
        // Sending the run once more changes nothing: the first result stays.
        let again = agent
            .upload(job.job_id, &uploads[&job.job_id])
            .await
            .expect("again");
        assert!(!again.stored, "{backend:?}: {trap:?}");
    }
    let report = wait_for_report(&db, seeded.submission_id).await;
    check_store(&db, &store, &uploads, seeded.submission_id).await;
    let before = comparison_rows(&db, seeded.submission_id).await;

    // One more crash and restart: its rescan settles nothing again.
    server.kill();
    let server = ServerProcess::start(&store).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(comparison_rows(&db, seeded.submission_id).await, before);
    assert_eq!(wait_for_report(&db, seeded.submission_id).await, report);
    check_store(&db, &store, &uploads, seeded.submission_id).await;
    drop(server);
    db.close().await;
}

/// The submission's one report (queued `mail_off`: mail is off), once the
/// comparison worker wrote it; its id.
async fn wait_for_report(db: &Db, submission_id: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let rows = sqlx::query("SELECT id, kind FROM report_outbox WHERE submission_id = $1")
            .bind(submission_id)
            .fetch_all(db.read())
            .await
            .expect("reports");
        assert!(
            rows.len() <= 1,
            "one report per regression, not {}",
            rows.len()
        );
        if let Some(row) = rows.first() {
            assert_eq!(row.get::<String, _>(1), "regression");
            return row.get(0);
        }
        assert!(
            Instant::now() < deadline,
            "no report of the regression: {:?}",
            comparison_rows(db, submission_id).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `(metric, verdict, base_n, head_n, updated_at)` of every comparison row.
async fn comparison_rows(db: &Db, submission_id: i64) -> Vec<(String, String, i64, i64, i64)> {
    sqlx::query(
        "SELECT metric, verdict, base_n, head_n, updated_at FROM comparisons \
         WHERE submission_id = $1 ORDER BY metric",
    )
    .bind(submission_id)
    .fetch_all(db.read())
    .await
    .expect("comparisons")
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
    .collect()
}

/// One result per run with the uploaded metrics and whole artifact files,
/// every job finished, no temporary files left, the KPI compared once.
async fn check_store(
    db: &Db,
    store: &TestStore,
    uploads: &BTreeMap<i64, ResultUpload>,
    submission_id: i64,
) {
    let rows = sqlx::query(
        "SELECT r.job_id, r.metrics, r.raw_output_path, r.console_path, j.state \
         FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.submission_id = $1 \
         ORDER BY r.job_id",
    )
    .bind(submission_id)
    .fetch_all(db.read())
    .await
    .expect("results");
    let jobs: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(jobs, uploads.keys().copied().collect::<Vec<_>>());
    let dir = artifact_dir(store);
    for r in &rows {
        let up = &uploads[&r.get::<i64, _>(0)];
        let metrics: BTreeMap<String, f64> =
            serde_json::from_str(&r.get::<String, _>(1)).expect("metrics JSON");
        assert_eq!(metrics, up.metrics);
        let raw = std::fs::read_to_string(dir.join(r.get::<String, _>(2))).expect("raw output");
        assert!(
            raw == up.raw_output,
            "raw output of job {}",
            r.get::<i64, _>(0)
        );
        let console: Option<String> = r.get(3);
        let console = std::fs::read_to_string(dir.join(console.expect("console path")));
        assert_eq!(console.ok(), up.console);
        assert_eq!(r.get::<String, _>(4), "finished");
    }
    assert_eq!(temp_files(&dir), Vec::<PathBuf>::new());
    let kpi: Vec<_> = comparison_rows(db, submission_id)
        .await
        .into_iter()
        .filter(|c| c.0 == KPI)
        .collect();
    assert_eq!(kpi.len(), 1, "{kpi:?}");
    assert_eq!(kpi[0].1, "different", "{kpi:?}");
    assert_eq!(
        kpi[0].2 + kpi[0].3,
        uploads.len() as i64,
        "every run counted once"
    );
}

/// Files a writer left under a temporary name.
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(list) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in list.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(temp_files(&path));
        } else if entry.file_name().to_string_lossy().contains(".tmp") {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn a_server_killed_mid_upload_stores_each_result_once_after_restart() {
    for backend in backends() {
        crash_case(backend).await;
    }
}
