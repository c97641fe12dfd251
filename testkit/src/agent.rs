//! A test agent: the protocol calls through [`AgentClient`], and raw
//! requests for the tests that check the wire itself (statuses, bodies).

use std::collections::BTreeMap;

use kbot_api::agent::{HeartbeatResponse, LeasedJob, ResultUpload};
use kbot_api::client::AgentClient;

use super::TestServer;

pub struct TestAgent<'a> {
    pub t: &'a TestServer,
    pub token: String,
    pub id: i64,
}

impl<'a> TestAgent<'a> {
    fn new(t: &'a TestServer, token: String, id: i64) -> TestAgent<'a> {
        TestAgent { t, token, id }
    }

    /// This agent's protocol client, on the test server's connection pool.
    pub fn client(&self) -> AgentClient {
        AgentClient::with_http(
            self.t.http.clone(),
            &self.t.url(""),
            Some(self.token.clone()),
        )
    }
}

impl<'a> TestAgent<'a> {
    pub async fn enroll(t: &'a TestServer, name: &str, tbox_group: &str) -> TestAgent<'a> {
        let enrolled = t.enroll(name, tbox_group).await;
        TestAgent::new(t, enrolled.agent_token, enrolled.agent_id)
    }

    /// Enrols a qemu agent whose guest is `hardware`, on this test's host.
    pub async fn enroll_guest(
        t: &'a TestServer,
        name: &str,
        tbox_group: &str,
        hardware: kbot_core::machine::Hardware,
    ) -> TestAgent<'a> {
        let enrolled = t
            .enroll_machine(
                name,
                tbox_group,
                kbot_api::agent::BootBackend::Qemu,
                hardware,
                Some(super::hardware()),
            )
            .await;
        TestAgent::new(t, enrolled.agent_token, enrolled.agent_id)
    }

    pub async fn lease(&self) -> Option<LeasedJob> {
        self.lease_waiting(0).await
    }

    /// Leases, letting the server hold the request up to `wait_secs`.
    pub async fn lease_waiting(&self, wait_secs: u32) -> Option<LeasedJob> {
        self.client().lease(wait_secs).await.expect("lease").job
    }

    /// Leases as an agent that builds kernels or (`can_build` false) one
    /// that only tests, waiting up to `wait_secs`.
    pub async fn lease_as(&self, wait_secs: u32, can_build: bool) -> Option<LeasedJob> {
        let resp = self.client().lease_as(wait_secs, can_build).await;
        resp.expect("lease").job
    }

    pub async fn heartbeat(&self, job_id: i64) -> reqwest::Response {
        self.t
            .http
            .post(self.t.url(&format!("/api/v1/jobs/{job_id}/heartbeat")))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("heartbeat")
    }

    pub async fn heartbeat_ok(&self, job_id: i64) -> HeartbeatResponse {
        self.client().heartbeat(job_id).await.expect("heartbeat")
    }

    pub async fn event(&self, job_id: i64, body: serde_json::Value) -> reqwest::Response {
        self.t
            .http
            .post(self.t.url(&format!("/api/v1/jobs/{job_id}/events")))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .expect("event")
    }

    pub async fn upload(&self, job_id: i64, value: f64) -> reqwest::Response {
        self.upload_with(job_id, value, BTreeMap::new()).await
    }

    /// [`Self::upload`] with the result's tuning map.
    pub async fn upload_with(
        &self,
        job_id: i64,
        value: f64,
        tuning: BTreeMap<String, String>,
    ) -> reqwest::Response {
        self.put_result(job_id, &result(value, tuning)).await
    }

    pub async fn put_result(&self, job_id: i64, upload: &ResultUpload) -> reqwest::Response {
        self.t
            .http
            .put(self.t.url(&format!("/api/v1/jobs/{job_id}/result")))
            .bearer_auth(&self.token)
            .json(upload)
            .send()
            .await
            .expect("upload")
    }

    /// Leases (waiting up to a second) and runs one job of a pair whose head
    /// `head_sha` is 20% slower: bandwidth about 800 against 1000 MB/s, and
    /// an elapsed time of about 10 s on both sides. `None` when nothing was
    /// leased.
    pub async fn run_slower_head(&self, head_sha: &str) -> Option<LeasedJob> {
        let job = self.lease_waiting(1).await?;
        let level = if job.commit == head_sha {
            800.0
        } else {
            1000.0
        };
        // A little spread that depends only on the job.
        let spread = (job.job_id % 5) as f64;
        let metrics = BTreeMap::from([
            ("bw_pipe.bandwidth.MB/sec".to_owned(), level + spread),
            (
                "bw_pipe.time.elapsed_time".to_owned(),
                10.0 + (job.job_id % 3) as f64 / 10.0,
            ),
        ]);
        let upload = ResultUpload {
            metrics,
            raw_output: "64k pipe bandwidth".into(),
            console: None,
            kconfig: None,
            kernel_release: "6.1.0-test".into(),
            tuning: BTreeMap::new(),
            started_at: 1,
            finished_at: 2,
            profile: None,
        };
        let stored = self
            .client()
            .upload(job.job_id, &upload)
            .await
            .expect("upload");
        assert!(
            stored.stored,
            "the first upload of job {} is stored",
            job.job_id
        );
        Some(job)
    }

    /// Leases one job and uploads its result; returns the job.
    pub async fn run_one(&self) -> Option<LeasedJob> {
        let job = self.lease().await?;
        self.client()
            .upload(job.job_id, &result(100.0, BTreeMap::new()))
            .await
            .expect("upload");
        Some(job)
    }
}

/// One `bw_pipe.bandwidth.MB/sec` of `value`, with `tuning`.
fn result(value: f64, tuning: BTreeMap<String, String>) -> ResultUpload {
    ResultUpload {
        metrics: BTreeMap::from([("bw_pipe.bandwidth.MB/sec".to_string(), value)]),
        raw_output: "ok\n".into(),
        console: None,
        kconfig: None,
        kernel_release: "6.1.0".into(),
        tuning,
        started_at: 1,
        finished_at: 2,
        profile: None,
    }
}

/// `(status, error code)` of an error response.
pub async fn error_code(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.expect("JSON error body");
    (
        status,
        body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}
