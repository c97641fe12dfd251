//! `GET /api/openapi.json`: the REST API described as OpenAPI 3.1.
//!
//! The document is derived, not written: every handler carries a
//! `#[utoipa::path]` with its path, parameters, body, responses and
//! security, and every wire type derives `utoipa::ToSchema`, so a field added
//! to a type is in the document at the next build. The route table
//! (`routes.rs`) registers each API handler once, through utoipa-axum, which
//! routes it and adds its operation to [`ApiDoc`]'s document; [`finish`] then
//! adds what concerns every operation. The test `server/tests/it/openapi.rs`
//! fails when a route under `/api` is missing from the document, and runs an
//! OpenAPI validator and a generated client against the served document.

use std::sync::Arc;

use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use kbot_api::ErrorBody;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::OpenApi as Document;
use utoipa::{Modify, OpenApi};

/// Security scheme of the agent endpoints: `Authorization: Bearer kbot_agt_…`.
pub const AGENT_TOKEN: &str = "agent_token";
/// Security scheme of the user API's writes: `Authorization: Bearer kbot_usr_…`.
pub const USER_TOKEN: &str = "user_token";

/// What the document says besides its operations: the route table adds
/// those. The modifiers are not in the derive, which would run them before
/// any path is there: [`finish`] runs them on the whole document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "kbot",
        description = "Kernel performance regression robot: the agent protocol and the user API. \
                       Times are Unix milliseconds unless a field says otherwise; every error \
                       is an ErrorBody with a stable `code`."
    ),
    components(schemas(ErrorBody)),
    tags(
        (name = "agent", description = "Test machines: enrol, lease jobs, report progress, upload results"),
        (name = "repos", description = "Registered git repositories and their commits"),
        (name = "submissions", description = "Job files submitted for a commit pair, their runs and comparisons"),
        (name = "runs", description = "One finished run reproduced anywhere: its script, the initramfs it booted, the check of a reproduction"),
        (name = "builds", description = "Kernels built once and shared by every agent of their arch"),
        (name = "bisections", description = "From a regressed pair to its verified first bad commit"),
        (name = "watches", description = "Branches the robot tests at every new head"),
        (name = "lists", description = "Mailing lists whose patch series the robot tests"),
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
            for (_, op) in operations(item) {
                op.responses.responses.extend(timeout.clone());
            }
        }
    }
}

/// Adds to the document, once the route table has put every operation in
/// it, what concerns all of them: the token schemes and the 408 and 503
/// answers.
pub fn finish(openapi: &mut Document) {
    TokenSchemes.modify(openapi);
    RequestTimeouts.modify(openapi);
}

/// The operations of `item`, each with its method.
pub fn operations(item: &mut PathItem) -> impl Iterator<Item = (Method, &mut Operation)> {
    [
        (Method::GET, &mut item.get),
        (Method::PUT, &mut item.put),
        (Method::POST, &mut item.post),
        (Method::DELETE, &mut item.delete),
        (Method::OPTIONS, &mut item.options),
        (Method::HEAD, &mut item.head),
        (Method::PATCH, &mut item.patch),
        (Method::TRACE, &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(method, op)| Some((method, op.as_mut()?)))
}

/// The REST API as OpenAPI 3.1.
#[utoipa::path(
    get,
    operation_id = "openapi_document",
    path = "/api/openapi.json",
    tag = "meta",
    responses((status = 200, description = "This OpenAPI 3.1 document", body = Object)),
)]
pub async fn document(Extension(document): Extension<Arc<Document>>) -> Response {
    // The route table's document, which the router hands every request
    // (`routes::router`); the doc comment above is the operation's summary.
    Json(document.as_ref()).into_response()
}
