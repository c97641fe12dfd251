//! The agent's protocol client: [`kbot_api::client::AgentClient`], with its
//! errors as [`AgentError::Api`] so that the daemon's retry policy
//! ([`AgentError::is_retryable`]) decides what to try again.

use kbot_api::agent::{
    EnrollRequest, EnrollResponse, EventRequest, HeartbeatResponse, LeaseResponse, ResultUpload,
    UploadResponse,
};
use kbot_api::builds::{OrderHeartbeat, OrderLease, OrderLeaseResponse};
use kbot_api::client::AgentClient;

use crate::error::{AgentError, Result};

#[derive(Debug, Clone)]
pub struct ApiClient {
    inner: AgentClient,
}

/// What enrolment gave the agent, kept across restarts.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    pub server: String,
    pub agent_id: i64,
    pub agent_token: String,
    /// The backend the server knows this agent by (absent in identities
    /// written before it was recorded).
    #[serde(default)]
    pub backend: Option<kbot_api::agent::BootBackend>,
}

impl ApiClient {
    /// `server` is the server's base URL (`http://127.0.0.1:8080`).
    pub fn new(server: &str, token: Option<String>) -> Result<ApiClient> {
        Ok(ApiClient {
            inner: AgentClient::new(server, token)?,
        })
    }

    pub fn with_token(&self, token: String) -> ApiClient {
        ApiClient {
            inner: self.inner.with_token(token),
        }
    }

    pub async fn enroll(&self, req: &EnrollRequest) -> Result<EnrollResponse> {
        self.inner.enroll(req).await.map_err(AgentError::from)
    }

    /// A job; only one whose kernel is built when the agent cannot build.
    pub async fn lease(&self, wait_secs: u32, can_build: bool) -> Result<LeaseResponse> {
        self.inner
            .lease_as(wait_secs, can_build)
            .await
            .map_err(AgentError::from)
    }

    pub async fn lease_order(&self, req: &OrderLease) -> Result<OrderLeaseResponse> {
        self.inner.lease_order(req).await.map_err(AgentError::from)
    }

    pub async fn order_heartbeat(&self, order_id: i64) -> Result<OrderHeartbeat> {
        self.inner
            .order_heartbeat(order_id)
            .await
            .map_err(AgentError::from)
    }

    pub async fn heartbeat(&self, job_id: i64) -> Result<HeartbeatResponse> {
        self.inner.heartbeat(job_id).await.map_err(AgentError::from)
    }

    pub async fn event(&self, job_id: i64, event: &EventRequest) -> Result<()> {
        self.inner
            .event(job_id, event)
            .await
            .map_err(AgentError::from)
    }

    /// The protocol's client, for the calls that need no retry policy of
    /// their own (shared builds).
    pub fn inner(&self) -> &AgentClient {
        &self.inner
    }

    pub async fn upload(&self, job_id: i64, result: &ResultUpload) -> Result<UploadResponse> {
        self.inner
            .upload(job_id, result)
            .await
            .map_err(AgentError::from)
    }
}
