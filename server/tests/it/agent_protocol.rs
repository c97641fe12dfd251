//! The agent protocol end to end over HTTP, on every backend.

use std::collections::BTreeMap;

use kbot_api::agent::{
    EventRequest, HeartbeatResponse, JobState, LeaseRequest, LeaseResponse, ResultUpload,
    UploadResponse,
};
use kbot_load::seed;
use kbot_testkit::{backends, TestServer};
use serde_json::Value;

async fn lease(t: &TestServer, token: &str, wait_secs: u32) -> LeaseResponse {
    let response = t
        .http
        .post(t.url("/api/v1/agents/lease"))
        .bearer_auth(token)
        .json(&LeaseRequest {
            wait_secs,
            can_build: true,
        })
        .send()
        .await
        .expect("lease");
    assert_eq!(response.status(), 200);
    response.json().await.expect("lease body")
}

fn upload_body(metrics: &[(&str, f64)]) -> ResultUpload {
    ResultUpload {
        metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        raw_output: "Pipe bandwidth: 4242.42 MB/sec\n".into(),
        console: Some("[    0.000000] Linux version 6.1.0\n".into()),
        kconfig: Some("CONFIG_PREEMPT_NONE=y\n".into()),
        kernel_release: "6.1.0-test".into(),
        tuning: BTreeMap::from([("cpufreq_governor".into(), "unavailable".into())]),
        started_at: 1_700_000_000_000,
        finished_at: 1_700_000_060_000,
        profile: None,
    }
}

async fn error_code(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("JSON error body");
    (
        status,
        body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

#[tokio::test]
async fn enrol_lease_heartbeat_event_upload() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let seeded = seed::submission(t.db(), "linux", "alice", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        let agent = t.enroll("box-1", "lkp-test").await;

        let job = lease(&t, &agent.agent_token, 0).await.job.expect("a job");
        assert_eq!(job.submission_id, seeded.submission_id);
        assert_eq!(job.attempt, 1);
        assert_eq!(job.run_index, 0);
        assert_eq!(job.job.tbox_group.as_deref(), Some("lkp-test"));
        assert_eq!(job.resolved.get("nr_cpu").map(String::as_str), Some("16"));
        assert!(
            job.result_path.starts_with("bw_pipe/"),
            "{}",
            job.result_path
        );
        assert!(
            job.result_path.contains("/lkp-test/"),
            "{}",
            job.result_path
        );
        assert_eq!(job.commit.len(), 40);

        let hb: HeartbeatResponse = t
            .http
            .post(t.url(&format!("/api/v1/jobs/{}/heartbeat", job.job_id)))
            .bearer_auth(&agent.agent_token)
            .send()
            .await
            .expect("heartbeat")
            .json()
            .await
            .expect("heartbeat body");
        assert!(!hb.cancelled);
        assert!(hb.lease_expires_at >= job.lease_expires_at);

        let event = EventRequest {
            state: JobState::Running,
            failure: None,
            detail: "bw_pipe started".into(),
        };
        let response = t
            .http
            .post(t.url(&format!("/api/v1/jobs/{}/events", job.job_id)))
            .bearer_auth(&agent.agent_token)
            .json(&event)
            .send()
            .await
            .expect("event");
        assert_eq!(response.status(), 204);

        let body = upload_body(&[("bw_pipe.bandwidth.MB/sec", 4242.42)]);
        let url = t.url(&format!("/api/v1/jobs/{}/result", job.job_id));
        let first: UploadResponse = t
            .http
            .put(&url)
            .bearer_auth(&agent.agent_token)
            .json(&body)
            .send()
            .await
            .expect("upload")
            .json()
            .await
            .expect("upload body");
        assert!(first.stored);
        let second: UploadResponse = t
            .http
            .put(&url)
            .bearer_auth(&agent.agent_token)
            .json(&body)
            .send()
            .await
            .expect("re-upload")
            .json()
            .await
            .expect("re-upload body");
        assert_eq!(second.result_id, first.result_id);
        assert!(!second.stored);

        let counts: (i64, String, String) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM results WHERE job_id = $1), \
                    (SELECT metrics FROM results WHERE id = $2), \
                    (SELECT state FROM jobs WHERE id = $3)",
        )
        .bind(job.job_id)
        .bind(first.result_id)
        .bind(job.job_id)
        .fetch_one(t.db().read())
        .await
        .expect("counts");
        let stored: serde_json::Value = serde_json::from_str(&counts.1).expect("metrics JSON");
        assert_eq!(
            stored,
            serde_json::to_value(&body.metrics).expect("json"),
            "{backend:?}"
        );
        assert_eq!(
            (counts.0, counts.2.as_str()),
            (1, "finished"),
            "{backend:?}"
        );
        let events: Vec<(String,)> =
            sqlx::query_as("SELECT state FROM job_events WHERE job_id = $1 ORDER BY id")
                .bind(job.job_id)
                .fetch_all(t.db().read())
                .await
                .expect("events");
        let events: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(events, ["leased", "running", "finished"]);
        let output = std::fs::read_to_string(
            t.store
                .dir
                .path()
                .join(format!("artifacts/results/{}/output.txt", job.job_id)),
        )
        .expect("raw output artifact");
        assert!(output.contains("4242.42"));
        t.stop().await;
    }
}

#[tokio::test]
async fn tokens_are_checked_by_kind_and_owner() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        seed::submission(t.db(), "linux", "alice", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        let a = t.enroll("box-a", "grp").await;
        let b = t.enroll("box-b", "grp").await;
        let (_, user_token) = kbot_server::auth::create_user_token(t.db(), "alice", None)
            .await
            .expect("user token");

        let response = t
            .http
            .post(t.url("/api/v1/agents/lease"))
            .bearer_auth(&user_token)
            .json(&LeaseRequest {
                wait_secs: 0,
                can_build: true,
            })
            .send()
            .await
            .expect("lease");
        assert_eq!(error_code(response).await, (403, "wrong_token_kind".into()));

        let response = t
            .http
            .post(t.url("/api/v1/agents/lease"))
            .bearer_auth("kbot_agt_not-a-token")
            .json(&LeaseRequest {
                wait_secs: 0,
                can_build: true,
            })
            .send()
            .await
            .expect("lease");
        assert_eq!(error_code(response).await, (401, "unauthorized".into()));

        let job = lease(&t, &a.agent_token, 0).await.job.expect("job");
        let response = t
            .http
            .post(t.url(&format!("/api/v1/jobs/{}/heartbeat", job.job_id)))
            .bearer_auth(&b.agent_token)
            .send()
            .await
            .expect("heartbeat");
        assert_eq!(error_code(response).await, (403, "forbidden".into()));
        let response = t
            .http
            .put(t.url(&format!("/api/v1/jobs/{}/result", job.job_id)))
            .bearer_auth(&b.agent_token)
            .json(&upload_body(&[("m", 1.0)]))
            .send()
            .await
            .expect("upload");
        assert_eq!(error_code(response).await, (403, "forbidden".into()));

        // An enrolment token works once.
        let token = t.enrollment_token().await;
        let request = |name: &str| kbot_api::agent::EnrollRequest {
            enrollment_token: token.clone(),
            name: name.into(),
            tbox_group: "grp".into(),
            backend: kbot_api::agent::BootBackend::Qemu,
            hardware: kbot_testkit::hardware(),
            host: None,
        };
        let ok = t
            .http
            .post(t.url("/api/v1/agents/enroll"))
            .json(&request("box-c"))
            .send()
            .await
            .expect("enroll");
        assert_eq!(ok.status(), 200);
        let again = t
            .http
            .post(t.url("/api/v1/agents/enroll"))
            .json(&request("box-d"))
            .send()
            .await
            .expect("enroll");
        assert_eq!(error_code(again).await, (401, "unauthorized".into()));

        // Re-enrolling a machine revokes its old token at once, although
        // the server remembers recently checked tokens (box-b's was used
        // above).
        let lease = |token: String| {
            t.http
                .post(t.url("/api/v1/agents/lease"))
                .bearer_auth(token)
                .json(&LeaseRequest {
                    wait_secs: 0,
                    can_build: true,
                })
                .send()
        };
        let renewed = t.enroll("box-b", "grp").await;
        assert_eq!(renewed.agent_id, b.agent_id);
        let response = lease(b.agent_token.clone()).await.expect("lease");
        assert_eq!(error_code(response).await, (401, "unauthorized".into()));
        let response = lease(renewed.agent_token).await.expect("lease");
        assert_eq!(response.status(), 200);
        t.stop().await;
    }
}

/// Enrolment tokens are secrets a stranger could guess at: past the limit of
/// failed enrolments from one address, enrolment answers 429 with
/// `Retry-After`, even for a good token, which stays unused for later.
#[tokio::test]
async fn failed_enrolments_are_rate_limited() {
    for backend in backends() {
        let t = TestServer::start_with(backend, |c| c.access.sign_in_attempts = 3).await;
        let good = t.enrollment_token().await;
        let enrol = |token: String| {
            let request = kbot_api::agent::EnrollRequest {
                enrollment_token: token,
                name: "box-guess".into(),
                tbox_group: "grp".into(),
                backend: kbot_api::agent::BootBackend::Host,
                hardware: kbot_testkit::hardware(),
                host: None,
            };
            t.http
                .post(t.url("/api/v1/agents/enroll"))
                .json(&request)
                .send()
        };
        for guess in 0..3 {
            let response = enrol(format!("kbot_enroll_guess{guess}"))
                .await
                .expect("enrol");
            assert_eq!(response.status(), 401, "{backend:?}: guess {guess}");
        }
        let refused = enrol(good.clone()).await.expect("enrol");
        assert_eq!(refused.status(), 429, "{backend:?}");
        let wait: u64 = refused
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .expect("a Retry-After in seconds");
        assert!((1..=900).contains(&wait), "{backend:?}: {wait}");
        let body: Value = refused.json().await.expect("JSON error");
        assert_eq!(body["error"]["code"], "too_many_attempts");
        // The good token was not spent by the refused attempt.
        let unused: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM tokens WHERE kind = 'enrollment' AND used_at IS NULL",
        )
        .fetch_one(t.db().read())
        .await
        .expect("count");
        assert_eq!(unused, 1, "{backend:?}");
        t.stop().await;
    }
}

/// An agent leases its next job before the last one's result is in (its
/// spool uploads behind it): it stays `busy` while it holds a job, and is
/// `idle` once it holds none, in the store that `/` and `/machines` read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_is_busy_while_it_holds_a_job() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        seed::submission(t.db(), "linux", "alice", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        let agent = kbot_testkit::agent::TestAgent::enroll(&t, "box-1", "lkp-test").await;
        let state = || async {
            let state: String = sqlx::query_scalar("SELECT state FROM agents WHERE name = 'box-1'")
                .fetch_one(t.db().read())
                .await
                .expect("agent state");
            state
        };
        let first = agent.lease().await.expect("a job");
        let second = agent.lease().await.expect("a second job");
        assert_eq!(state().await, "busy", "{backend:?}");
        assert_eq!(agent.upload(first.job_id, 100.0).await.status(), 200);
        assert_eq!(state().await, "busy", "{backend:?}: it still holds a job");
        assert_eq!(agent.upload(second.job_id, 100.0).await.status(), 200);
        assert_eq!(state().await, "idle", "{backend:?}");
        t.stop().await;
    }
}
