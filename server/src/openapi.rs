//! `GET /api/openapi.json`: the REST API described as OpenAPI 3.1.
//!
//! The document is derived, not written: every handler carries a
//! `#[utoipa::path]` with its parameters, body, responses and security, and
//! every wire type derives `utoipa::ToSchema`, so a field added to a type is
//! in the document at the next build. [`ApiDoc`] lists the handlers; the test
//! `server/tests/openapi.rs` fails when a route of the route table under
//! `/api` is missing from it, and runs an OpenAPI validator and a generated
//! client against the served document.

use std::sync::LazyLock;

use std::collections::BTreeMap;

use axum::Json;
use kbot_api::ErrorBody;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, Ref, RefOr};
use utoipa::{IntoResponses, Modify, OpenApi};

/// Security scheme of the agent endpoints: `Authorization: Bearer kbot_agt_…`.
pub const AGENT_TOKEN: &str = "agent_token";
/// Security scheme of the user API's writes: `Authorization: Bearer kbot_usr_…`.
pub const USER_TOKEN: &str = "user_token";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "kbot",
        description = "Kernel performance regression robot: the agent protocol and the user API. \
                       Times are Unix milliseconds unless a field says otherwise; every error \
                       is an ErrorBody with a stable `code`."
    ),
    paths(
        crate::agents::enroll,
        crate::jobs::handlers::lease,
        crate::jobs::handlers::heartbeat,
        crate::jobs::handlers::event,
        crate::jobs::results::upload,
        crate::repos::routes::create,
        crate::repos::routes::list,
        crate::repos::routes::show,
        crate::repos::routes::commit,
        crate::repos::routes::revlist,
        crate::submissions::routes::create,
        crate::submissions::routes::list,
        crate::submissions::routes::show,
        crate::submissions::routes::events,
        crate::submissions::routes::cancel,
        crate::submissions::routes::results,
        crate::submissions::routes::comparisons,
        crate::bisect::routes::list,
        crate::bisect::routes::show,
        crate::bisect::routes::cancel,
        crate::watches::routes::create,
        crate::watches::routes::list,
        crate::watches::routes::show,
        crate::watches::routes::remove,
        crate::mail::pages::list_json,
        crate::mail::pages::show_json,
        crate::mail::pages::resend_json,
        crate::regressions::routes::list,
        crate::regressions::routes::triage,
        document,
    ),
    components(schemas(ErrorBody)),
    modifiers(&TokenSchemes, &RequestTimeouts),
    tags(
        (name = "agent", description = "Test machines: enrol, lease jobs, report progress, upload results"),
        (name = "repos", description = "Registered git repositories and their commits"),
        (name = "submissions", description = "Job files submitted for a commit pair, their runs and comparisons"),
        (name = "bisections", description = "From a regressed pair to its verified first bad commit"),
        (name = "watches", description = "Branches the robot tests at every new head"),
        (name = "reports", description = "Regression reports and their delivery"),
        (name = "regressions", description = "What the robot found, and its triage"),
        (name = "meta", description = "This document"),
    )
)]
pub struct ApiDoc;

/// Both token kinds are plain bearer tokens; they differ in what they open.
struct TokenSchemes;

impl Modify for TokenSchemes {
    fn modify(&self, openapi: &mut Document) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (name, description) in [
            (
                AGENT_TOKEN,
                "An agent token (`kbot_agt_…`), returned by POST /api/v1/agents/enroll",
            ),
            (
                USER_TOKEN,
                "A user token (`kbot_usr_…`), made by `kbot-server user-token NAME`",
            ),
        ] {
            let mut scheme = Http::new(HttpAuthScheme::Bearer);
            scheme.description = Some(description.to_owned());
            components.add_security_scheme(name, SecurityScheme::Http(scheme));
        }
    }
}

/// Every request runs under the router's timeout layer (`routes.rs`), and
/// any handler that reads the store meets a database that may be down, so
/// every operation can answer 408 and 503, with the usual ErrorBody.
struct RequestTimeouts;

impl Modify for RequestTimeouts {
    fn modify(&self, openapi: &mut Document) {
        let timeout = error_responses(&[408, 503]);
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.options,
                &mut item.head,
                &mut item.patch,
                &mut item.trace,
            ];
            for op in operations.into_iter().flatten() {
                op.responses.responses.extend(timeout.clone());
            }
        }
    }
}

/// Built once: the document depends on nothing but the code.
static DOCUMENT: LazyLock<Document> = LazyLock::new(ApiDoc::openapi);

/// The REST API as OpenAPI 3.1.
#[utoipa::path(
    get,
    operation_id = "openapi_document",
    path = "/api/openapi.json",
    tag = "meta",
    responses((status = 200, description = "This OpenAPI 3.1 document", body = Object)),
)]
pub async fn document() -> Json<&'static Document> {
    Json(&DOCUMENT)
}

// The error responses of the handlers: each set below names the statuses a
// group of handlers can answer with, every one with the ErrorBody all API
// errors have. The `code` values come from `Error::code` in crate::error.

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
            "`database_unavailable`: the database cannot be reached now (down or restarting). \
             Retry after the `Retry-After` seconds; an agent's upload sent again is stored once"
        }
        422 => "`repo_unreachable`: git cannot clone or fetch the repository's URL",
        _ => "`internal`: a server-side fault (database, I/O); the detail is in the server's log",
    }
}

fn error_responses(statuses: &[u16]) -> BTreeMap<String, RefOr<Response>> {
    let body = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("ErrorBody")))
        .build();
    statuses
        .iter()
        .map(|&status| {
            let response = ResponseBuilder::new()
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

        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
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
    EnrollErrors: [400, 401, 413, 429, 500];
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
    /// Result uploads, whose artifacts need disk space.
    UploadErrors: [400, 401, 403, 404, 409, 413, 500, 507];
    /// Repo registration, which clones the repo.
    RepoCreateErrors: [400, 401, 403, 409, 413, 422, 500];
}
