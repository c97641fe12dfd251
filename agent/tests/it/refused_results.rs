//! A run whose result the server must refuse ends as a failed job with the
//! reason, at once, instead of sitting leased until its lease expires and
//! then running again: against the real kbot-server on SQLite and
//! PostgreSQL, through the agent's real spool.
//!
//! Two ways in: more metrics than a result may carry (the agent knows the
//! rule and never uploads), and a body bigger than this server takes (only
//! the server knows: it answers 413, the agent keeps the result in
//! `rejected/` and reports the run as failed).

use std::collections::BTreeMap;

use kbot_agent::client::ApiClient;
use kbot_agent::outcome::Outcome;
use kbot_agent::spool::{Pending, Spool};
use kbot_api::agent::ResultUpload;
use kbot_core::metrics::MAX_METRICS_PER_RESULT;
use kbot_testkit::agent::TestAgent;
use kbot_testkit::{backends, Backend, TestServer, ONE_JOB};
use sqlx::Row;

fn result(metrics: usize, raw_output: String) -> ResultUpload {
    ResultUpload {
        metrics: (0..metrics)
            .map(|i| (format!("perf-profile.self.sym{i}"), 1.0))
            .collect::<BTreeMap<_, _>>(),
        raw_output,
        console: None,
        kconfig: None,
        kernel_release: "6.1.0".into(),
        tuning: BTreeMap::new(),
        started_at: 1,
        finished_at: 2,
        profile: None,
    }
}

/// The job's state and its last event's failure kind and detail (the
/// server re-queues a failed run while it has attempts left, and the event
/// keeps the reason either way).
async fn job_state(t: &TestServer, job_id: i64) -> (String, Option<String>, String) {
    let state: String = sqlx::query_scalar("SELECT state FROM jobs WHERE id = $1")
        .bind(job_id)
        .fetch_one(t.db().read())
        .await
        .expect("job row");
    let row = sqlx::query(
        "SELECT failure, detail FROM job_events WHERE job_id = $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(job_id)
    .fetch_one(t.db().read())
    .await
    .expect("job event");
    (state, row.get("failure"), row.get("detail"))
}

async fn case(backend: Backend) {
    let t = TestServer::start_with(backend, |c| c.max_upload_bytes = 256 * 1024).await;
    t.seed("alice", ONE_JOB, 2, 0).await;
    let agent = TestAgent::enroll(&t, "box-a", "grp").await;
    let client = ApiClient::new(&t.url(""), Some(agent.token.clone())).expect("client");
    let spool_dir = tempfile::tempdir().expect("temp dir");
    let spool = Spool::open(spool_dir.path()).expect("spool");

    // Too many metrics: the agent's own check turns it into a failure.
    let first = agent.lease().await.expect("a job").job_id;
    let too_many = result(MAX_METRICS_PER_RESULT + 1, "out\n".into());
    let pending = Pending::of(first, Outcome::Success(too_many)).expect("something to send");
    assert!(matches!(pending, Pending::Failure { .. }), "{backend:?}");
    spool.put(&pending).expect("spooled");
    assert_eq!(spool.drain(&client).await.expect("drained"), 1);
    let (state, failure, detail) = job_state(&t, first).await;
    assert!(
        matches!(state.as_str(), "queued" | "failed"),
        "{backend:?}: {state}"
    );
    assert_eq!(failure.as_deref(), Some("incomplete"));
    assert!(detail.contains("20001 metrics"), "{backend:?}: {detail}");

    // Bigger than the server takes: 413, kept in rejected/, job failed.
    let second = agent.lease().await.expect("a job").job_id;
    let huge = result(3, "x".repeat(512 * 1024));
    let pending = Pending::of(second, Outcome::Success(huge)).expect("something to send");
    assert!(matches!(pending, Pending::Result { .. }), "{backend:?}");
    spool.put(&pending).expect("spooled");
    assert_eq!(spool.drain(&client).await.expect("drained"), 0);
    assert!(spool.pending().expect("pending").is_empty(), "{backend:?}");
    let rejected = std::fs::read_dir(spool_dir.path().join("rejected"))
        .expect("rejected/")
        .count();
    assert_eq!(rejected, 1, "{backend:?}: the refused result is kept");
    let (state, failure, detail) = job_state(&t, second).await;
    assert!(
        matches!(state.as_str(), "queued" | "failed"),
        "{backend:?}: {state}"
    );
    assert_eq!(failure.as_deref(), Some("incomplete"));
    assert!(detail.contains("413"), "{backend:?}: {detail}");
    let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM results")
        .fetch_one(t.db().read())
        .await
        .expect("count");
    assert_eq!(stored, 0, "{backend:?}");
    t.stop().await;
}

#[tokio::test]
async fn refused_results_end_their_jobs_with_the_reason() {
    for backend in backends() {
        case(backend).await;
    }
}
