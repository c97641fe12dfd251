//! The user CLI: `kbot-server submit|submissions|follow|cancel|results|repo`,
//! a thin reqwest client of the REST API under `/api/v1`.

mod commands;

pub use commands::{run, Connection, UserCommand};

use reqwest::{Method, StatusCode};
use serde::{de::DeserializeOwned, Serialize};

use kbot_api::ErrorBody;

/// What the CLI can fail with; printed as one line by `main`.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the kbot server: {0}")]
    Http(#[from] reqwest::Error),
    /// The server answered with its JSON error body.
    #[error("server refused ({status}, {code}): {message}")]
    Api {
        status: StatusCode,
        code: String,
        message: String,
    },
    #[error("cannot read {path}: {source}")]
    ReadFile {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot print the answer as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// An authenticated connection to one kbot server.
#[derive(Debug, Clone)]
pub struct ApiClient {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl ApiClient {
    pub fn new(base: &str, token: Option<String>) -> Result<ApiClient, ClientError> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()?;
        Ok(ApiClient {
            base: base.trim_end_matches('/').to_owned(),
            token,
            http,
        })
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send(Method::GET, path, None::<&()>).await
    }

    pub async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        self.send(Method::POST, path, Some(body)).await
    }

    pub async fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send(Method::DELETE, path, None::<&()>).await
    }

    async fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let url = format!("{}{}{}", self.base, kbot_api::API_PREFIX, path);
        let mut req = self.http.request(method, url);
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req.send().await?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp.json().await?);
        }
        let text = resp.text().await.unwrap_or_default();
        Err(match serde_json::from_str::<ErrorBody>(&text) {
            Ok(body) => ClientError::Api {
                status,
                code: body.error.code,
                message: body.error.message,
            },
            Err(_) => ClientError::Api {
                status,
                code: "http_error".into(),
                message: text,
            },
        })
    }
}
