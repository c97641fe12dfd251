//! A reported regression checked again on other commits: `#kbot retest`
//! (the first bad commit against its base once more), `#kbot test` (a fix
//! against the first bad commit) and a `Closes:` commit on a watched tree.
//! The pair runs the regression's own atomic job on its tbox group, as kind
//! `verify`: judged here, never reported or bisected by itself.

use kbot_api::regressions::TriageState;
use kbot_core::metrics::Impact;
use kbot_core::stats::Outcome;

use crate::comparisons;
use crate::db::{Db, Tx};
use crate::error::{Error, Result};
use crate::jobs::lifecycle::Pinned;
use crate::mail::recipients::Recipients;
use crate::mail::thread::ThreadPlace;
use crate::repos::{self, RepoRow, StoredCommit};
use crate::state::AppState;
use crate::submissions::{self, NewPair};

/// A regression a kbot report is about (a report of one culprit found on
/// several tbox groups or jobs is about each of their regressions).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Reported {
    pub regression_id: i64,
    pub metric: String,
    /// The regression's own job (rechecks run it on its tbox group).
    pub atomic_job_id: i64,
    pub tbox_group: String,
    #[sqlx(try_from = "String")]
    pub state: TriageState,
    pub repo_id: i64,
    /// The report's pair: the blamed (first bad) commit and its base.
    pub base_commit_id: i64,
    pub head_commit_id: i64,
    pub report_id: i64,
    pub report_message_id: String,
    pub report_subject: String,
    #[sqlx(try_from = "String")]
    pub report_recipients: Recipients,
    pub report_created_at: i64,
}

const REPORTED_SELECT: &str = "SELECT g.id AS regression_id, g.metric, g.atomic_job_id, \
     g.tbox_group, g.state, g.repo_id, s.base_commit_id, s.head_commit_id, o.id AS report_id, \
     o.message_id AS report_message_id, o.subject AS report_subject, \
     o.recipients AS report_recipients, o.created_at AS report_created_at \
     FROM report_outbox o \
     JOIN regressions g ON g.report_id = o.id \
     JOIN submissions s ON s.id = o.submission_id";

/// Ids asked for in one query (under SQLite's and PostgreSQL's bind limits).
const IDS_PER_QUERY: usize = 1000;

/// The regression behind the nearest of `ids` (most preferred first) that
/// is a kbot regression report: one `IN (...)` query per thousand ids,
/// however many a mail's References carries.
pub async fn by_message_ids(db: &Db, ids: &[String]) -> Result<Option<Reported>> {
    for chunk in ids.chunks(IDS_PER_QUERY) {
        let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "{REPORTED_SELECT} WHERE o.kind = 'regression' AND o.atomic_job_id IS NOT NULL \
             AND o.message_id IN ({}) ORDER BY g.id",
            marks.join(", ")
        );
        let mut q = sqlx::query_as::<_, Reported>(&sql);
        for id in chunk {
            q = q.bind(id);
        }
        let found = q.fetch_all(db.read()).await?;
        let nearest = chunk
            .iter()
            .find_map(|id| found.iter().find(|r| &r.report_message_id == id));
        if let Some(r) = nearest {
            return Ok(Some(r.clone()));
        }
    }
    Ok(None)
}

/// Regressions still open whose report went out: what a fix can close.
pub async fn open(db: &Db) -> Result<Vec<Reported>> {
    Ok(sqlx::query_as::<_, Reported>(&format!(
        "{REPORTED_SELECT} WHERE o.kind = 'regression' AND o.atomic_job_id IS NOT NULL \
         AND g.state IN ('new', 'confirmed', 'reported') ORDER BY g.id"
    ))
    .fetch_all(db.read())
    .await?)
}

pub async fn by_regression(db: &Db, regression_id: i64) -> Result<Reported> {
    sqlx::query_as::<_, Reported>(&format!("{REPORTED_SELECT} WHERE g.id = $1 LIMIT 1"))
        .bind(regression_id)
        .fetch_optional(db.read())
        .await?
        .ok_or_else(|| Error::not_found("reported regression", regression_id))
}

impl Reported {
    /// The report's own place in its thread (answers about a fix go there).
    pub fn place(&self) -> ThreadPlace {
        let mut recipients = self.report_recipients.mailboxes();
        let to = recipients.next().unwrap_or_default();
        crate::mail::thread::place_of(
            self.report_message_id.clone(),
            "",
            self.report_subject.clone(),
            (String::new(), to.address),
            recipients.collect(),
            None,
        )
    }

    /// Whether `address` was a recipient of the report (an answer in its
    /// thread goes to no one else).
    pub fn was_sent_to(&self, address: &str) -> bool {
        self.report_recipients.contains(address)
    }

    /// The report's To: the author of the reported change.
    pub fn author(&self) -> &str {
        self.report_recipients.first().unwrap_or_default()
    }

    /// Whether a test of this regression is still worth machine time: not
    /// once it is fixed, invalid or a duplicate.
    pub fn is_closed(&self) -> bool {
        matches!(
            self.state,
            TriageState::Fixed | TriageState::Invalid | TriageState::Duplicate
        )
    }

    pub async fn repo(&self, db: &Db) -> Result<RepoRow> {
        repos::repo_by_id(db, self.repo_id).await
    }

    pub async fn first_bad(&self, state: &AppState) -> Result<StoredCommit> {
        repos::commit_by_id(state.db.read(), self.head_commit_id).await
    }

    pub async fn base(&self, state: &AppState) -> Result<StoredCommit> {
        repos::commit_by_id(state.db.read(), self.base_commit_id).await
    }
}

/// Queues `base` against `head` on the regression's job and tbox group.
pub async fn queue(
    state: &AppState,
    tx: &mut Tx,
    r: &Reported,
    base: &StoredCommit,
    head: &StoredCommit,
) -> Result<i64> {
    let job = crate::bisect::job_spec(&state.db, r.atomic_job_id).await?;
    let job_file: String = sqlx::query_scalar(
        "SELECT s.job_file FROM atomic_jobs a JOIN submissions s ON s.id = a.submission_id \
         WHERE a.id = $1",
    )
    .bind(r.atomic_job_id)
    .fetch_one(&mut **tx)
    .await?;
    let jobs = [job];
    let id = submissions::queue_pair(
        state,
        tx,
        NewPair {
            by: submissions::Submitter::Robot,
            repo_id: r.repo_id,
            job_file: &job_file,
            atomic_jobs: &jobs,
            skipped: &[],
            base,
            head,
            priority: 0,
            max_runs: 10,
            origin: crate::jobs::Origin::Recheck,
            bisect: false,
            watch_id: None,
            branch: None,
        },
    )
    .await?;
    if !r.tbox_group.is_empty() {
        let pinned = Pinned::Submission(id);
        crate::jobs::lifecycle::pin(tx, pinned, &r.tbox_group, None).await?;
    }
    Ok(id)
}

/// What a check pair found for the regressed metric.
#[derive(Debug, Clone)]
pub struct Found {
    pub outcome: Outcome,
    pub impact: Impact,
    /// Percent, head against base.
    pub change: f64,
    pub base_value: f64,
    pub head_value: f64,
}

/// The pair's verdict on `metric` once it ended; `Ok(None)` while it runs,
/// `Ok(Some(None))` when it ended without a comparison (a side did not run).
pub async fn found(
    state: &AppState,
    submission_id: i64,
    metric: &str,
) -> Result<Option<Option<Found>>> {
    let outcome = super::answers::pair_outcome(&state.db, submission_id).await?;
    if outcome.state == crate::jobs::SubmissionState::Active {
        return Ok(None);
    }
    let atomic_job_id = crate::bisect::atomic_job_of(&state.db, submission_id).await?;
    let pc = comparisons::compare_pair(state, atomic_job_id).await?;
    Ok(Some(pc.and_then(|pc| {
        pc.comparison
            .metrics
            .iter()
            .find(|m| m.metric == metric)
            .map(|m| Found {
                outcome: m.kbot.outcome,
                impact: m.impact,
                change: m.change,
                base_value: m.base.mean,
                head_value: m.head.mean,
            })
    })))
}

impl Found {
    /// `metric: 1234 -> 1456 (+18.0%, different: improvement)`.
    pub fn line(&self, metric: &str) -> String {
        format!(
            "{metric}: {:.6} -> {:.6} ({:+.1}%, {}: {})",
            self.base_value,
            self.head_value,
            self.change,
            self.outcome.as_str(),
            impact_word(self.impact)
        )
    }
}

fn impact_word(i: Impact) -> &'static str {
    match i {
        Impact::Regression => "regression",
        Impact::Improvement => "improvement",
        Impact::Undefined => "no direction",
        Impact::Unchanged => "unchanged",
    }
}
