//! The agent side of the REST protocol in `kbot_core::api`.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;

use kbot_core::api::{
    EnrollRequest, EnrollResponse, ErrorBody, EventRequest, HeartbeatResponse, LeaseRequest,
    LeaseResponse, ResultUpload, UploadResponse, API_PREFIX,
};

use crate::error::{AgentError, Result};

#[derive(Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl ApiClient {
    /// `server` is the server's base URL (`http://127.0.0.1:8080`).
    pub fn new(server: &str, token: Option<String>) -> Result<ApiClient> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|source| AgentError::Http {
                url: server.to_string(),
                source,
            })?;
        Ok(ApiClient {
            http,
            base: format!("{}{API_PREFIX}", server.trim_end_matches('/')),
            token,
        })
    }

    pub fn with_token(&self, token: String) -> ApiClient {
        ApiClient {
            token: Some(token),
            ..self.clone()
        }
    }

    async fn call<B: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Option<R>> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.request(method, &url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|source| AgentError::Http {
            url: url.clone(),
            source,
        })?;
        let status = resp.status();
        if status == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        let bytes = resp.bytes().await.map_err(|source| AgentError::Http {
            url: url.clone(),
            source,
        })?;
        if !status.is_success() {
            let (code, message) = match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(b) => (b.error.code, b.error.message),
                Err(_) => (
                    "unknown".to_string(),
                    String::from_utf8_lossy(&bytes).chars().take(500).collect(),
                ),
            };
            return Err(AgentError::Server {
                url,
                status: status.as_u16(),
                code,
                message,
            });
        }
        if bytes.is_empty() {
            return Ok(None);
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| AgentError::parse(format!("response of {url}"), e.to_string()))
    }

    async fn expect<B: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<R> {
        self.call(method, path, body)
            .await?
            .ok_or_else(|| AgentError::parse(format!("response of {path}"), "empty body"))
    }

    pub async fn enroll(&self, req: &EnrollRequest) -> Result<EnrollResponse> {
        self.expect(Method::POST, "/agents/enroll", Some(req)).await
    }

    pub async fn lease(&self, wait_secs: u32) -> Result<LeaseResponse> {
        self.expect(
            Method::POST,
            "/agents/lease",
            Some(&LeaseRequest { wait_secs }),
        )
        .await
    }

    pub async fn heartbeat(&self, job_id: i64) -> Result<HeartbeatResponse> {
        self.expect::<(), _>(Method::POST, &format!("/jobs/{job_id}/heartbeat"), None)
            .await
    }

    pub async fn event(&self, job_id: i64, event: &EventRequest) -> Result<()> {
        self.call::<_, serde_json::Value>(
            Method::POST,
            &format!("/jobs/{job_id}/events"),
            Some(event),
        )
        .await
        .map(|_| ())
    }

    pub async fn upload(&self, job_id: i64, result: &ResultUpload) -> Result<UploadResponse> {
        self.expect(Method::PUT, &format!("/jobs/{job_id}/result"), Some(result))
            .await
    }
}
