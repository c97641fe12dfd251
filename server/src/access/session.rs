//! Browser sessions: a random id in an HttpOnly, SameSite=Lax cookie (and
//! `Secure` behind TLS), its sha256 in `web_sessions` with the user and the
//! session's CSRF token.
//!
//! [`load`] runs before every handler: it finds the request's session, puts
//! it in the request's extensions for the extractors ([`SignedIn`],
//! [`super::csrf::CsrfForm`]) and, for the page templates, in a task-local
//! ([`viewer`]), so `base.html` can show who is signed in without every page
//! struct carrying a field for it.

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::response::{IntoResponse, Redirect, Response};

use crate::auth::{hash_token, random_hex, UserAuth};
use crate::db::Db;
use crate::error::{Error, HtmlError, Result};
use crate::state::AppState;
use crate::time::now_ms;

/// The session cookie's name.
pub const COOKIE: &str = "kbot_session";

/// A signed-in browser.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Session {
    pub id: i64,
    pub user_id: i64,
    #[sqlx(rename = "name")]
    pub user_name: String,
    /// What every form of this session must send back as `csrf`.
    pub csrf_token: String,
}

impl Session {
    /// The same user as the API sees it, for the code paths both share.
    pub fn user(&self) -> UserAuth {
        UserAuth {
            user_id: self.user_id,
            user_name: self.user_name.clone(),
        }
    }
}

/// The request's session, if any; [`load`] inserts it into the extensions.
#[derive(Debug, Clone)]
pub struct CurrentSession(pub Option<Session>);

/// Starts a session for `user_id`; returns the cookie value (only its hash
/// is stored).
pub async fn create(db: &Db, user_id: i64, ttl: std::time::Duration) -> Result<String> {
    let id = random_hex();
    let now = now_ms();
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
    // Expired sessions of anyone go when someone signs in: no sweeper task.
    sqlx::query("DELETE FROM web_sessions WHERE expires_at < $1")
        .bind(now)
        .execute(db.write())
        .await?;
    sqlx::query(
        "INSERT INTO web_sessions (token_hash, user_id, csrf_token, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(hash_token(&id))
    .bind(user_id)
    .bind(random_hex())
    .bind(now)
    .bind(now.saturating_add(ttl_ms))
    .execute(db.write())
    .await?;
    Ok(id)
}

/// The live session whose cookie value is `id`.
pub async fn find(db: &Db, id: &str) -> Result<Option<Session>> {
    Ok(sqlx::query_as::<_, Session>(
        "SELECT s.id, s.user_id, s.csrf_token, u.name FROM web_sessions s \
         JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1 AND s.expires_at > $2",
    )
    .bind(hash_token(id))
    .bind(now_ms())
    .fetch_optional(db.read())
    .await?)
}

/// Ends a session (sign-out).
pub async fn delete(db: &Db, session_id: i64) -> Result<()> {
    sqlx::query("DELETE FROM web_sessions WHERE id = $1")
        .bind(session_id)
        .execute(db.write())
        .await?;
    Ok(())
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim_matches('"'))
}

/// A `Set-Cookie` value: HttpOnly (no script reads it), SameSite=Lax (not
/// sent on cross-site POSTs), path `/`, `Secure` when the server is behind
/// TLS. `max_age` 0 deletes the cookie.
pub fn set_cookie(name: &str, value: &str, max_age_secs: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let text =
        format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_secs}{secure}");
    // Names and values are ours: hex and fixed names, always valid.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

tokio::task_local! {
    static VIEWER: Option<Session>;
}

/// Who is signed in on the request being rendered (`None` outside one).
/// Called by `base.html` and by the templates with forms; a page must be
/// rendered on its request's task (not in `spawn_blocking`) to see it.
pub fn viewer() -> Option<Session> {
    VIEWER.try_with(Clone::clone).ok().flatten()
}

/// Text as the page's reader may see it: the paths of the server's and the
/// agents' disks (work directories, QEMU lines, archives) only for a
/// signed-in operator; anyone else sees each path's last component.
pub fn paths_for_viewer(text: &str) -> String {
    match viewer() {
        Some(_) => text.to_owned(),
        None => crate::web::without_paths(text),
    }
}

/// Middleware: finds the request's session, enforces the sign-in wall for
/// reading when it is on, and runs the handler with the session in scope.
pub async fn load(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let (mut parts, body) = req.into_parts();
    let session = match cookie(&parts.headers, COOKIE) {
        Some(id) => match find(&state.db, id).await {
            Ok(found) => found,
            Err(err) => return HtmlError(err).into_response(),
        },
        None => None,
    };
    if state.config.access.read_requires_sign_in && session.is_none() {
        if let Some(refused) = wall(&state, &mut parts).await {
            return refused;
        }
    }
    parts.extensions.insert(CurrentSession(session.clone()));
    VIEWER
        .scope(session, next.run(Request::from_parts(parts, body)))
        .await
}

/// Paths anyone may reach with reading closed: signing in, health, the API
/// description, and the agents' own endpoints (agent tokens guard those,
/// and `/git/`, where agents fetch series: its handler checks a [`Reader`]).
fn open_path(path: &str) -> bool {
    path == "/signin"
        || path == "/healthz"
        || path == "/api/openapi.json"
        || path.starts_with("/api/v1/agents/")
        || path.starts_with("/api/v1/jobs/")
        || path.starts_with("/git/")
}

/// With reading closed and no session: `None` lets the request through (an
/// open path, or an API call with a user token), else the refusal: the API's
/// 401, or for a page the way to the sign-in page.
async fn wall(state: &AppState, parts: &mut Parts) -> Option<Response> {
    let path = parts.uri.path();
    if open_path(path) {
        return None;
    }
    if path.starts_with("/api/") {
        return UserAuth::from_request_parts(parts, state)
            .await
            .err()
            .map(IntoResponse::into_response);
    }
    Some(to_sign_in(&parts.uri))
}

/// A redirect to the sign-in page that comes back to `uri` afterwards.
fn to_sign_in(uri: &axum::http::Uri) -> Response {
    let back = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let query = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("next", back)
        .finish();
    Redirect::to(&format!("/signin?{query}")).into_response()
}

/// A handler argument: who is reading. A session or a user token is a
/// [`Reader::User`], an agent token a [`Reader::Agent`]; no credential, or
/// one that is not valid, is [`Reader::Anonymous`] (the handler decides
/// what that may see).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    Anonymous,
    User,
    Agent,
}

impl FromRequestParts<AppState> for Reader {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> std::result::Result<Self, Self::Rejection> {
        let signed_in = parts
            .extensions
            .get::<CurrentSession>()
            .is_some_and(|s| s.0.is_some());
        if signed_in {
            return Ok(Reader::User);
        }
        let agent_token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains(crate::auth::AGENT_TOKEN_PREFIX));
        let reader = if agent_token {
            crate::auth::AgentAuth::from_request_parts(parts, state)
                .await
                .map(|_| Reader::Agent)
        } else {
            UserAuth::from_request_parts(parts, state)
                .await
                .map(|_| Reader::User)
        };
        Ok(reader.unwrap_or(Reader::Anonymous))
    }
}

/// A handler argument: the signed-in user. Without a session a page (GET)
/// sends the browser to sign in; a form post gets 403.
#[derive(Debug, Clone)]
pub struct SignedIn(pub Session);

impl FromRequestParts<AppState> for SignedIn {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &AppState,
    ) -> std::result::Result<Self, Response> {
        let session = parts
            .extensions
            .get::<CurrentSession>()
            .and_then(|s| s.0.clone());
        match session {
            Some(session) => Ok(SignedIn(session)),
            None if parts.method == Method::GET => Err(to_sign_in(&parts.uri)),
            None => Err(HtmlError(Error::Forbidden("sign in first")).into_response()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; kbot_session=abc"),
        );
        headers.append(header::COOKIE, HeaderValue::from_static("b=2"));
        assert_eq!(cookie(&headers, COOKIE), Some("abc"));
        assert_eq!(cookie(&headers, "b"), Some("2"));
        assert_eq!(cookie(&headers, "kbot"), None);
    }

    #[test]
    fn the_cookie_is_http_only_and_same_site_and_secure_when_asked() {
        let plain = set_cookie(COOKIE, "abc", 60, false);
        let plain = plain.to_str().expect("ascii");
        assert!(
            plain.contains("HttpOnly") && plain.contains("SameSite=Lax"),
            "{plain}"
        );
        assert!(!plain.contains("Secure"), "{plain}");
        let tls = set_cookie(COOKIE, "abc", 60, true);
        assert!(tls.to_str().expect("ascii").ends_with("; Secure"));
    }

    #[test]
    fn the_wall_leaves_sign_in_and_agents_open() {
        assert!(open_path("/signin"));
        assert!(open_path("/api/v1/agents/lease"));
        assert!(open_path("/git/linux.git/info/refs"));
        assert!(!open_path("/"));
        assert!(!open_path("/api/v1/submissions"));
    }
}
