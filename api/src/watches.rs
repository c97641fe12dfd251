//! Wire types of watches, shared by the REST handlers and the CLI.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

crate::wire_enum! {
    /// Whether a watch (or a list) is read.
    pub enum SourceState {
        Active = "active",
        Removed = "removed",
    }
}

crate::wire_enum! {
    /// Something a watch did or saw.
    pub enum WatchEventKind {
        Created = "created",
        Removed = "removed",
        /// The mirror could not be fetched.
        FetchFailed = "fetch_failed",
        /// A pair of the new head against the last good one was queued.
        Submitted = "submitted",
        /// The head ran: it is the next base.
        Tested = "tested",
        /// The head did not run: the next head is compared against the last good one.
        HeadFailed = "head_failed",
        Cancelled = "cancelled",
    }
}

/// `POST /api/v1/watches`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WatchCreate {
    pub repo: String,
    pub branch: String,
    /// The LKP-style job file run on every new head, as YAML text.
    pub job_file: String,
    /// Pin the watch's pairs to a machine class (else the first agent's).
    pub tbox_group: Option<String>,
    /// How often the mirror is fetched (default 600 s).
    pub interval_secs: Option<u32>,
    /// Cap on runs per side of each pair (default 10).
    pub max_runs: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WatchView {
    pub id: i64,
    pub repo: String,
    pub branch: String,
    pub job_name: String,
    pub tbox_group: Option<String>,
    pub interval_secs: u32,
    pub max_runs: u32,
    pub state: SourceState,
    /// The branch head at the last fetch.
    pub last_seen: Option<String>,
    /// The last head submitted.
    pub last_tested: Option<String>,
    /// The last head that built, booted and ran: the next pair's base.
    pub last_good: Option<String>,
    /// The watch pair in progress.
    pub current_submission: Option<i64>,
    pub last_error: Option<String>,
    /// Unix milliseconds.
    pub checked_at: Option<i64>,
    pub created_at: i64,
}

/// Something a watch did or saw.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WatchEvent {
    /// Unix milliseconds.
    pub at: i64,
    pub kind: WatchEventKind,
    pub detail: String,
}

/// `GET /api/v1/watches/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WatchDetail {
    pub watch: WatchView,
    pub events: Vec<WatchEvent>,
}
