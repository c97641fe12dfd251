//! One culprit, one mail. The same first bad commit found by several tbox
//! groups or jobs (x86_64 4K and arm64 64K, say) is one report with a
//! section per group and job, as 0-day's reports gather every test box that
//! saw a commit. A report names its culprit (the commit's `git patch-id`, or
//! the repository and commit when git gave none; UNIQUE in the outbox) and
//! waits [`MailConfig::gather`] before it is sent. A later finding of the
//! same culprit:
//!
//! - while the report has not left (pending and never tried, or stored with
//!   mail off), is rendered into it as a section: the mail that goes out
//!   names every group and job;
//! - once it has left, is a reply in the report's thread with the new
//!   section, not a second report.
//!
//! Either way the finding's regression links to that one report.

use kbot_core::report::{self, mbox, ReportData};

use super::outbox::{Facts, OutboxState};
use super::thread::{self, Answer, ThreadPlace};
use crate::config::mail::MailConfig;
use crate::db::Tx;
use crate::error::Result;
use crate::repos::StoredCommit;
use kbot_core::stats::MetricComparison;

/// The culprit key of a blamed commit: its patch-id, so the same change on
/// another tree is the same culprit, or else the commit itself.
pub fn key(patch_id: Option<&str>, repo_id: i64, sha: &str) -> String {
    match patch_id {
        Some(p) => format!("patch-id:{p}"),
        None => format!("commit:{repo_id}:{sha}"),
    }
}

#[derive(sqlx::FromRow)]
struct Standing {
    id: i64,
    message_id: String,
    subject: String,
    #[sqlx(try_from = "String")]
    state: OutboxState,
    attempts: i64,
    facts: Option<String>,
}

/// A finding of a culprit: the report it would be, where, and on which
/// commit with which KPI.
pub struct Finding<'a> {
    pub data: &'a ReportData,
    pub tbox_group: &'a str,
    pub head: &'a StoredCommit,
    pub kpi: &'a MetricComparison,
}

/// Adds a finding to the report that already blames `culprit`. Returns that
/// report's id, or `None` when no report blames it yet. The same change on
/// another commit is answered as found again ([`super::landed`]).
pub async fn join(
    tx: &mut Tx,
    config: &MailConfig,
    culprit: &str,
    finding: &Finding<'_>,
) -> Result<Option<i64>> {
    let Finding {
        data: finding_data,
        tbox_group,
        ..
    } = *finding;
    let standing: Option<Standing> = sqlx::query_as(
        "SELECT id, message_id, subject, state, attempts, facts FROM report_outbox \
         WHERE culprit = $1",
    )
    .bind(culprit)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(standing) = standing else {
        return Ok(None);
    };
    let facts = standing
        .facts
        .as_deref()
        .and_then(|f| serde_json::from_str::<Facts>(f).ok());
    if let Some(f) = facts
        .as_ref()
        .filter(|f| f.data.commit.sha != finding.head.sha)
    {
        found_elsewhere(tx, config, culprit, finding, standing.id).await?;
        tracing::info!(report = standing.id, reported = %f.data.commit.sha, "culprit found on another commit");
        return Ok(Some(standing.id));
    }
    let Some(mut facts) = facts else {
        // A report written before facts were kept: the finding is linked to
        // it, and no mail can be rendered from it.
        tracing::warn!(
            report = standing.id,
            "report without facts: finding linked only"
        );
        return Ok(Some(standing.id));
    };
    let section = finding_data.as_section(tbox_group);
    if finding_data.identity_key == facts.data.identity_key
        || facts.data.covers(&facts.tbox_group, &section)
    {
        return Ok(Some(standing.id));
    }
    facts.data.other_impacts.push(section.clone());
    if unsent(&standing) && rewrite(tx, config, &standing, &facts).await? {
        tracing::info!(report = standing.id, %culprit, tbox_group, "finding added to the report");
        return Ok(Some(standing.id));
    }
    answer_in_thread(tx, config, &standing, &facts, finding_data, &section).await?;
    Ok(Some(standing.id))
}

/// The culprit's change on a commit other than the report's: it landed in
/// a tree or was posted again.
async fn found_elsewhere(
    tx: &mut Tx,
    config: &MailConfig,
    culprit: &str,
    finding: &Finding<'_>,
    report_id: i64,
) -> Result<()> {
    let Some(report) = super::landed::report_by_id(tx, report_id).await? else {
        return Ok(());
    };
    let tree = crate::repos::public_tree(config, &finding.data.tree, &finding.data.repo_url);
    let branches = [finding.data.branch.clone()];
    let landing = super::landed::Landing {
        commit: finding.head,
        tree: &tree,
        branches: &branches,
        patch_id: culprit.strip_prefix("patch-id:"),
        measured: finding.kpi,
    };
    super::landed::answer(tx, config, &landing, &report).await
}

/// Not handed to a relay yet, nor ever tried.
fn unsent(s: &Standing) -> bool {
    (s.state == OutboxState::Pending && s.attempts == 0) || s.state == OutboxState::MailOff
}

/// Renders the report again with its new section. False when a sender
/// claimed it meanwhile.
async fn rewrite(tx: &mut Tx, config: &MailConfig, s: &Standing, facts: &Facts) -> Result<bool> {
    let rendered = report::render(&facts.data, &config.report)?;
    let message = mbox::message(&rendered, &facts.addressing)?;
    let updated = sqlx::query(
        "UPDATE report_outbox SET message = $1, subject = $2, facts = $3 \
         WHERE id = $4 AND attempts = 0 AND state IN ($5, $6)",
    )
    .bind(&message)
    .bind(&rendered.subject)
    .bind(serde_json::to_string(facts).map_err(anyhow::Error::from)?)
    .bind(s.id)
    .bind(OutboxState::Pending.as_str())
    .bind(OutboxState::MailOff.as_str())
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

/// The report has left: the new section is a reply in its thread.
async fn answer_in_thread(
    tx: &mut Tx,
    config: &MailConfig,
    s: &Standing,
    facts: &Facts,
    finding: &ReportData,
    section: &report::OtherImpact,
) -> Result<()> {
    sqlx::query("UPDATE report_outbox SET facts = $1 WHERE id = $2")
        .bind(serde_json::to_string(facts).map_err(anyhow::Error::from)?)
        .bind(s.id)
        .execute(&mut **tx)
        .await?;
    let a = &facts.addressing;
    let mut recipients = a.to.iter().chain(&a.cc).cloned();
    let Some(to) = recipients.next() else {
        return Ok(());
    };
    let place = ThreadPlace {
        parent: s.message_id.clone(),
        parent_references: a.references.clone(),
        parent_subject: s.subject.clone(),
        to,
        cc: recipients.collect(),
    };
    let table = section
        .compare_table
        .as_ref()
        .map(|c| {
            format!(
                "{}: {}\n{}\n",
                c.tbox_group,
                section.machine,
                c.table.trim_end()
            )
        })
        .unwrap_or_default();
    let body = format!(
        "Hi,\n\n{} found the commit of this report on another test since it was sent:\n\n\
         {}\n\nDetails are as below:\n\n{table}{}",
        config.report.robot_name,
        report::render_impact_table(std::slice::from_ref(section)).trim_end(),
        thread::signature(config)
    );
    let answer = Answer {
        place: &place,
        identity_key: format!("also/{}/{}", s.id, finding.identity_key),
        body,
        submission_id: None,
    };
    thread::enqueue_answer(tx, config, &answer).await?;
    Ok(())
}
