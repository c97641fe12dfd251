//! Mails that answer in a list thread: a report of a patch kbot read on a
//! list goes In-Reply-To the patch mail, To its author, Cc the list and the
//! patch's other recipients, as 0-day answers posted patches; and the plain
//! answers (a series that does not apply, a build error, the reply to a
//! `#kbot` command) go the same way.
//!
//! Where each applied patch was posted is this module's own table
//! (`posted_patches`): the lists feature records it through
//! [`record_posted`] when it applies a series, and a report on one of those
//! commits finds its thread there by the commit, whatever queued the pair.
//! Mail reads none of the lists' tables, so it stays below them.

use kbot_core::report::{self, mbox, MessageId, PostedPatch, RenderedReport};

use super::outbox::{self, NewReport, OutboxState, ReportKind};
use super::recipients::Mailboxes;
use crate::config::mail::MailConfig;
use crate::db::Tx;
use crate::error::Result;
use crate::time::now_ms;

/// Where in a list thread a mail goes, and to whom.
#[derive(Debug, Clone)]
pub struct ThreadPlace {
    /// The mail answered (without `<>`).
    pub parent: String,
    /// The parent's References, oldest first (the parent not included).
    pub parent_references: Vec<String>,
    pub parent_subject: String,
    pub to: mbox::Mailbox,
    /// The list's address and the parent's other recipients.
    pub cc: Vec<mbox::Mailbox>,
}

impl ThreadPlace {
    /// The thread's first mail (its root as the parent knows it): the key
    /// of the sender's per-thread cap.
    pub fn thread(&self) -> &str {
        self.parent_references
            .first()
            .unwrap_or(&self.parent)
            .as_str()
    }

    /// The addressing of a reply to the parent, from the robot.
    pub fn addressing(&self, config: &MailConfig, date_ms: i64) -> mbox::Addressing {
        let mut references = self.parent_references.clone();
        references.retain(|r| r != &self.parent);
        references.push(self.parent.clone());
        let robot = &config.report.robot_address;
        let mut cc: Vec<mbox::Mailbox> = Vec::new();
        for m in &self.cc {
            let dup = cc
                .iter()
                .any(|c| c.address.eq_ignore_ascii_case(&m.address))
                || m.address.eq_ignore_ascii_case(&self.to.address)
                || m.address.eq_ignore_ascii_case(robot);
            if !dup && outbox::usable(&m.address) {
                cc.push(m.clone());
            }
        }
        // A posting's Cc is the poster's choice: kbot copies at most the
        // configured number of people (the list comes first), never a
        // stranger's whole address book.
        let room = usize::try_from(config.max_recipients).unwrap_or(usize::MAX);
        cc.truncate(room.saturating_sub(1));
        mbox::Addressing {
            from: mbox::Mailbox::new(config.report.robot_name.clone(), robot.clone()),
            to: Some(self.to.clone())
                .filter(|m| outbox::usable(&m.address))
                .into_iter()
                .collect(),
            cc,
            date_ms,
            in_reply_to: Some(self.parent.clone()),
            references,
        }
    }
}

/// A patch kbot applied from a list, as a report of its commit needs it.
#[derive(Debug, Clone)]
pub struct PatchThread {
    pub place: ThreadPlace,
    pub posted: PostedPatch,
}

/// A commit applied from a patch mail, and that mail as a thread needs it
/// (`posted_patches`, migration 0028): the lists feature records one when
/// it applies a series ([`record_posted`]); a report on the commit answers
/// in the mail's thread ([`patch_thread`]).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PostedRow {
    pub commit_sha: String,
    pub message_id: String,
    /// References, oldest first, one id a line.
    pub refs: String,
    pub subject: String,
    pub from_name: String,
    pub from_address: String,
    /// The patch mail's To and Cc.
    #[sqlx(try_from = "String")]
    pub recipients: Mailboxes,
    pub list_address: Option<String>,
    pub web_url: Option<String>,
    pub list_name: String,
    pub ref_name: Option<String>,
    pub base_sha: Option<String>,
    pub repo_name: String,
    pub repo_url: String,
    pub branch: String,
}

/// Records where each commit of an applied series was posted, in the
/// caller's transaction.
pub async fn record_posted(tx: &mut Tx, rows: &[PostedRow]) -> Result<()> {
    for r in rows {
        sqlx::query(
            "INSERT INTO posted_patches (commit_sha, message_id, refs, subject, from_name, \
                 from_address, recipients, list_address, web_url, list_name, ref_name, \
                 base_sha, repo_name, repo_url, branch) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
        )
        .bind(&r.commit_sha)
        .bind(&r.message_id)
        .bind(&r.refs)
        .bind(&r.subject)
        .bind(&r.from_name)
        .bind(&r.from_address)
        .bind(r.recipients.stored())
        .bind(r.list_address.as_deref())
        .bind(r.web_url.as_deref())
        .bind(&r.list_name)
        .bind(r.ref_name.as_deref())
        .bind(r.base_sha.as_deref())
        .bind(&r.repo_name)
        .bind(&r.repo_url)
        .bind(&r.branch)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// The thread of the patch mail `commit` was applied from, if it was (the
/// newest application of it).
pub async fn patch_thread(
    tx: &mut Tx,
    config: &MailConfig,
    commit: &str,
) -> Result<Option<PatchThread>> {
    let row = sqlx::query_as::<_, PostedRow>(
        "SELECT commit_sha, message_id, refs, subject, from_name, from_address, recipients, \
             list_address, web_url, list_name, ref_name, base_sha, repo_name, repo_url, branch \
         FROM posted_patches WHERE commit_sha = $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(commit)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.map(|r| {
        let posted = PostedPatch {
            url: format!(
                "{} {}",
                config.git_url(&r.repo_name),
                r.ref_name.as_deref().unwrap_or_default()
            ),
            base: format!(
                "{} {} ({})",
                crate::repos::public_tree(config, &r.repo_name, &r.repo_url),
                r.branch,
                r.base_sha.as_deref().unwrap_or("unknown")
            ),
            patch_link: patch_link(r.web_url.as_deref(), &r.list_name, &r.message_id),
            patch_subject: r.subject.clone(),
        };
        let place = place_of(
            r.message_id,
            &r.refs,
            r.subject,
            (r.from_name, r.from_address),
            r.recipients.0,
            r.list_address.as_deref(),
        );
        PatchThread { place, posted }
    }))
}

/// A message's place as a parent: its author To, the list and its other
/// recipients Cc.
pub fn place_of(
    message_id: String,
    refs: &str,
    subject: String,
    (from_name, from_address): (String, String),
    recipients: Vec<mbox::Mailbox>,
    list_address: Option<&str>,
) -> ThreadPlace {
    let mut cc: Vec<mbox::Mailbox> = list_address
        .filter(|a| !a.trim().is_empty())
        .map(|a| mbox::Mailbox::new("", a.trim()))
        .into_iter()
        .collect();
    cc.extend(recipients);
    ThreadPlace {
        parent: message_id,
        parent_references: refs
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        parent_subject: subject,
        to: mbox::Mailbox::new(from_name, from_address),
        cc,
    }
}

/// The archive link of a message: the list's web archive when set
/// (public-inbox's `BASE/MESSAGE-ID/`), else the list name and the id.
pub fn patch_link(web_url: Option<&str>, list: &str, message_id: &str) -> String {
    match web_url.filter(|u| !u.trim().is_empty()) {
        Some(base) => format!("{}/{}/", base.trim().trim_end_matches('/'), message_id),
        None => format!("{list}: <{message_id}>"),
    }
}

/// A plain answer in a thread (no KPI report).
pub struct Answer<'a> {
    pub place: &'a ThreadPlace,
    /// Names the answer uniquely (a retry makes no second Message-ID).
    pub identity_key: String,
    pub body: String,
    /// The series or command pair it is about, if any.
    pub submission_id: Option<i64>,
}

/// Queues an answer in the caller's transaction; its outbox id and
/// Message-ID, or `None` when it was queued before.
pub async fn enqueue_answer(
    tx: &mut Tx,
    config: &MailConfig,
    answer: &Answer<'_>,
) -> Result<Option<(i64, String)>> {
    let now = now_ms();
    let message_id =
        MessageId::derive(now, &answer.identity_key, &config.report.message_id_domain)?;
    let rendered = RenderedReport {
        subject: report::reply_subject(&answer.place.parent_subject),
        body: answer.body.clone(),
        message_id,
    };
    let addressing = answer.place.addressing(config, now);
    let message = match mbox::message(&rendered, &addressing) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(parent = %answer.place.parent, error = %e, "answer not queued");
            return Ok(None);
        }
    };
    let row = NewReport {
        message_id: rendered.message_id.to_string(),
        submission_id: answer.submission_id,
        atomic_job_id: None,
        bisection_id: None,
        kind: ReportKind::Answer,
        state: if config.enabled {
            OutboxState::Pending
        } else {
            OutboxState::MailOff
        },
        subject: rendered.subject,
        envelope_from: config.report.robot_address.clone(),
        recipients: addressing.recipients().into(),
        message,
        created_at: now,
        send_after: now,
        culprit: None,
        facts: None,
        thread: Some(answer.place.thread().to_owned()),
    };
    let id = outbox::insert(tx, &row).await?;
    if id.is_some() {
        tracing::info!(message_id = %row.message_id, subject = %row.subject, "answer written");
    }
    Ok(id.map(|id| (id, row.message_id)))
}

/// Answers a posted patch whose regression was reported before (the same
/// change by `git patch-id`, e.g. in an earlier version of the series):
/// no second report, a pointer to the one that stands (`message_id`,
/// `subject`). Nothing when the commit was not read on a list.
pub async fn enqueue_still_there(
    tx: &mut Tx,
    config: &MailConfig,
    commit: &str,
    message_id: &str,
    subject: &str,
) -> Result<()> {
    let Some(thread) = patch_thread(tx, config, commit).await? else {
        return Ok(());
    };
    let closes = config.report.closes_url(message_id);
    let body = format!(
        "Hi,\n\n{} noticed that this patch still has the regression it reported for the same \
         change before (the same `git patch-id`):\n\n    {subject}\n    {closes}\n\n\
         commit: {commit}\npatch link: {}\n\n\
         No new report is sent; the earlier one stands. If you fix the issue in a separate \
         patch/commit, kindly add following tags\n| Reported-by: {}\n| Closes: {closes}\n{}",
        config.report.robot_name,
        thread.posted.patch_link,
        config.report.identity(),
        signature(config)
    );
    let answer = Answer {
        place: &thread.place,
        identity_key: format!("still-there/{commit}/{message_id}"),
        body,
        submission_id: None,
    };
    enqueue_answer(tx, config, &answer).await?;
    Ok(())
}

/// The robot's signature block, as every report ends.
pub fn signature(config: &MailConfig) -> String {
    format!("\n-- \n{}\n", config.report.signature.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_use_the_web_archive() {
        assert_eq!(
            patch_link(Some("https://lore.example/fsdevel/"), "fsdevel", "a@b"),
            "https://lore.example/fsdevel/a@b/"
        );
        assert_eq!(patch_link(None, "fsdevel", "a@b"), "fsdevel: <a@b>");
    }
}
