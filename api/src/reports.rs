//! Wire types of regression reports and their delivery, shared by the REST
//! handlers, the dashboard and the `kbot-server` user CLI.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A stored report as the dashboard and the API show it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StoredReport {
    pub id: i64,
    pub message_id: String,
    pub submission_id: Option<i64>,
    /// The bisection that found and verified the blamed commit.
    pub bisection_id: Option<i64>,
    pub kind: String,
    pub subject: String,
    pub recipients: Vec<String>,
    pub message: String,
    /// `mail_off` (not sent), `pending`, `sending`, `handed` (going to the
    /// relay), `sent`, `failed`, or `uncertain` (its sender stopped while
    /// handing it over: maybe delivered, not resent unless an operator does).
    pub state: String,
    /// Delivery attempts made so far.
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub sent_at: Option<i64>,
    /// When a sender last began handing it to the relay (before DATA).
    pub handed_at: Option<i64>,
}

/// One recorded attempt.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Attempt {
    pub attempt: i64,
    pub sender: String,
    pub started_at: i64,
    pub finished_at: i64,
    pub outcome: String,
    pub detail: String,
}

/// `GET /api/v1/reports/{id}`: a report and its delivery attempts.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReportDetail {
    #[serde(flatten)]
    pub report: StoredReport,
    /// Every delivery attempt, oldest first.
    pub delivery: Vec<Attempt>,
}
