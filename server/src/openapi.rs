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

use axum::Json;
use kbot_api::ErrorBody;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::OpenApi as Document;
use utoipa::{Modify, OpenApi};

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
        crate::scheduler::routes::lease,
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
        let timeout = crate::error::error_responses(&[408, 503]);
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
