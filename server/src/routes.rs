//! The single route table: every route once, one line each, grouped by who
//! calls it; handlers live in their own modules.
//!
//! The table is data (`RouteTable`) that yields the axum router, the
//! OpenAPI document and the list of routes the tests walk
//! ([`route_list`]). An API handler is registered with utoipa-axum's
//! `routes!`, which reads its path and method from its `#[utoipa::path]`:
//! the router serves it where the document says it is. Dashboard pages,
//! forms and `/healthz` are not in the document; they are added with a
//! method and a path.
//!
//! axum 0.8 path syntax: `/{id}` captures, `/{*rest}` wildcards.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request};
use axum::handler::Handler;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter};
use axum::{Extension, Json, Router};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa::openapi::path::Paths;
use utoipa::openapi::OpenApi as Document;
use utoipa::OpenApi;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};
use utoipa_axum::routes;

use crate::error::{Error, HtmlError};
use crate::state::AppState;
use crate::{
    access, agents, bisect, builds, dashboard, jobs, lists, openapi, regressions, repos, scheduler,
    submissions, watches, web,
};

/// The whole HTTP surface of the server.
pub fn router(state: AppState) -> Router {
    let limit = state.config.max_upload_bytes;
    // Long-polls end within max_lease_wait_secs; anything slower is stuck.
    let request_timeout = Duration::from_secs(u64::from(state.config.max_lease_wait_secs) + 60);
    let (routes, document) = table().split();
    let routes = routes
        .fallback(web::not_found)
        // What `GET /api/openapi.json` serves.
        .layer(Extension(Arc::new(document)))
        // Every request learns its session (and meets the sign-in wall
        // for reading, when that is on).
        .layer(middleware::from_fn_with_state(
            state.clone(),
            access::session::load,
        ))
        .with_state(state);
    with_layers(routes, limit, request_timeout)
}

/// (method, path) of every route the router answers, in axum's path syntax
/// (`{*rev}` for a wildcard); the tests that must cover every route walk it.
pub fn route_list() -> BTreeSet<(String, String)> {
    table().list
}

/// The layers every request passes: body limits, the request timeout (408,
/// documented on every API operation), JSON error bodies for both, tracing.
fn with_layers(routes: Router, limit: usize, request_timeout: Duration) -> Router {
    routes
        .layer(DefaultBodyLimit::max(limit))
        .layer(RequestBodyLimitLayer::new(limit))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            request_timeout,
        ))
        // Outside the limit and timeout layers, whose own 413 and 408 it
        // rewrites.
        .layer(middleware::from_fn(json_errors))
        // Error texts quote what the client sent: no browser may read any
        // answer as another type than the one it is labelled with.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(TraceLayer::new_for_http())
}

/// Every route, by who calls it. Building it needs no state: the state is
/// given to the router it yields.
fn table() -> RouteTable {
    let table = RouteTable::new();
    let table = agent_routes(table);
    let table = meta_routes(table);
    let table = user_routes(table);
    let table = dashboard_routes(table);
    let table = report_routes(table);
    let table = profile_routes(table);
    access_routes(table)
}

/// Called by agents with an agent token (`kbot_api::agent` documents them).
fn agent_routes(t: RouteTable) -> RouteTable {
    t.api(routes!(agents::enroll))
        .api(routes!(scheduler::routes::lease))
        .api(routes!(jobs::handlers::heartbeat))
        .api(routes!(jobs::handlers::event))
        .api(routes!(jobs::results::upload))
        .api(routes!(jobs::initramfs::upload))
        .api(routes!(builds::routes::claim))
        .api(routes!(builds::routes::upload_file))
        .api(routes!(builds::routes::ready))
        .api(routes!(builds::routes::failed))
        .api(routes!(builds::orders::routes::lease))
        .api(routes!(builds::orders::routes::heartbeat))
}

/// Called by users and the CLI: writes need a user token, reads are open.
fn user_routes(t: RouteTable) -> RouteTable {
    use bisect::routes as b;
    use lists::routes as l;
    use regressions::routes as g;
    use repos::routes as r;
    use submissions::routes as s;
    use watches::routes as w;
    t.api(routes!(r::create))
        .api(routes!(r::list))
        .api(routes!(r::show))
        // A rev may hold `/` (`feature/x`).
        .api_wildcard(routes!(r::commit))
        .api(routes!(r::revlist))
        .api(routes!(s::create))
        .api(routes!(s::list))
        .api(routes!(s::show))
        .api(routes!(s::events))
        .api(routes!(s::cancel))
        .api(routes!(s::results))
        .api(routes!(s::comparisons))
        .api(routes!(s::kcidb))
        .api(routes!(jobs::repro::script))
        .api(routes!(jobs::repro::check))
        .api(routes!(jobs::profile::folded))
        .api(routes!(jobs::initramfs::download))
        .api(routes!(b::list))
        .api(routes!(b::show))
        .api(routes!(b::cancel))
        .api(routes!(w::create))
        .api(routes!(w::list))
        .api(routes!(w::show))
        .api(routes!(w::remove))
        .api(routes!(l::create))
        .api(routes!(l::list))
        .api(routes!(l::show))
        .api(routes!(l::commands))
        .api(routes!(l::read))
        .api(routes!(l::remove))
        .api(routes!(l::series_list))
        .api(routes!(l::series_show))
        .api(routes!(g::list))
        .api(routes!(g::triage))
        .api(routes!(builds::routes::list))
        .api(routes!(builds::orders::routes::list))
        .api(routes!(builds::routes::get))
        .api(routes!(builds::routes::file))
}

/// The HTML dashboard.
fn dashboard_routes(t: RouteTable) -> RouteTable {
    use submissions::pages as s;
    t.page(Method::GET, "/", dashboard::overview::page)
        .page(Method::GET, "/submissions", s::index)
        .page(Method::GET, "/machines", dashboard::machines::page)
        .page(Method::GET, "/jobs/{id}/log", dashboard::machines::job_log)
        .page(Method::GET, "/trends", dashboard::trends::page)
        .page(
            Method::GET,
            "/submissions/{id}",
            dashboard::neighbours::submission_page,
        )
        .page(Method::GET, "/submissions/{id}/compare", s::compare::page)
        .page(Method::GET, "/agents", agents::pages::agents)
        .page(Method::GET, "/bisections", bisect::pages::list)
        .page(Method::GET, "/bisections/{id}", bisect::pages::show)
        .page(Method::GET, "/watches", watches::pages::watches)
        .page(Method::GET, "/lists", lists::pages::lists)
        .page(Method::GET, "/series/{id}", lists::pages::series)
        .page(Method::GET, "/git/{repo}/{*path}", repos::serve::file)
        .page(Method::GET, "/commits/{repo}/{sha}", repos::pages::commit)
}

/// Kernel profile comparisons: a page and its differential flame graph
/// (SVG), for a pair and for a bisection step.
fn profile_routes(t: RouteTable) -> RouteTable {
    use dashboard::profiles::pages as p;
    t.page(
        Method::GET,
        "/submissions/{id}/jobs/{position}/profile",
        p::pair_page,
    )
    .page(
        Method::GET,
        "/submissions/{id}/jobs/{position}/profile.svg",
        p::pair_svg,
    )
    .page(
        Method::GET,
        "/bisections/{id}/steps/{index}/profile",
        p::step_page,
    )
    .page(
        Method::GET,
        "/bisections/{id}/steps/{index}/profile.svg",
        p::step_svg,
    )
}

/// Dashboard sign-in and sign-out, and the forms that change things (a
/// signed-in user with the session's CSRF token).
fn access_routes(t: RouteTable) -> RouteTable {
    use access::pages as a;
    use regressions::pages as g;
    use submissions::pages::forms as s;
    t.page(Method::GET, "/signin", a::form)
        .page(Method::POST, "/signin", a::sign_in)
        .page(Method::POST, "/signout", a::sign_out)
        .page(Method::GET, "/submit", s::form)
        .page(Method::POST, "/submit", s::submit)
        .page(Method::POST, "/submissions/{id}/cancel", s::cancel)
        .page(Method::POST, "/submissions/{id}/resubmit", s::resubmit)
        .page(Method::GET, "/regressions", g::list)
        .page(Method::GET, "/regressions/{id}", g::show)
        .page(Method::POST, "/regressions/{id}/state", g::triage)
}

/// Regression reports: pages, mbox download, JSON (open), an operator's
/// resend (user token, or the page's form: a session with its CSRF token).
fn report_routes(t: RouteTable) -> RouteTable {
    use crate::mail::materials::materials;
    use crate::mail::pages as p;
    t.page(Method::GET, "/reports", p::list_page)
        .page(Method::GET, "/reports/{message_id}", p::show_page)
        .page(Method::GET, "/reports/{message_id}/mbox", p::mbox)
        .page(Method::POST, "/reports/{message_id}/resend", p::resend_form)
        .page(Method::GET, "/archive/{day}/{message_id}", materials)
        .api(routes!(p::list_json))
        .api(routes!(p::show_json))
        .api(routes!(p::resend_json))
}

/// Unauthenticated: health and the API description.
fn meta_routes(t: RouteTable) -> RouteTable {
    t.page(Method::GET, "/healthz", healthz)
        .api(routes!(openapi::document))
}

/// The route table under construction: the router with its OpenAPI
/// document, and the list of the routes added.
struct RouteTable {
    router: OpenApiRouter<AppState>,
    list: BTreeSet<(String, String)>,
}

impl RouteTable {
    fn new() -> Self {
        RouteTable {
            router: OpenApiRouter::with_openapi(openapi::ApiDoc::openapi()),
            list: BTreeSet::new(),
        }
    }

    /// An API handler, routed and documented where its `#[utoipa::path]`
    /// says (one handler a call: `routes!` routes all it is given at every
    /// path any of them names).
    fn api(mut self, handler: UtoipaMethodRouter<AppState>) -> Self {
        let (schemas, mut paths, method_router) = handler;
        self.record(&mut paths, str::to_owned);
        self.router = self.router.routes((schemas, paths, method_router));
        self
    }

    /// An API handler whose last path parameter is a wildcard in the
    /// router, so that it may hold `/`. OpenAPI has no parameter of several
    /// segments: the document keeps the path as the handler declares it
    /// (`{rev}`, whose description says it may hold `/`), the router
    /// serves it as `{*rev}`.
    fn api_wildcard(mut self, handler: UtoipaMethodRouter<AppState>) -> Self {
        let (schemas, mut paths, method_router) = handler;
        self.record(&mut paths, wildcard);
        for path in paths.paths.keys() {
            self.router = self.router.route(&wildcard(path), method_router.clone());
        }
        // What `OpenApiRouter::routes` adds to the document.
        let document = self.router.get_openapi_mut();
        document.paths.merge(paths);
        let components = document.components.get_or_insert_with(Default::default);
        components.schemas.extend(schemas);
        self
    }

    /// A route outside the OpenAPI document: a dashboard page or form, or
    /// `/healthz`.
    fn page<H, T>(mut self, method: Method, path: &str, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        // The table names GET and POST only, which have filters.
        let filter = MethodFilter::try_from(method.clone()).expect("a method axum routes");
        self.list.insert((method.to_string(), path.to_owned()));
        self.router = self.router.route(path, on(filter, handler));
        self
    }

    /// Lists the operations of `paths`, each at `router_path(path)`.
    fn record(&mut self, paths: &mut Paths, router_path: impl Fn(&str) -> String) {
        for (path, item) in &mut paths.paths {
            for (method, _) in openapi::operations(item) {
                self.list.insert((method.to_string(), router_path(path)));
            }
        }
    }

    /// The router (still to be given its state) and the finished document.
    fn split(self) -> (Router<AppState>, Document) {
        let (router, mut document) = self.router.split_for_parts();
        openapi::finish(&mut document);
        (router, document)
    }
}

/// `path` with its last segment, a `{param}`, made the wildcard `{*param}`.
fn wildcard(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((head, last)) if last.starts_with('{') && last.ends_with('}') => {
            format!("{head}/{{*{}", &last[1..])
        }
        // A fault of the table itself, met by any test that builds it.
        _ => panic!("{path} does not end in a path parameter"),
    }
}

/// 200 when the store answers; 503 `database_unavailable` (JSON) when it
/// does not within [`HEALTH_TIMEOUT`], so a load balancer takes a replica
/// whose database is away out of rotation quickly.
async fn healthz(axum::extract::State(state): axum::extract::State<AppState>) -> Response {
    let ping = sqlx::query("SELECT 1").execute(state.db.read());
    match tokio::time::timeout(HEALTH_TIMEOUT, ping).await {
        Ok(Ok(_)) => (StatusCode::OK, "ok\n").into_response(),
        Ok(Err(err)) => Error::from(err).into_response(),
        Err(_elapsed) => Error::from(sqlx::Error::PoolTimedOut).into_response(),
    }
}

const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// The body-limit layer answers 413 in plain text before any handler runs,
/// the timeout layer an empty 408 when a request outlives the timeout,
/// and axum's own extractors refuse a malformed path segment or query
/// string with a plain-text 400 that quotes the bad value; API clients get
/// the JSON error body every other error has (and the OpenAPI document
/// promises), a browser the dashboard's escaped error page.
async fn json_errors(req: Request, next: Next) -> Response {
    let api = req.uri().path().starts_with("/api/");
    // A NUL byte (only `%00` in a URL) is no name, ref or filter of any
    // kind; PostgreSQL refuses it where SQLite would store it.
    let uri = req.uri();
    let nul = uri.path().contains("%00") || uri.query().is_some_and(|q| q.contains("%00"));
    let response = if nul {
        (StatusCode::BAD_REQUEST, "the URL holds a NUL byte (%00)").into_response()
    } else {
        next.run(req).await
    };
    let content_type = response.headers().get(header::CONTENT_TYPE);
    let is_json = content_type.is_some_and(|v| v == HeaderValue::from_static("application/json"));
    let is_text = content_type.is_some_and(|v| v.as_bytes().starts_with(b"text/plain"));
    let status = response.status();
    if is_json {
        response
    } else if status == StatusCode::PAYLOAD_TOO_LARGE {
        (status, Json(Error::PayloadTooLarge.body())).into_response()
    } else if api && status == StatusCode::REQUEST_TIMEOUT {
        (status, Json(Error::RequestTimeout.body())).into_response()
    } else if status == StatusCode::BAD_REQUEST && (api || is_text) {
        // The rejection's text says what was wrong; it is short, and a
        // longer one is cut rather than dropped.
        let text = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .unwrap_or_default();
        let error = Error::BadRequest(String::from_utf8_lossy(&text).trim().to_owned());
        if api {
            (status, Json(error.body())).into_response()
        } else {
            HtmlError(error).into_response()
        }
    } else {
        response
    }
}

#[cfg(test)]
mod tests {
    use axum::routing::get;

    use super::*;

    /// The commit route: a wildcard in the router (a rev may hold `/`), the
    /// path its handler declares in the document, which OpenAPI can read.
    #[test]
    fn a_wildcard_route_is_routed_as_one_and_documented_as_declared() {
        let routed = (
            "GET".to_owned(),
            "/api/v1/repos/{name}/commits/{*rev}".to_owned(),
        );
        assert!(route_list().contains(&routed));
        let (_, document) = table().split();
        let paths = &document.paths.paths;
        assert!(paths.contains_key("/api/v1/repos/{name}/commits/{rev}"));
        let keys: Vec<&String> = paths.keys().collect();
        assert!(!keys.iter().any(|path| path.contains("{*")), "{keys:?}");
        assert_eq!(wildcard("/a/{b}/c/{rev}"), "/a/{b}/c/{*rev}");
    }

    /// A request that outlives the timeout gets 408 with the ErrorBody the
    /// OpenAPI document promises on every operation.
    #[tokio::test]
    async fn a_timed_out_api_request_gets_a_json_408() {
        use tower::ServiceExt;
        let slow = || async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "late"
        };
        let api_slow = "/api/v1/slow";
        let routes = Router::new()
            .route(api_slow, get(slow))
            .route("/slow", get(slow));
        let app = with_layers(routes, 1024, Duration::from_millis(20));
        let call = |uri: &'static str| {
            let app = app.clone();
            async move {
                let request = Request::builder().uri(uri).body(axum::body::Body::empty());
                app.oneshot(request.expect("request"))
                    .await
                    .expect("response")
            }
        };
        let response = call(api_slow).await;
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        let body = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .expect("body");
        let body: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(body["error"]["code"], "request_timeout", "{body}");
        // Pages keep the plain response.
        let response = call("/slow").await;
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    }
}
