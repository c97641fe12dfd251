//! A reported change found again on another commit (the same `git
//! patch-id`): no second report. A new version of a posted patch hears so in
//! its own thread ([`super::thread::enqueue_still_there`]); a commit on a
//! tree (the patch landed, or was picked to another branch) is announced in
//! the report's thread: where it landed (tree, branches, commit, author,
//! committer) and what the job measured there, To the report's addressee
//! (the original author), Cc the report's other recipients, the committer
//! and the lists that follow those branches, as 0-day follows a patch into
//! a tree. Either way the finding's regression links to the report.

use kbot_core::report::mbox;
use kbot_core::stats::MetricComparison;

use super::outbox::Facts;
use super::thread::{self, Answer, ThreadPlace};
use crate::config::mail::MailConfig;
use crate::db::Tx;
use crate::error::Result;
use crate::repos::StoredCommit;

/// Where the change was found again and what was measured there.
pub struct Landing<'a> {
    pub commit: &'a StoredCommit,
    /// The tree's URL, credentials removed.
    pub tree: &'a str,
    /// The tree's branches that hold the commit.
    pub branches: &'a [String],
    pub patch_id: Option<&'a str>,
    /// The commit against its parent (or the pair that found it).
    pub measured: &'a MetricComparison,
}

/// A regression report that stands.
#[derive(sqlx::FromRow)]
pub struct StandingReport {
    pub id: i64,
    pub message_id: String,
    pub subject: String,
    /// To first.
    #[sqlx(try_from = "String")]
    pub recipients: super::recipients::Recipients,
    /// What it was rendered from (reports before facts were kept have none).
    pub facts: Option<String>,
}

const STANDING: &str =
    "SELECT id, message_id, subject, recipients, facts FROM report_outbox WHERE kind = 'regression'";

/// The report bisection `bisection_id` wrote.
pub async fn report_of_bisection(tx: &mut Tx, bisection_id: i64) -> Result<Option<StandingReport>> {
    Ok(sqlx::query_as(&format!(
        "{STANDING} AND bisection_id = $1 ORDER BY id LIMIT 1"
    ))
    .bind(bisection_id)
    .fetch_optional(&mut **tx)
    .await?)
}

/// The report with outbox id `id`.
pub async fn report_by_id(tx: &mut Tx, id: i64) -> Result<Option<StandingReport>> {
    Ok(sqlx::query_as(&format!("{STANDING} AND id = $1"))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?)
}

/// Answers a finding of `report`'s change on `landing.commit`: in the
/// posted patch's own thread when the commit was read on a list, else in
/// the report's thread. Queued once per commit and report.
pub async fn answer(
    tx: &mut Tx,
    config: &MailConfig,
    landing: &Landing<'_>,
    report: &StandingReport,
) -> Result<()> {
    let sha = &landing.commit.sha;
    if thread::patch_thread(tx, config, sha).await?.is_some() {
        return thread::enqueue_still_there(tx, config, sha, &report.message_id, &report.subject)
            .await;
    }
    let lists = super::followers::of_branches(tx, landing.commit.repo_id, landing.branches).await?;
    let place = report_place(report, landing.commit, config.cc_committer, &lists);
    let answer = Answer {
        place: &place,
        identity_key: format!("landed/{sha}/{}", report.id),
        body: body(config, landing, report),
        submission_id: None,
    };
    thread::enqueue_answer(tx, config, &answer).await?;
    tracing::info!(report = report.id, %sha, "a reported change found on another commit");
    Ok(())
}

/// The report's place as a parent, the committer and the tree's lists
/// added to its Cc.
fn report_place(
    report: &StandingReport,
    commit: &StoredCommit,
    cc_committer: bool,
    lists: &[String],
) -> ThreadPlace {
    let addressing = report
        .facts
        .as_deref()
        .and_then(|f| serde_json::from_str::<Facts>(f).ok())
        .map(|f| f.addressing);
    let (mut people, references) = match addressing {
        Some(a) => (a.to.into_iter().chain(a.cc).collect(), a.references),
        None => (
            report.recipients.mailboxes().collect::<Vec<_>>(),
            Vec::new(),
        ),
    };
    let view = &commit.view;
    if cc_committer && !view.committer_email.trim().is_empty() {
        people.push(mbox::Mailbox::new(
            view.committer_name.clone(),
            view.committer_email.clone(),
        ));
    }
    people.extend(lists.iter().map(|l| mbox::Mailbox::new("", l.clone())));
    let mut people = people.into_iter();
    let to = people
        .next()
        .unwrap_or_else(|| mbox::Mailbox::new("", String::new()));
    ThreadPlace {
        parent: report.message_id.clone(),
        parent_references: references,
        parent_subject: report.subject.clone(),
        to,
        cc: people.collect(),
    }
}

fn body(config: &MailConfig, landing: &Landing<'_>, report: &StandingReport) -> String {
    let view = &landing.commit.view;
    let branches = if landing.branches.is_empty() {
        "(none holds it now)".to_owned()
    } else {
        landing.branches.join(", ")
    };
    let closes = config.report.closes_url(&report.message_id);
    let same = landing
        .patch_id
        .map(|p| format!(" (the same `git patch-id`, {p})"))
        .unwrap_or_default();
    format!(
        "Hi,\n\nthe change this report is about has landed{same}:\n\n\
         tree:      {tree}\nbranch:    {branches}\ncommit:    {sha} (\"{subject}\")\n\
         author:    {author} <{author_email}>\ncommitter: {committer} <{committer_email}>\n\n\
         {robot} ran the job there, the commit against its parent:\n\n    {line}\n\n\
         The report stands and no new one is sent. If you fix the issue in a separate \
         patch/commit, kindly add following tags\n\
         | Reported-by: {identity}\n| Closes: {closes}\n{signature}",
        tree = landing.tree,
        sha = view.sha,
        subject = view.subject,
        author = view.author_name,
        author_email = view.author_email,
        committer = view.committer_name,
        committer_email = view.committer_email,
        robot = config.report.robot_name,
        line = measured_line(landing.measured),
        identity = config.report.identity(),
        signature = thread::signature(config),
    )
}

/// `metric: 1234 -> 1012 (-18.0%, 3 and 3 runs)`.
fn measured_line(m: &MetricComparison) -> String {
    format!(
        "{}: {:.6} -> {:.6} ({:+.1}{}, {} and {} runs)",
        m.metric,
        m.base.mean,
        m.head.mean,
        m.change,
        if m.change_is_absolute { "" } else { "%" },
        m.base.n,
        m.head.n
    )
}
