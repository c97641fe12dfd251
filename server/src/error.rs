//! The one error type of kbot-server and how it becomes an HTTP response.
//!
//! API routes return [`Error`] directly: the response is a
//! [`kbot_api::ErrorBody`] with a stable `code`. Dashboard routes wrap it
//! in [`HtmlError`] to get the same status as an HTML page ([`error_page`]).
//! Server-side faults (database, I/O) are logged in full and reach the client
//! only as `internal`.
//!
//! Also here, so that the handlers and the OpenAPI document take them from a
//! module under both: the git errors ([`GitError`]) the enum carries, and the
//! named sets of error responses a handler's `#[utoipa::path]` lists
//! ([`LookupErrors`], ...). This module names no other module of the crate.

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use kbot_api::{ErrorBody, ErrorDetail};
use serde::de::DeserializeOwned;
use utoipa::openapi::RefOr;

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
    /// A job reached the most progress events it may record; its failure
    /// or result is still taken.
    #[error(
        "job {job_id} already has {limit} events, the most one job may record \
         (KBOT_MAX_EVENTS_PER_JOB); its failure or result is still accepted"
    )]
    TooManyEvents { job_id: i64, limit: u32 },
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
    #[error("no space left in the artifact store {store}")]
    InsufficientStorage {
        store: String,
        source: object_store::Error,
    },
    /// The artifact store failed to write or read an object (a bucket that
    /// cannot be reached, a missing object): a 503 the agent retries.
    #[error("artifact store: {key}")]
    ArtifactStore {
        key: String,
        source: object_store::Error,
    },
    #[error(transparent)]
    Other(#[from] anyhow::Error),
    #[error("unknown repo {0:?}")]
    UnknownRepo(String),
    /// Registering a repo whose URL git cannot clone.
    #[error("cannot mirror {url}: {source}")]
    RepoUnreachable { url: String, source: GitError },
    /// Resolving a commit name or reading the commit graph.
    #[error(transparent)]
    Git(#[from] GitError),
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
            Error::TooManyEvents { .. } => "too_many_events",
            Error::RequestTimeout => "request_timeout",
            Error::InsufficientStorage { .. } => "insufficient_storage",
            Error::ArtifactStore { .. } => "artifact_store_unavailable",
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
            Error::TooManyAttempts(_) | Error::TooManyEvents { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            Error::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Error::InsufficientStorage { .. } => StatusCode::INSUFFICIENT_STORAGE,
            Error::ArtifactStore { .. } => StatusCode::SERVICE_UNAVAILABLE,
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
        if matches!(self, Error::ArtifactStore { .. }) {
            "the artifact store is unavailable; retry later".to_string()
        } else if self.status() == StatusCode::SERVICE_UNAVAILABLE {
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
            tracing::warn!(error = %error_chain(self), code = self.code(), "store unavailable");
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

/// What a git call ([`crate::repos::git`]) can fail with: carried by
/// [`Error::Git`] and [`Error::RepoUnreachable`], so it lives beside them
/// and the error type names no feature.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The revision the user gave does not name a commit in the mirror.
    #[error("unknown revision {rev:?}")]
    UnknownRevision { rev: String },
    /// The revision contains characters git would read as options or ranges.
    #[error("invalid revision {rev:?}: {reason}")]
    InvalidRevision { rev: String, reason: &'static str },
    /// git exited non-zero for another reason (unreachable URL, corrupt mirror...).
    #[error("git {command} failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("git {command} timed out after {secs}s")]
    Timeout { command: String, secs: u64 },
    /// git could not be started at all (not installed?).
    #[error("could not run git: {0}")]
    Spawn(#[from] std::io::Error),
    #[error("unexpected output from git {command}: {detail}")]
    Parse {
        command: String,
        detail: &'static str,
    },
}

impl GitError {
    /// The stable API code (see [`Error::code`]).
    pub fn code(&self) -> &'static str {
        match self {
            GitError::UnknownRevision { .. } => "unknown_commit",
            GitError::InvalidRevision { .. } => "invalid_revision",
            _ => "git_failed",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            GitError::UnknownRevision { .. } => StatusCode::NOT_FOUND,
            GitError::InvalidRevision { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
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
        error_page(self.0.status(), &self.0.public_message())
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    status: u16,
    title: &'a str,
    message: &'a str,
}

/// The error page every dashboard error renders as. The template extends
/// `base.html`, so the page keeps the navigation.
pub fn error_page(status: StatusCode, message: &str) -> Response {
    let page = ErrorPage {
        status: status.as_u16(),
        title: status.canonical_reason().unwrap_or("Error"),
        message,
    };
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        // The template is compiled in; failing to render it is a bug worth a
        // plain-text answer rather than a second error page.
        Err(e) => (status, format!("{status}: {message} ({e})")).into_response(),
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

// The error responses of the handlers: each set below names the statuses a
// group of handlers can answer with, every one with the ErrorBody all API
// errors have. The `code` values come from [`Error::code`].

/// What each error status means, with the codes it carries.
fn error_description(status: u16) -> &'static str {
    match status {
        400 => {
            "Input that does not parse or makes no sense: `bad_request`, `invalid_json`, \
             `invalid_yaml`, `invalid_job_file`, `unknown_program`, `unknown_option`, \
             `invalid_value`, `nothing_runnable` (no job of the file can run here; each skipped \
             job is named with its reason), `invalid_revision`, `non_finite_metric`"
        }
        401 => "`unauthorized`: the bearer token is missing, malformed, unknown or revoked",
        403 => {
            "`wrong_token_kind` (an agent token on a user endpoint or the reverse) or \
             `forbidden` (the job is leased to another agent, ...)"
        }
        404 => "`not_found`, `unknown_repo` or `unknown_commit`",
        409 => {
            "`conflict` (the state does not allow it) or `lease_lost` (the job's lease \
             expired, or it was cancelled or re-queued meanwhile)"
        }
        408 => {
            "`request_timeout`: the request took longer than the server's request timeout \
             (`max_lease_wait_secs` + 60 s). The handler was stopped where it was: a write \
             may or may not have taken effect, so look before retrying one"
        }
        413 => "`payload_too_large`: the body is larger than the server accepts",
        429 => {
            "`too_many_attempts`: too many failed attempts from this address (wrong \
             enrolment tokens); retry after the `Retry-After` seconds"
        }
        507 => {
            "`insufficient_storage`: the server's artifact disk is full; nothing was stored. \
             Retry after the `Retry-After` seconds; an agent's upload sent again is stored once"
        }
        503 => {
            "`database_unavailable`: the database cannot be reached now (down or restarting), \
             or `artifact_store_unavailable`: the artifact bucket cannot be reached. \
             Retry after the `Retry-After` seconds; an agent's upload sent again is stored once"
        }
        422 => "`repo_unreachable`: git cannot clone or fetch the repository's URL",
        _ => "`internal`: a server-side fault (database, I/O); the detail is in the server's log",
    }
}

/// The responses of `statuses`, each an [`ErrorBody`] with its description.
pub fn error_responses(statuses: &[u16]) -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
    let body = utoipa::openapi::ContentBuilder::new()
        .schema(Some(utoipa::openapi::Ref::from_schema_name("ErrorBody")))
        .build();
    statuses
        .iter()
        .map(|&status| {
            let response = utoipa::openapi::ResponseBuilder::new()
                .description(error_description(status))
                .content("application/json", body.clone())
                .build();
            (status.to_string(), RefOr::T(response))
        })
        .collect()
}

/// A named set of error statuses, for a handler's `responses(...)`.
macro_rules! error_set {
    ($($(#[$doc:meta])* $name:ident: [$($status:literal),+];)+) => {$(
        $(#[$doc])*
        pub struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
                error_responses(&[$($status),+])
            }
        }
    )+};
}

error_set! {
    /// Whole lists: only a server fault.
    ListErrors: [500];
    /// Lists with paging query parameters.
    PagedListErrors: [400, 500];
    /// One thing by its id or name.
    LookupErrors: [404, 500];
    /// One thing by name plus a revision or query.
    QueryErrors: [400, 404, 500];
    /// Agent enrolment (the enrolment token is in the body).
    EnrollErrors: [400, 401, 409, 413, 429, 500];
    /// Agent lease.
    LeaseErrors: [400, 401, 403, 413, 500];
    /// Authenticated actions on one thing, without a body.
    CancelErrors: [401, 403, 404, 500];
    /// Authenticated actions on one thing that its state may refuse.
    ActionErrors: [401, 403, 404, 409, 500];
    /// Submissions.
    SubmitErrors: [400, 401, 403, 404, 413, 500];
    /// Authenticated writes with a body that the state may refuse.
    UpdateErrors: [400, 401, 403, 404, 409, 413, 500];
    /// A job's events: an update, bounded per job.
    EventErrors: [400, 401, 403, 404, 409, 413, 429, 500];
    /// Result uploads, whose artifacts need disk space.
    UploadErrors: [400, 401, 403, 404, 409, 413, 500, 507];
    /// Repo registration, which clones the repo.
    RepoCreateErrors: [400, 401, 403, 409, 413, 422, 500];
}
