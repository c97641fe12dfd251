//! `GET /api/openapi.json`: the REST API described as OpenAPI 3.1.
//!
//! The document is built from [`OPERATIONS`], one entry per route of the
//! route table: add a line there with each new endpoint. Request and response
//! bodies are named by their Rust wire type (in `kbot_core::api` unless the
//! entry says otherwise) rather than spelled out as JSON Schema, because the
//! wire types live in the I/O-free core crate, which does not depend on
//! utoipa; the error body, shared by every endpoint, is given in full.

use axum::Json;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, PathItem};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathsBuilder, Ref,
    ResponseBuilder,
};

/// Which token an endpoint needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    None,
    Agent,
    User,
}

/// One documented endpoint.
#[derive(Debug, Clone, Copy)]
pub struct ApiOperation {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    pub auth: Auth,
    /// Wire type of the JSON request body, if any.
    pub request: Option<&'static str>,
    /// Wire type of the success body (`None` for 204 / no body).
    pub response: Option<&'static str>,
}

const fn op(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    auth: Auth,
    request: Option<&'static str>,
    response: Option<&'static str>,
) -> ApiOperation {
    ApiOperation {
        method,
        path,
        summary,
        auth,
        request,
        response,
    }
}

/// Every endpoint, in route-table order.
pub const OPERATIONS: &[ApiOperation] = &[
    op(
        "post",
        "/api/v1/agents/enroll",
        "Trade a one-time enrolment token for an agent token",
        Auth::None,
        Some("EnrollRequest"),
        Some("EnrollResponse"),
    ),
    op(
        "post",
        "/api/v1/agents/lease",
        "Long-poll (bounded) for at most one job matching this agent",
        Auth::Agent,
        Some("LeaseRequest"),
        Some("LeaseResponse"),
    ),
    op(
        "post",
        "/api/v1/jobs/{id}/heartbeat",
        "Extend the lease of a job; says whether it was cancelled",
        Auth::Agent,
        None,
        Some("HeartbeatResponse"),
    ),
    op(
        "post",
        "/api/v1/jobs/{id}/events",
        "Report a state change (building, booting, running, uploading, failed)",
        Auth::Agent,
        Some("EventRequest"),
        None,
    ),
    op(
        "put",
        "/api/v1/jobs/{id}/result",
        "Upload the result of one run (idempotent)",
        Auth::Agent,
        Some("ResultUpload"),
        Some("UploadResponse"),
    ),
    op(
        "post",
        "/api/v1/repos",
        "Register a git repository (URL or server path) and mirror it",
        Auth::User,
        Some("kbot_server::submissions::types::RepoCreate"),
        Some("kbot_server::submissions::types::RepoView"),
    ),
    op(
        "get",
        "/api/v1/repos",
        "List registered repositories",
        Auth::None,
        None,
        Some("Vec<kbot_server::submissions::types::RepoView>"),
    ),
    op(
        "get",
        "/api/v1/repos/{name}",
        "One registered repository",
        Auth::None,
        None,
        Some("kbot_server::submissions::types::RepoView"),
    ),
    op(
        "get",
        "/api/v1/repos/{name}/commits/{rev}",
        "Resolve a branch, tag or (short) sha to a stored commit",
        Auth::None,
        None,
        Some("kbot_server::submissions::types::CommitView"),
    ),
    op(
        "get",
        "/api/v1/repos/{name}/revlist",
        "Commits in base..head, oldest first (query: base, head, first_parent)",
        Auth::None,
        None,
        Some("kbot_server::repos::routes::RevList"),
    ),
    op(
        "post",
        "/api/v1/submissions",
        "Submit a job file for a base/head pair, or one commit against its parent",
        Auth::User,
        Some("kbot_server::submissions::types::SubmitRequest"),
        Some("kbot_server::submissions::types::SubmissionView"),
    ),
    op(
        "get",
        "/api/v1/submissions",
        "List submissions, newest first (query: limit, before)",
        Auth::None,
        None,
        Some("Vec<kbot_server::submissions::types::SubmissionView>"),
    ),
    op(
        "get",
        "/api/v1/submissions/{id}",
        "A submission with its job file, atomic jobs and jobs",
        Auth::None,
        None,
        Some("kbot_server::submissions::types::SubmissionDetail"),
    ),
    op(
        "get",
        "/api/v1/submissions/{id}/events",
        "Job events of a submission after an event id (query: after, limit)",
        Auth::None,
        None,
        Some("Vec<kbot_server::submissions::types::EventView>"),
    ),
    op(
        "post",
        "/api/v1/submissions/{id}/cancel",
        "Cancel a submission's unfinished jobs",
        Auth::User,
        None,
        Some("kbot_server::submissions::types::SubmissionView"),
    ),
    op(
        "get",
        "/api/v1/submissions/{id}/results",
        "Per-run metrics and per-metric comparisons of a submission",
        Auth::None,
        None,
        Some("kbot_server::submissions::types::SubmissionResults"),
    ),
    op(
        "get",
        "/api/v1/submissions/{id}/comparisons",
        "Per-metric comparisons (kbot verdict, means, change) of a submission",
        Auth::None,
        None,
        Some("Vec<kbot_server::submissions::types::ComparisonView>"),
    ),
    op(
        "get",
        "/api/v1/bisections",
        "Recent bisections, newest first",
        Auth::None,
        None,
        Some("Vec<kbot_server::bisect::types::BisectionView>"),
    ),
    op(
        "get",
        "/api/v1/bisections/{id}",
        "A bisection with the commits it tested",
        Auth::None,
        None,
        Some("kbot_server::bisect::types::BisectionDetail"),
    ),
    op(
        "post",
        "/api/v1/bisections/{id}/cancel",
        "Cancel a bisection and its queued runs",
        Auth::User,
        None,
        Some("kbot_server::bisect::types::BisectionView"),
    ),
    op(
        "post",
        "/api/v1/watches",
        "Watch a branch: test every new head, bisect regressions",
        Auth::User,
        Some("kbot_server::watches::types::WatchCreate"),
        Some("kbot_server::watches::types::WatchView"),
    ),
    op(
        "get",
        "/api/v1/watches",
        "Watched branches",
        Auth::None,
        None,
        Some("Vec<kbot_server::watches::types::WatchView>"),
    ),
    op(
        "get",
        "/api/v1/watches/{id}",
        "A watch and its recent events",
        Auth::None,
        None,
        Some("kbot_server::watches::types::WatchDetail"),
    ),
    op(
        "delete",
        "/api/v1/watches/{id}",
        "Stop watching a branch",
        Auth::User,
        None,
        Some("kbot_server::watches::types::WatchView"),
    ),
    op(
        "get",
        "/healthz",
        "Liveness and database reachability",
        Auth::None,
        None,
        None,
    ),
    op(
        "get",
        "/api/openapi.json",
        "This document",
        Auth::None,
        None,
        None,
    ),
];

/// Handler of `GET /api/openapi.json`.
pub async fn document() -> Json<OpenApi> {
    Json(build())
}

/// The OpenAPI document for [`OPERATIONS`].
pub fn build() -> OpenApi {
    let mut paths = PathsBuilder::new();
    for operation in OPERATIONS {
        paths = paths.path(
            operation.path,
            PathItem::new(method(operation.method), build_operation(operation)),
        );
    }
    let bearer = SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build());
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("kbot")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "Kernel performance regression robot: agent protocol and user API. \
                     Body types are the Rust wire types of kbot_core::api.",
                ))
                .build(),
        )
        .paths(paths.build())
        .components(Some(
            ComponentsBuilder::new()
                .security_scheme("agent_token", bearer.clone())
                .security_scheme("user_token", bearer)
                .schema("ErrorBody", error_body_schema())
                .build(),
        ))
        .build()
}

fn method(name: &str) -> HttpMethod {
    match name {
        "put" => HttpMethod::Put,
        "post" => HttpMethod::Post,
        "delete" => HttpMethod::Delete,
        "patch" => HttpMethod::Patch,
        _ => HttpMethod::Get,
    }
}

fn named_body(type_name: &str) -> utoipa::openapi::Content {
    // A bare name is a kbot_core::api type; the user API's types carry their path.
    let rust_path = if type_name.contains("::") {
        type_name.to_string()
    } else {
        format!("kbot_core::api::{type_name}")
    };
    ContentBuilder::new()
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .title(Some(type_name))
                .description(Some(format!("JSON of {rust_path}")))
                .build(),
        ))
        .build()
}

fn build_operation(operation: &ApiOperation) -> utoipa::openapi::path::Operation {
    let mut builder = OperationBuilder::new().summary(Some(operation.summary));
    if let Some(request) = operation.request {
        builder = builder.request_body(Some(
            RequestBodyBuilder::new()
                .content("application/json", named_body(request))
                .build(),
        ));
    }
    let success = match operation.response {
        Some(response) => ResponseBuilder::new()
            .description(response)
            .content("application/json", named_body(response))
            .build(),
        None => ResponseBuilder::new().description("success").build(),
    };
    builder = builder.response("200", success).response(
        "default",
        ResponseBuilder::new()
            .description("error with a stable code")
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build(),
    );
    match operation.auth {
        Auth::None => builder.build(),
        Auth::Agent => builder
            .security(SecurityRequirement::new(
                "agent_token",
                Vec::<String>::new(),
            ))
            .build(),
        Auth::User => builder
            .security(SecurityRequirement::new("user_token", Vec::<String>::new()))
            .build(),
    }
}

fn error_body_schema() -> utoipa::openapi::schema::Object {
    let string = || ObjectBuilder::new().schema_type(Type::String).build();
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "error",
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .property("code", string())
                .property("message", string())
                .required("code")
                .required("message"),
        )
        .required("error")
        .build()
}
