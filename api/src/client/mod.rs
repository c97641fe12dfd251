//! The typed HTTP clients of kbot's two protocols (feature `client`):
//! [`AgentClient`] for test machines and [`UserClient`] for people and
//! scripts. Both send JSON, authenticate with a bearer token and turn an
//! error answer into [`Error::Api`] with the status and the server's
//! [`ErrorBody`].
//!
//! Retrying is the caller's policy: the agent backs off and keeps going,
//! the load tool counts and fails over, the command line gives up.

mod agent;
mod user;

pub use agent::AgentClient;
pub use user::UserClient;

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{ErrorBody, API_PREFIX};

/// How a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No answer: the connection was refused, reset or timed out (or the
    /// HTTP client could not be built).
    #[error("HTTP request to {url} failed: {source}")]
    Http {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with an error status and its error body.
    #[error("server refused {url}: HTTP {status} {code}: {message}")]
    Api {
        url: String,
        status: u16,
        /// The body's stable `code`; `unknown` when the body was not an
        /// [`ErrorBody`] (a proxy's page, say).
        code: String,
        message: String,
    },
    /// A success answer whose body is not what the call returns.
    #[error("cannot parse the response of {url}: {reason}")]
    Body { url: String, reason: String },
}

impl Error {
    /// The HTTP status of an error answer; `None` when no answer came or
    /// its body was unreadable.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            Error::Http { .. } | Error::Body { .. } => None,
        }
    }

    /// The error body's `code` of an error answer.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } => Some(code),
            Error::Http { .. } | Error::Body { .. } => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What both clients share: the HTTP connection pool, the API's base URL
/// and the bearer token.
#[derive(Debug, Clone)]
struct Http {
    client: reqwest::Client,
    /// The server's base URL followed by [`API_PREFIX`].
    base: String,
    token: Option<String>,
}

impl Http {
    fn new(client: reqwest::Client, server: &str, token: Option<String>) -> Http {
        Http {
            client,
            base: format!("{}{API_PREFIX}", server.trim_end_matches('/')),
            token,
        }
    }

    /// A client with these timeouts (`connect` of `None`: reqwest's own).
    fn build(server: &str, connect: Option<Duration>, total: Duration) -> Result<reqwest::Client> {
        let mut builder = reqwest::Client::builder().timeout(total);
        if let Some(connect) = connect {
            builder = builder.connect_timeout(connect);
        }
        builder.build().map_err(|source| Error::Http {
            url: server.to_owned(),
            source,
        })
    }

    /// Sends one request; `None` for a `204` or an empty success body.
    async fn call<B: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Option<R>> {
        let (url, mut request) = self.request(method, path);
        if let Some(body) = body {
            request = request.json(body);
        }
        let (status, _, bytes) = Self::answer(&url, request).await?;
        if status == StatusCode::NO_CONTENT || bytes.is_empty() {
            return Ok(None);
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::Body {
                url,
                reason: e.to_string(),
            })
    }

    /// Sends `request` and reads its whole answer; an error status is
    /// [`Error::Api`] with the server's error body.
    async fn answer(
        url: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<(StatusCode, reqwest::header::HeaderMap, bytes::Bytes)> {
        let http = |source| Error::Http {
            url: url.to_owned(),
            source,
        };
        let response = request.send().await.map_err(http)?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.map_err(http)?;
        if status.is_success() {
            return Ok((status, headers, bytes));
        }
        let (code, message) = match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(body) => (body.error.code, body.error.message),
            Err(_) => (
                "unknown".to_owned(),
                String::from_utf8_lossy(&bytes).chars().take(500).collect(),
            ),
        };
        Err(Error::Api {
            url: url.to_owned(),
            status: status.as_u16(),
            code,
            message,
        })
    }

    /// A request with the bearer token.
    fn request(&self, method: Method, path: &str) -> (String, reqwest::RequestBuilder) {
        let url = format!("{}{path}", self.base);
        let mut request = self.client.request(method, &url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        (url, request)
    }

    /// Sends raw bytes; the answer is JSON.
    async fn put_bytes<R: DeserializeOwned>(&self, path: &str, body: Vec<u8>) -> Result<R> {
        let (url, request) = self.request(Method::PUT, path);
        let request = request
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(body);
        let (_, _, bytes) = Self::answer(&url, request).await?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Body {
            url,
            reason: e.to_string(),
        })
    }

    /// Fetches raw bytes with the value of the answer's header `header`.
    async fn get_bytes(&self, path: &str, header: &str) -> Result<(bytes::Bytes, Option<String>)> {
        let (url, request) = self.request(Method::GET, path);
        let (_, headers, bytes) = Self::answer(&url, request).await?;
        let value = headers
            .get(header)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        Ok((bytes, value))
    }

    /// [`Self::call`] for answers that must have a body.
    async fn expect<B: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<R> {
        self.call(method, path, body)
            .await?
            .ok_or_else(|| Error::Body {
                url: format!("{}{path}", self.base),
                reason: "empty body".to_owned(),
            })
    }
}
