//! The one error type of kbot-server and how it becomes an HTTP response.
//!
//! API routes return [`Error`] directly: the response is a
//! [`kbot_api::ErrorBody`] with a stable `code`. Dashboard routes wrap it
//! in [`HtmlError`] to get the same status as an HTML page. Server-side faults
//! (database, I/O) are logged in full and reach the client only as `internal`.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use kbot_api::{ErrorBody, ErrorDetail};
use serde::de::DeserializeOwned;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Input that parsed but makes no sense; the message names the culprit.
    #[error("{0}")]
    BadRequest(String),
    #[error("invalid JSON body: {0}")]
    InvalidJson(String),
    #[error("metric {0:?} has a NaN or infinite value")]
    NonFiniteMetric(String),
    #[error("missing, malformed or unknown bearer token")]
    Unauthorized,
    /// A valid token of the wrong kind (user token on an agent endpoint, ...).
    #[error("this endpoint needs {needed} token")]
    WrongTokenKind { needed: &'static str },
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("{what} {key} not found")]
    NotFound { what: &'static str, key: String },
    #[error("{0}")]
    Conflict(String),
    /// The job's lease expired or the job was cancelled or re-queued meanwhile.
    #[error("job {0} is not leased to this agent any more")]
    LeaseLost(i64),
    #[error("request body is larger than the server accepts")]
    PayloadTooLarge,
    /// Too many failed attempts from this client (enrolment with wrong
    /// tokens); the value is the seconds until one more is allowed.
    #[error("too many failed attempts from this address; retry in {0} s")]
    TooManyAttempts(u64),
    /// A stored job this server cannot hand out (its spec does not parse,
    /// say one a newer replica wrote, or its parameters do not resolve on
    /// the claiming agent); the lease fails the job and goes on.
    #[error("cannot prepare job: {0}")]
    Unrunnable(String),
    /// A setting the server cannot start with (the database URL, ...).
    #[error("{0}")]
    Config(String),
    /// The request took longer than the server's request timeout.
    #[error("the request took longer than the server allows")]
    RequestTimeout,
    #[error("database error")]
    Db(#[from] sqlx::Error),
    #[error("database migration failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("I/O error")]
    Io(#[from] std::io::Error),
    /// The filesystem of the artifact directory is full (or over quota):
    /// nothing of the request was stored, and the same request can succeed
    /// once space is freed, so it is a retryable 507, not a 500.
    #[error("no space left in the artifact directory {dir}")]
    InsufficientStorage {
        dir: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Other(#[from] anyhow::Error),
    #[error("unknown repo {0:?}")]
    UnknownRepo(String),
    /// Registering a repo whose URL git cannot clone.
    #[error("cannot mirror {url}: {source}")]
    RepoUnreachable {
        url: String,
        source: crate::repos::git::GitError,
    },
    /// Resolving a commit name or reading the commit graph.
    #[error(transparent)]
    Git(#[from] crate::repos::git::GitError),
    /// Bad job files (named key, option or line) and other kbot-core errors.
    #[error(transparent)]
    Core(#[from] kbot_core::Error),
}

impl Error {
    pub fn not_found(what: &'static str, key: impl ToString) -> Error {
        Error::NotFound {
            what,
            key: key.to_string(),
        }
    }

    /// The stable, machine-readable code clients may match on.
    pub fn code(&self) -> &'static str {
        match self {
            Error::BadRequest(_) => "bad_request",
            Error::InvalidJson(_) => "invalid_json",
            Error::NonFiniteMetric(_) => "non_finite_metric",
            Error::Unauthorized => "unauthorized",
            Error::WrongTokenKind { .. } => "wrong_token_kind",
            Error::Forbidden(_) => "forbidden",
            Error::NotFound { .. } => "not_found",
            Error::Conflict(_) => "conflict",
            Error::LeaseLost(_) => "lease_lost",
            Error::PayloadTooLarge => "payload_too_large",
            Error::TooManyAttempts(_) => "too_many_attempts",
            Error::RequestTimeout => "request_timeout",
            Error::InsufficientStorage { .. } => "insufficient_storage",
            Error::Db(e) if database_unavailable(e) => "database_unavailable",
            Error::Db(e) if unstorable_text(e) => "bad_request",
            Error::Db(_)
            | Error::Migrate(_)
            | Error::Io(_)
            | Error::Other(_)
            | Error::Unrunnable(_)
            | Error::Config(_) => "internal",
            Error::UnknownRepo(_) => "unknown_repo",
            Error::RepoUnreachable { .. } => "repo_unreachable",
            Error::Git(e) => e.code(),
            Error::Core(e) => core_code(e),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Error::BadRequest(_) | Error::InvalidJson(_) | Error::NonFiniteMetric(_) => {
                StatusCode::BAD_REQUEST
            }
            Error::Unauthorized => StatusCode::UNAUTHORIZED,
            Error::WrongTokenKind { .. } | Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::NotFound { .. } => StatusCode::NOT_FOUND,
            Error::Conflict(_) | Error::LeaseLost(_) => StatusCode::CONFLICT,
            Error::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Error::TooManyAttempts(_) => StatusCode::TOO_MANY_REQUESTS,
            Error::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Error::InsufficientStorage { .. } => StatusCode::INSUFFICIENT_STORAGE,
            Error::Db(e) if database_unavailable(e) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Db(e) if unstorable_text(e) => StatusCode::BAD_REQUEST,
            Error::Db(_)
            | Error::Migrate(_)
            | Error::Io(_)
            | Error::Other(_)
            | Error::Unrunnable(_)
            | Error::Config(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Error::UnknownRepo(_) => StatusCode::NOT_FOUND,
            Error::RepoUnreachable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Error::Git(e) => e.status(),
            Error::Core(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// What the client may see: internal detail stays in the log.
    fn public_message(&self) -> String {
        if self.status() == StatusCode::SERVICE_UNAVAILABLE {
            "the database is unavailable; retry later".to_string()
        } else if matches!(self, Error::Db(e) if unstorable_text(e)) {
            "the request holds text that cannot be stored (a NUL byte)".to_string()
        } else if self.status() == StatusCode::INSUFFICIENT_STORAGE {
            // The server's path stays in its log.
            "the server's artifact disk is full: nothing was stored; retry later".to_string()
        } else if self.status().is_server_error() {
            "internal server error".to_string()
        } else {
            self.to_string()
        }
    }

    fn log(&self) {
        if self.status() == StatusCode::SERVICE_UNAVAILABLE {
            tracing::warn!(error = %error_chain(self), "database unavailable");
        } else if self.status().is_server_error() {
            tracing::error!(error = %error_chain(self), "request failed");
        } else {
            tracing::debug!(code = self.code(), error = %self, "request rejected");
        }
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code().to_string(),
                message: self.public_message(),
            },
        }
    }
}

/// Whether a database error means the database cannot be reached now (down,
/// restarting, refusing connections) rather than that the request is wrong:
/// such a request can succeed unchanged later, so it is a 503 that agents
/// retry with backoff, not a 500.
fn database_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => true,
        sqlx::Error::Tls(_) | sqlx::Error::WorkerCrashed => true,
        // SQLSTATE class 08: connection exceptions; 57P01-57P03: the server
        // is shutting down, crashed, or not accepting connections yet.
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|c| c.starts_with("08") || matches!(&*c, "57P01" | "57P02" | "57P03")),
        _ => false,
    }
}

/// PostgreSQL refuses text with a NUL byte (SQLSTATE 22021), which SQLite
/// stores: the client's input, not a fault of the server.
fn unstorable_text(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().is_some_and(|c| c == "22021"))
}

/// Seconds a client is asked to wait before retrying a 503.
const RETRY_AFTER_SECS: &str = "5";

/// Stable codes of kbot-core errors (job files, metrics, configs).
fn core_code(e: &kbot_core::Error) -> &'static str {
    use kbot_core::Error as E;
    match e {
        E::JobYaml { .. } => "invalid_yaml",
        E::JobInvalid(_) => "invalid_job_file",
        E::UnknownProgram { .. } => "unknown_program",
        E::UnknownOption { .. } => "unknown_option",
        E::InvalidValue { .. } => "invalid_value",
        E::NothingRunnable { .. } => "nothing_runnable",
        E::NonFiniteMetric { .. } => "non_finite_metric",
        _ => "bad_request",
    }
}

/// `outer: cause: root cause`, for logs.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        self.log();
        let mut response = (self.status(), Json(self.body())).into_response();
        // A 503 passes once the database is back, a 507 once disk space is
        // freed; a 429 once the oldest failure leaves the window.
        let retry_after = match &self {
            Error::TooManyAttempts(secs) => HeaderValue::from_str(&secs.to_string()).ok(),
            _ if matches!(
                self.status(),
                StatusCode::SERVICE_UNAVAILABLE | StatusCode::INSUFFICIENT_STORAGE
            ) =>
            {
                Some(HeaderValue::from_static(RETRY_AFTER_SECS))
            }
            _ => None,
        };
        if let Some(value) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

impl From<JsonRejection> for Error {
    fn from(rejection: JsonRejection) -> Error {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Error::PayloadTooLarge
        } else {
            Error::InvalidJson(rejection.body_text())
        }
    }
}

/// The same error rendered as a small HTML page, for dashboard routes.
#[derive(Debug)]
pub struct HtmlError(pub Error);

impl From<Error> for HtmlError {
    fn from(err: Error) -> HtmlError {
        HtmlError(err)
    }
}

impl IntoResponse for HtmlError {
    fn into_response(self) -> Response {
        self.0.log();
        // The dashboard's error template (it extends base.html, so the page
        // keeps the navigation).
        crate::dashboard::error_page(self.0.status(), &self.0.public_message())
    }
}

/// `axum::Json`, but a bad body becomes an [`Error`] (JSON `invalid_json`,
/// or `payload_too_large`) instead of axum's plain-text rejection.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Error> {
        let Json(value) = Json::<T>::from_request(req, state).await?;
        Ok(ApiJson(value))
    }
}
