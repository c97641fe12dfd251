//! Who may change things from the web: users with argon2-hashed passwords
//! (`kbot-server user add`), browser sessions in a cookie, a CSRF token on
//! every form, rate-limited sign-in, and, when configured, sign-in before
//! reading. API tokens ([`crate::auth`]) are separate and keep working.
//!
//! - [`config`]: the `KBOT_*` settings (kept in [`crate::config`]);
//! - [`password`]: hashing, checking, adding a user;
//! - [`session`]: the cookie, the `web_sessions` table, the middleware that
//!   loads a request's session, and the [`SignedIn`] extractor;
//! - [`csrf`]: the [`CsrfForm`] extractor every dashboard form posts through;
//! - [`limit`]: failed sign-ins per client address and per user name (kept
//!   in [`crate::auth`], which the server's state holds);
//! - [`pages`]: `/signin` and `/signout`.

pub mod csrf;
pub mod pages;
pub mod password;
pub mod session;

pub use crate::auth::limit::{self, SignInLimiter};
pub use crate::config::access as config;
pub use crate::config::proxy;
pub use crate::config::{AccessArgs, AccessConfig};
pub use csrf::CsrfForm;
pub use session::{paths_for_viewer, viewer, Reader, Session, SignedIn};
