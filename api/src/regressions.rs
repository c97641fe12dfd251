//! Wire types of regressions and their triage, shared by the REST handlers
//! and the dashboard.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::bisections::BisectionState;
use crate::reports::OutboxState;

crate::wire_enum! {
    /// A regression's triage state.
    pub enum TriageState {
        New = "new",
        Confirmed = "confirmed",
        Reported = "reported",
        Fixed = "fixed",
        Invalid = "invalid",
        WontFix = "wont_fix",
        Duplicate = "duplicate",
    }
}

/// A regression with what it links to, as pages and the API show it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegressionRow {
    pub id: i64,
    pub repo: String,
    /// The pair whose comparison found it.
    pub submission_id: i64,
    pub metric: String,
    pub tbox_group: String,
    /// Head against base, in percent.
    pub change_pct: Option<f64>,
    pub state: TriageState,
    /// The pair's head commit.
    pub head_sha: String,
    pub head_subject: String,
    /// The bisection it started, and that bisection's state.
    pub bisection_id: Option<i64>,
    pub bisection_state: Option<BisectionState>,
    /// Its regression report, when one was written. The Message-ID is
    /// `null` for a reader who is not signed in until the report is public
    /// (sent, or written while mail is off): see `report_state`.
    pub report_id: Option<i64>,
    pub report_message_id: Option<String>,
    pub report_subject: Option<String>,
    /// The report's delivery state.
    #[serde(default)]
    pub report_state: Option<OutboxState>,
    /// The regression this one duplicates (`#kbot dup:`), when it says.
    #[serde(default)]
    pub duplicate_of: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A triage decision.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TriageRequest {
    pub state: TriageState,
    /// Why, for the regression's history.
    #[serde(default)]
    pub note: String,
}
