//! The single route table. Other modules add their routes here, one line
//! each, grouped by who calls them; handlers live in their own modules.
//!
//! axum 0.8 path syntax: `/{id}` captures, `/{*rest}` wildcards.

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use kbot_api::API_PREFIX;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::error::{Error, HtmlError};
use crate::state::AppState;
use crate::{
    access, agents, bisect, dashboard, jobs, openapi, regressions, repos, scheduler, submissions,
    watches, web,
};

/// The whole HTTP surface of the server.
pub fn router(state: AppState) -> Router {
    let limit = state.config.max_upload_bytes;
    // Long-polls end within max_lease_wait_secs; anything slower is stuck.
    let request_timeout = Duration::from_secs(u64::from(state.config.max_lease_wait_secs) + 60);
    let routes = Router::new()
        .merge(agent_routes())
        .merge(meta_routes())
        .merge(user_routes())
        .merge(dashboard_routes())
        .merge(report_routes())
        .merge(access_routes())
        .fallback(web::not_found)
        // Every request learns its session (and meets the sign-in wall
        // for reading, when that is on).
        .layer(middleware::from_fn_with_state(
            state.clone(),
            access::session::load,
        ))
        .with_state(state);
    with_layers(routes, limit, request_timeout)
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

/// Called by agents with an agent token (`kbot_api::agent` documents them).
fn agent_routes() -> Router<AppState> {
    Router::new()
        .route(&api("/agents/enroll"), post(agents::enroll))
        .route(&api("/agents/lease"), post(scheduler::routes::lease))
        .route(
            &api("/jobs/{id}/heartbeat"),
            post(jobs::handlers::heartbeat),
        )
        .route(&api("/jobs/{id}/events"), post(jobs::handlers::event))
        .route(&api("/jobs/{id}/result"), put(jobs::results::upload))
}

/// Called by users and the CLI: writes need a user token, reads are open.
fn user_routes() -> Router<AppState> {
    use bisect::routes as b;
    use regressions::routes as g;
    use repos::routes as r;
    use submissions::routes as s;
    use watches::routes as w;
    Router::new()
        .route(&api("/repos"), post(r::create).get(r::list))
        .route(&api("/repos/{name}"), get(r::show))
        .route(&api("/repos/{name}/commits/{*rev}"), get(r::commit))
        .route(&api("/repos/{name}/revlist"), get(r::revlist))
        .route(&api("/submissions"), post(s::create).get(s::list))
        .route(&api("/submissions/{id}"), get(s::show))
        .route(&api("/submissions/{id}/events"), get(s::events))
        .route(&api("/submissions/{id}/cancel"), post(s::cancel))
        .route(&api("/submissions/{id}/results"), get(s::results))
        .route(&api("/submissions/{id}/comparisons"), get(s::comparisons))
        .route(&api("/bisections"), get(b::list))
        .route(&api("/bisections/{id}"), get(b::show))
        .route(&api("/bisections/{id}/cancel"), post(b::cancel))
        .route(&api("/watches"), post(w::create).get(w::list))
        .route(&api("/watches/{id}"), get(w::show).delete(w::remove))
        .route(&api("/regressions"), get(g::list))
        .route(&api("/regressions/{id}/state"), post(g::triage))
}

/// The HTML dashboard.
fn dashboard_routes() -> Router<AppState> {
    Router::new()
        .route("/", get(dashboard::overview::page))
        .route("/submissions", get(submissions::pages::index))
        .route("/machines", get(dashboard::machines::page))
        .route("/jobs/{id}/log", get(dashboard::machines::job_log))
        .route("/trends", get(dashboard::trends::page))
        .route("/submissions/{id}", get(submissions::pages::submission))
        .route(
            "/submissions/{id}/compare",
            get(submissions::pages::compare::page),
        )
        .route("/agents", get(agents::pages::agents))
        .route("/bisections", get(bisect::pages::list))
        .route("/bisections/{id}", get(bisect::pages::show))
        .route("/watches", get(watches::pages::watches))
}

/// Dashboard sign-in and sign-out, and the forms that change things (a
/// signed-in user with the session's CSRF token).
fn access_routes() -> Router<AppState> {
    use access::pages as a;
    use submissions::pages::forms as s;
    Router::new()
        .route("/signin", get(a::form).post(a::sign_in))
        .route("/signout", post(a::sign_out))
        .route("/submit", get(s::form).post(s::submit))
        .route("/submissions/{id}/cancel", post(s::cancel))
        .route("/submissions/{id}/resubmit", post(s::resubmit))
        .route("/regressions", get(regressions::pages::list))
        .route("/regressions/{id}", get(regressions::pages::show))
        .route("/regressions/{id}/state", post(regressions::pages::triage))
}

/// Regression reports: pages, mbox download, JSON (open), an operator's
/// resend (user token, or the page's form: a session with its CSRF token).
fn report_routes() -> Router<AppState> {
    use crate::mail::pages as p;
    Router::new()
        .route("/reports", get(p::list_page))
        .route("/reports/{message_id}", get(p::show_page))
        .route("/reports/{message_id}/mbox", get(p::mbox))
        .route("/reports/{message_id}/resend", post(p::resend_form))
        .route(
            "/archive/{day}/{message_id}",
            get(crate::mail::materials::materials),
        )
        .route(&api("/reports"), get(p::list_json))
        .route(&api("/reports/{message_id}"), get(p::show_json))
        .route(&api("/reports/{message_id}/resend"), post(p::resend_json))
}

/// Unauthenticated: health and the API description.
fn meta_routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/api/openapi.json", get(openapi::document))
}

/// `/api/v1` + `path`.
pub fn api(path: &str) -> String {
    format!("{API_PREFIX}{path}")
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
    use super::*;

    /// A request that outlives the timeout gets 408 with the ErrorBody the
    /// OpenAPI document promises on every operation.
    #[tokio::test]
    async fn a_timed_out_api_request_gets_a_json_408() {
        use tower::ServiceExt;
        let slow = || async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "late"
        };
        // Not a literal `/api/...` route: server/tests/openapi.rs reads this
        // file's literals as the route table.
        let api_slow: &'static str = format!("{API_PREFIX}/slow").leak();
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
