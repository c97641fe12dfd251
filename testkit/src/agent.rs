//! A minimal agent client for tests: the protocol calls with status checks.

use std::collections::BTreeMap;

use kbot_core::api::{
    HeartbeatResponse, LeaseRequest, LeaseResponse, LeasedJob, ResultUpload, UploadResponse,
};

use super::TestServer;

pub struct TestAgent<'a> {
    pub t: &'a TestServer,
    pub token: String,
    pub id: i64,
}

impl<'a> TestAgent<'a> {
    pub async fn enroll(t: &'a TestServer, name: &str, tbox_group: &str) -> TestAgent<'a> {
        let enrolled = t.enroll(name, tbox_group).await;
        TestAgent {
            t,
            token: enrolled.agent_token,
            id: enrolled.agent_id,
        }
    }

    /// Enrols a qemu agent whose guest is `hardware`, on this test's host.
    pub async fn enroll_guest(
        t: &'a TestServer,
        name: &str,
        tbox_group: &str,
        hardware: kbot_core::api::Hardware,
    ) -> TestAgent<'a> {
        let enrolled = t
            .enroll_machine(
                name,
                tbox_group,
                kbot_core::api::BootBackend::Qemu,
                hardware,
                Some(super::hardware()),
            )
            .await;
        TestAgent {
            t,
            token: enrolled.agent_token,
            id: enrolled.agent_id,
        }
    }

    pub async fn lease(&self) -> Option<LeasedJob> {
        self.lease_waiting(0).await
    }

    /// Leases, letting the server hold the request up to `wait_secs`.
    pub async fn lease_waiting(&self, wait_secs: u32) -> Option<LeasedJob> {
        let response = self
            .t
            .http
            .post(self.t.url("/api/v1/agents/lease"))
            .bearer_auth(&self.token)
            .json(&LeaseRequest { wait_secs })
            .send()
            .await
            .expect("lease");
        assert_eq!(response.status(), 200, "lease");
        let body: LeaseResponse = response.json().await.expect("lease body");
        body.job
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
        let response = self.heartbeat(job_id).await;
        assert_eq!(response.status(), 200, "heartbeat");
        response.json().await.expect("heartbeat body")
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
        let upload = ResultUpload {
            metrics: BTreeMap::from([("bw_pipe.bandwidth.MB/sec".to_string(), value)]),
            raw_output: "ok\n".into(),
            console: None,
            kconfig: None,
            kernel_release: "6.1.0".into(),
            tuning,
            started_at: 1,
            finished_at: 2,
        };
        self.put_result(job_id, &upload).await
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
        };
        let response = self.put_result(job.job_id, &upload).await;
        assert_eq!(response.status(), 200, "upload");
        let stored: UploadResponse = response.json().await.expect("upload body");
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
        let response = self.upload(job.job_id, 100.0).await;
        assert_eq!(response.status(), 200, "upload");
        Some(job)
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
