//! Wire types of regression reports and their delivery, shared by the REST
//! handlers, the dashboard and the `kbot-server` user CLI.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

crate::wire_enum! {
    /// What a report tells.
    pub enum ReportKind {
        /// A regression, bisected to its first bad commit.
        Regression = "regression",
        Improvement = "improvement",
        /// An answer in a posted series' thread (tested, does not build, ...).
        Answer = "answer",
    }
}

impl From<kbot_core::report::ChangeKind> for ReportKind {
    fn from(kind: kbot_core::report::ChangeKind) -> ReportKind {
        match kind {
            kbot_core::report::ChangeKind::Regression => ReportKind::Regression,
            kbot_core::report::ChangeKind::Improvement => ReportKind::Improvement,
        }
    }
}

crate::wire_enum! {
    /// Where a report's delivery is.
    pub enum OutboxState {
        /// Mail is off: written, never sent.
        MailOff = "mail_off",
        /// Waiting for its (next) attempt.
        Pending = "pending",
        /// A sender has it.
        Sending = "sending",
        /// Going to the relay.
        Handed = "handed",
        Sent = "sent",
        /// Its attempts are spent.
        Failed = "failed",
        /// Its sender stopped while handing it over: maybe delivered, not
        /// resent unless an operator does.
        Uncertain = "uncertain",
    }
}

impl OutboxState {
    /// Whether anyone may read a report in this state (its Message-ID, its
    /// text without recipients): it has left, or may have (`uncertain`), or
    /// it is never mailed (`mail_off`: the dashboard is its only copy). A
    /// report still waiting to leave is the signed-in users' alone, so
    /// nobody answers it before its recipients have it.
    pub fn is_public(self) -> bool {
        matches!(
            self,
            OutboxState::Sent | OutboxState::Handed | OutboxState::Uncertain | OutboxState::MailOff
        )
    }
}

/// A stored report as the dashboard and the API show it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StoredReport {
    pub id: i64,
    pub message_id: String,
    pub submission_id: Option<i64>,
    /// The bisection that found and verified the blamed commit.
    pub bisection_id: Option<i64>,
    pub kind: ReportKind,
    pub subject: String,
    pub recipients: Vec<String>,
    pub message: String,
    pub state: OutboxState,
    /// Delivery attempts made so far.
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub sent_at: Option<i64>,
    /// When a sender last began handing it to the relay (before DATA).
    pub handed_at: Option<i64>,
}

crate::wire_enum! {
    /// How one delivery attempt ended.
    pub enum AttemptOutcome {
        /// The relay took it.
        Sent = "sent",
        /// Refused for now: tried again later.
        Transient = "transient",
        /// Refused for good.
        Permanent = "permanent",
        /// Its sender stopped while handing it over.
        Uncertain = "uncertain",
    }
}

/// One recorded attempt.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Attempt {
    pub attempt: i64,
    pub sender: String,
    pub started_at: i64,
    pub finished_at: i64,
    pub outcome: AttemptOutcome,
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
