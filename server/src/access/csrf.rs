//! CSRF protection for every form the dashboard posts: a per-session token
//! in a hidden `csrf` field, compared with the session's. A post without it,
//! or with another session's, is refused with 403 before the handler runs.
//! (SameSite=Lax already keeps the cookie off cross-site posts; the token is
//! the check that does not depend on the browser.)

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::response::{IntoResponse, Response};
use axum::Form;
use serde::de::DeserializeOwned;

use super::session::{Session, SignedIn};
use crate::error::{Error, HtmlError};
use crate::state::AppState;

/// The form field every dashboard form carries.
pub const FIELD: &str = "csrf";

/// A handler argument: the signed-in user and the posted form `T`, whose
/// CSRF token matched the session's.
pub struct CsrfForm<T> {
    pub session: Session,
    pub form: T,
}

impl<T> FromRequest<AppState> for CsrfForm<T>
where
    T: DeserializeOwned + Send,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let SignedIn(session) = SignedIn::from_request_parts(&mut parts, state).await?;
        let limit = state.config.max_upload_bytes;
        let bytes = axum::body::to_bytes(body, limit)
            .await
            .map_err(|_| HtmlError(Error::PayloadTooLarge).into_response())?;
        if !token_matches(&bytes, &session.csrf_token) {
            tracing::warn!(user = %session.user_name, path = %parts.uri.path(), "form without a valid CSRF token");
            return Err(HtmlError(Error::Forbidden(
                "this form has no valid CSRF token: reload the page and submit it again",
            ))
            .into_response());
        }
        let req = Request::from_parts(parts, Body::from(bytes));
        let Form(form) = Form::<T>::from_request(req, state)
            .await
            .map_err(|e| HtmlError(Error::BadRequest(e.body_text())).into_response())?;
        Ok(CsrfForm { session, form })
    }
}

/// A form with nothing but its CSRF token (sign-out, cancel, resubmit).
#[derive(Debug, serde::Deserialize)]
pub struct NoFields {}

/// Whether the url-encoded `body` has a `csrf` field equal to `expected`.
fn token_matches(body: &[u8], expected: &str) -> bool {
    url::form_urlencoded::parse(body)
        .find(|(key, _)| key == FIELD)
        .is_some_and(|(_, sent)| same(sent.as_bytes(), expected.as_bytes()))
}

/// Equality in time independent of where the first difference is.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sessions_token_passes() {
        assert!(token_matches(b"a=1&csrf=abc123&b=2", "abc123"));
        assert!(!token_matches(b"a=1&b=2", "abc123"));
        assert!(!token_matches(b"csrf=abc124", "abc123"));
        assert!(!token_matches(b"csrf=", "abc123"));
        assert!(!token_matches(b"csrf=abc1234", "abc123"));
    }
}
