//! kbot-api: every wire type of kbot's REST API under [`API_PREFIX`], with
//! its serde and OpenAPI (`utoipa::ToSchema`) derives, shared by the server,
//! the agent, the command line and the load tool.
//!
//! - [`agent`]: the agent protocol (enrol, lease, heartbeat, events, results).
//! - [`repos`], [`submissions`], [`bisections`], [`watches`], [`lists`],
//!   [`reports`], [`regressions`]: the user API, one module per resource.
//! - [`ErrorBody`]: the body of every error answer.
//! - `client` (feature `client`): `AgentClient` and `UserClient`, the one
//!   typed HTTP client of each protocol.
//!
//! Times on the wire are Unix milliseconds (`i64`) unless a field says
//! otherwise.

pub mod agent;
pub mod bisections;
pub mod builds;
#[cfg(feature = "client")]
pub mod client;
pub mod lists;
pub mod regressions;
pub mod reports;
pub mod repos;
pub mod submissions;
pub mod watches;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Prefix of every REST route.
pub const API_PREFIX: &str = "/api/v1";

/// The body of every API error.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `bad_request`, `unauthorized`, `not_found`, `payload_too_large`, ...
    pub code: String,
    pub message: String,
}
