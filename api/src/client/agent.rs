//! [`AgentClient`]: every call of the agent protocol ([`crate::agent`]).

use std::time::Duration;

use reqwest::Method;

use super::{Http, Result};
use crate::agent::{
    EnrollRequest, EnrollResponse, EventRequest, HeartbeatResponse, InitramfsStored, LeaseRequest,
    LeaseResponse, ResultUpload, UploadResponse,
};
use crate::builds::{
    BuildClaim, BuildFailed, BuildFile, BuildReady, BuildView, ClaimAnswer, Claimant,
    OrderHeartbeat, OrderLease, OrderLeaseResponse,
};

/// A test machine's connection to one kbot server.
#[derive(Debug, Clone)]
pub struct AgentClient {
    http: Http,
}

impl AgentClient {
    /// `server` is the server's base URL (`http://127.0.0.1:8080`); `token`
    /// the agent token, `None` before enrolment. Connecting may take 10 s
    /// and a whole call 120 s (a lease long-polls).
    pub fn new(server: &str, token: Option<String>) -> Result<AgentClient> {
        let client = Http::build(
            server,
            Some(Duration::from_secs(10)),
            Duration::from_secs(120),
        )?;
        Ok(AgentClient::with_http(client, server, token))
    }

    /// A client over a shared connection pool (many simulated agents).
    pub fn with_http(client: reqwest::Client, server: &str, token: Option<String>) -> AgentClient {
        AgentClient {
            http: Http::new(client, server, token),
        }
    }

    /// The same server and pool, as the agent `token` enrolled as.
    pub fn with_token(&self, token: String) -> AgentClient {
        AgentClient {
            http: Http {
                token: Some(token),
                ..self.http.clone()
            },
        }
    }

    /// `POST /agents/enroll`: the enrolment token travels in the body.
    pub async fn enroll(&self, request: &EnrollRequest) -> Result<EnrollResponse> {
        self.http
            .expect(Method::POST, "/agents/enroll", Some(request))
            .await
    }

    /// `POST /agents/lease`, which the server may hold up to `wait_secs`.
    pub async fn lease(&self, wait_secs: u32) -> Result<LeaseResponse> {
        self.lease_as(wait_secs, true).await
    }

    /// `POST /agents/lease` for an agent that may not build kernels
    /// (`can_build` false): only jobs whose kernel is built for it.
    pub async fn lease_as(&self, wait_secs: u32, can_build: bool) -> Result<LeaseResponse> {
        let req = LeaseRequest {
            wait_secs,
            can_build,
        };
        self.http
            .expect(Method::POST, "/agents/lease", Some(&req))
            .await
    }

    /// `POST /jobs/{id}/heartbeat`: extends the lease, says if cancelled.
    pub async fn heartbeat(&self, job_id: i64) -> Result<HeartbeatResponse> {
        self.http
            .expect::<(), _>(Method::POST, &format!("/jobs/{job_id}/heartbeat"), None)
            .await
    }

    /// `POST /jobs/{id}/events`: a state change of the job.
    pub async fn event(&self, job_id: i64, event: &EventRequest) -> Result<()> {
        self.http
            .call::<_, serde_json::Value>(
                Method::POST,
                &format!("/jobs/{job_id}/events"),
                Some(event),
            )
            .await
            .map(|_| ())
    }

    /// `PUT /jobs/{id}/result`: idempotent, so a lost answer may be resent.
    pub async fn upload(&self, job_id: i64, result: &ResultUpload) -> Result<UploadResponse> {
        self.http
            .expect(Method::PUT, &format!("/jobs/{job_id}/result"), Some(result))
            .await
    }
}

/// What a run booted, kept for reproduction.
impl AgentClient {
    /// `PUT /jobs/{id}/initramfs`: the initramfs the leased job's guest booted.
    pub async fn upload_initramfs(&self, job_id: i64, content: Vec<u8>) -> Result<InitramfsStored> {
        self.http
            .put_bytes(&format!("/jobs/{job_id}/initramfs"), content)
            .await
    }
}

/// Shared kernel builds ([`crate::builds`]).
impl AgentClient {
    /// `POST /builds/claim`: build, wait, download, or fail.
    pub async fn claim_build(&self, claim: &BuildClaim) -> Result<ClaimAnswer> {
        self.http
            .expect(Method::POST, "/builds/claim", Some(claim))
            .await
    }

    /// `PUT /builds/{key}/files/{name}`: one file of a build the job claimed.
    pub async fn upload_build_file(
        &self,
        key: &str,
        name: &str,
        by: Claimant,
        content: Vec<u8>,
    ) -> Result<BuildFile> {
        self.http
            .put_bytes(
                &format!("/builds/{key}/files/{name}?{}", by.query()),
                content,
            )
            .await
    }

    /// `POST /builds/{key}/ready`.
    pub async fn build_ready(&self, key: &str, ready: &BuildReady) -> Result<BuildView> {
        self.http
            .expect(Method::POST, &format!("/builds/{key}/ready"), Some(ready))
            .await
    }

    /// `POST /builds/{key}/failed`.
    pub async fn build_failed(&self, key: &str, failed: &BuildFailed) -> Result<BuildView> {
        self.http
            .expect(Method::POST, &format!("/builds/{key}/failed"), Some(failed))
            .await
    }

    /// `GET /builds/{key}/files/{name}`: the bytes and the SHA-256 the
    /// server has for them (the caller checks).
    pub async fn build_file(
        &self,
        key: &str,
        name: &str,
    ) -> Result<(bytes::Bytes, Option<String>)> {
        self.http
            .get_bytes(
                &format!("/builds/{key}/files/{name}"),
                crate::builds::SHA256_HEADER,
            )
            .await
    }

    /// `POST /builds/orders/lease`: a kernel to build, waiting up to
    /// `wait_secs` for one.
    pub async fn lease_order(&self, req: &OrderLease) -> Result<OrderLeaseResponse> {
        self.http
            .expect(Method::POST, "/builds/orders/lease", Some(req))
            .await
    }

    /// `POST /builds/orders/{id}/heartbeat`: extends the order's lease.
    pub async fn order_heartbeat(&self, order_id: i64) -> Result<OrderHeartbeat> {
        self.http
            .expect::<(), _>(
                Method::POST,
                &format!("/builds/orders/{order_id}/heartbeat"),
                None,
            )
            .await
    }
}
