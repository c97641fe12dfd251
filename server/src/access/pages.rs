//! `/signin` and `/signout`.
//!
//! The sign-in form has no session yet to carry a CSRF token, so it uses a
//! double-submit cookie: `GET /signin` sets a random `kbot_signin` cookie
//! and puts the same value in the form; a post whose field and cookie
//! differ (a form on another site) is refused.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use askama::Template;
use axum::extract::{ConnectInfo, FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{AppendHeaders, IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;

use super::csrf::{same, CsrfForm, NoFields};
use super::password;
use super::session::{self, cookie, set_cookie};
use crate::auth::limit;
use crate::auth::random_hex;
use crate::error::{error_page, Error, HtmlError};
use crate::state::AppState;
use crate::web::render;

/// The sign-in form's double-submit cookie.
const SIGN_IN_COOKIE: &str = "kbot_signin";

#[derive(Template)]
#[template(path = "signin.html")]
struct SignInPage<'a> {
    name: &'a str,
    next: &'a str,
    csrf: &'a str,
    error: &'a str,
}

/// The client's address: the listener's peer, or behind a trusted proxy
/// the client it forwarded for (`access::proxy`). Absent when the router is
/// driven without a socket, as in unit tests.
pub struct ClientAddr(pub Option<IpAddr>);

impl FromRequestParts<AppState> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>();
        let proxies = &state.config.access.trusted_proxies;
        Ok(ClientAddr(
            peer.map(|c| proxies.client(c.0.ip(), &parts.headers)),
        ))
    }
}

#[derive(Debug, Deserialize)]
pub struct NextQuery {
    #[serde(default)]
    next: String,
}

/// Where to go after signing in: a path on this server only, never
/// another site (`//host` or `/\host` are other sites to a browser).
fn local_target(next: &str) -> &str {
    let local = next.starts_with('/') && !next.starts_with("//") && !next.starts_with("/\\");
    if local {
        next
    } else {
        "/"
    }
}

/// `GET /signin?next=PATH`
pub async fn form(State(state): State<AppState>, Query(q): Query<NextQuery>) -> Response {
    let token = random_hex();
    let page = SignInPage {
        name: "",
        next: local_target(&q.next),
        csrf: &token,
        error: "",
    };
    respond(&state, StatusCode::OK, &page, &token)
}

/// The sign-in page with its double-submit cookie.
fn respond(state: &AppState, status: StatusCode, page: &SignInPage<'_>, token: &str) -> Response {
    let secure = state.config.access.secure_cookies;
    match render(page) {
        Ok(html) => (
            status,
            [(
                header::SET_COOKIE,
                set_cookie(SIGN_IN_COOKIE, token, 3600, secure),
            )],
            html,
        )
            .into_response(),
        Err(err) => err.into_response(),
    }
}

#[derive(Debug, Deserialize)]
pub struct SignInForm {
    name: String,
    password: String,
    #[serde(default)]
    next: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /signin`: a session cookie and back to `next`, the form again with
/// an error, 403 without the form's token, or 429 past the failure limit.
pub async fn sign_in(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    headers: HeaderMap,
    Form(f): Form<SignInForm>,
) -> Response {
    let expected = cookie(&headers, SIGN_IN_COOKIE).unwrap_or_default();
    if expected.is_empty() || !same(f.csrf.as_bytes(), expected.as_bytes()) {
        return HtmlError(Error::Forbidden(
            "the sign-in form has no valid CSRF token: reload the page and try again",
        ))
        .into_response();
    }
    let keys = limit::keys(client, &f.name);
    if let Err(wait) = state.sign_in_limiter.check(&keys, Instant::now()) {
        return too_many(wait);
    }
    let user = match password::check(&state.db, &f.name, &f.password).await {
        Ok(user) => user,
        Err(err) => return HtmlError(err).into_response(),
    };
    let Some(user) = user else {
        state.sign_in_limiter.record_failure(&keys, Instant::now());
        tracing::info!(name = %f.name, client = ?client, "sign-in refused");
        let page = SignInPage {
            name: &f.name,
            next: local_target(&f.next),
            csrf: expected,
            error: "Wrong user name or password.",
        };
        return respond(&state, StatusCode::UNAUTHORIZED, &page, expected);
    };
    let ttl = state.config.access.session_ttl;
    let id = match session::create(&state.db, user.user_id, ttl).await {
        Ok(id) => id,
        Err(err) => return HtmlError(err).into_response(),
    };
    tracing::info!(user = %user.user_name, client = ?client, "signed in");
    let secure = state.config.access.secure_cookies;
    // Two Set-Cookie headers: a plain header array would keep the last.
    let cookies = AppendHeaders([
        (
            header::SET_COOKIE,
            set_cookie(session::COOKIE, &id, ttl.as_secs(), secure),
        ),
        (
            header::SET_COOKIE,
            set_cookie(SIGN_IN_COOKIE, "", 0, secure),
        ),
    ]);
    (cookies, Redirect::to(local_target(&f.next))).into_response()
}

/// The 429 page, with `Retry-After`.
fn too_many(wait: std::time::Duration) -> Response {
    let minutes = wait.as_secs().div_ceil(60).max(1);
    let message = format!(
        "Too many failed sign-ins from this address or for this user. Try again in {minutes} minute(s)."
    );
    let mut response = error_page(StatusCode::TOO_MANY_REQUESTS, &message);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, wait.as_secs().max(1).into());
    response
}

/// `POST /signout`: ends the session and clears the cookie.
pub async fn sign_out(State(state): State<AppState>, f: CsrfForm<NoFields>) -> Response {
    if let Err(err) = session::delete(&state.db, f.session.id).await {
        return HtmlError(err).into_response();
    }
    tracing::info!(user = %f.session.user_name, "signed out");
    let clear = set_cookie(session::COOKIE, "", 0, state.config.access.secure_cookies);
    ([(header::SET_COOKIE, clear)], Redirect::to("/")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_after_sign_in() {
        assert_eq!(local_target("/submissions/3"), "/submissions/3");
        assert_eq!(local_target("//evil.example/x"), "/");
        assert_eq!(local_target("/\\evil.example"), "/");
        assert_eq!(local_target("https://evil.example"), "/");
        assert_eq!(local_target(""), "/");
    }
}
