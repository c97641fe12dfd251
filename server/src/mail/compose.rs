//! From a settled comparison to a queued report: choose the KPI to report,
//! gather repo, commits and machine, render with `kbot_core::report`, and
//! write the outbox row in the caller's transaction.

use kbot_core::conditions::Mode;
use kbot_core::machine::Hardware;
use kbot_core::metrics::Impact;
use kbot_core::report::{self, mbox, ChangeKind, OtherImpact, ReportData, StillOn};
use kbot_core::stats::{MetricComparison, Outcome};
use kbot_core::table::{self, RowFilter, TableInput};

use super::culprit;
use super::outbox::{self, NewReport};
use crate::comparisons::PairComparison;
use crate::config::mail::MailConfig;
use crate::db::Tx;
use crate::error::Result;
use crate::repos::StoredCommit;
use crate::time::now_ms;

/// The KPI a report is about: among the KPIs that may act on the job
/// ([`kbot_core::stats::Comparison::acting`]), the first kbot calls
/// `different` whose change is a regression, or an improvement when those
/// are reported.
pub fn reported_metric<'a>(
    pc: &'a PairComparison,
    config: &MailConfig,
) -> Option<&'a MetricComparison> {
    let different = |m: &&MetricComparison| m.kpi && m.kbot.outcome == Outcome::Different;
    let acting = || pc.comparison.acting().filter(different);
    acting()
        .find(|m| m.impact == Impact::Regression)
        .or_else(|| {
            acting().find(|m| config.report_improvements && m.impact == Impact::Improvement)
        })
}

/// Queues the report of a settled pair, in the transaction that records its
/// comparison. Returns the outbox id, or `None` when nothing is reportable
/// or this report was written before. The pair's head is the blamed commit;
/// `culprit` ([`super::culprit::key`]) joins it to a report that blames the
/// same change.
pub async fn enqueue_pair_report(
    tx: &mut Tx,
    config: &MailConfig,
    submission_id: i64,
    pc: &PairComparison,
    culprit: Option<String>,
) -> Result<Option<i64>> {
    let Some(kpi) = reported_metric(pc, config) else {
        return Ok(None);
    };
    let blame = Blame {
        submission_id,
        pc,
        kpi,
        bisection_id: None,
        still_on: Vec::new(),
        culprit,
    };
    enqueue(tx, config, &blame).await
}

/// Queues the report of a bisection's verified first bad commit: `pc` is
/// the verification pair (the commit against its parent), `kpi` the
/// bisected metric.
pub async fn enqueue_bisection_report(
    tx: &mut Tx,
    config: &MailConfig,
    blame: &Blame<'_>,
) -> Result<Option<i64>> {
    enqueue(tx, config, blame).await
}

/// A report's subject: the pair that blames `pc.head` for `kpi`.
pub struct Blame<'a> {
    pub submission_id: i64,
    pub pc: &'a PairComparison,
    pub kpi: &'a MetricComparison,
    pub bisection_id: Option<i64>,
    /// `[still regression on ...]` lines: later heads that still show it.
    pub still_on: Vec<StillOn>,
    /// The blamed change ([`super::culprit::key`]): a second finding of it
    /// joins the first report instead of writing its own.
    pub culprit: Option<String>,
}

/// Writes the report, mail on or off: with mail off it is stored as
/// `mail_off`, so the dashboard and the API list every regression found. A
/// culprit reported before gets this finding as a section of its report
/// ([`super::culprit`]); the id returned is then that report's.
async fn enqueue(tx: &mut Tx, config: &MailConfig, blame: &Blame<'_>) -> Result<Option<i64>> {
    let pc = blame.pc;
    let ctx = load_context(tx, config, blame.submission_id, pc.atomic_job_id).await?;
    let mut data = report_data(pc, blame.kpi, &ctx);
    data.still_on = blame.still_on.clone();
    if let Some(culprit) = &blame.culprit {
        let finding = culprit::Finding {
            data: &data,
            tbox_group: &ctx.tbox_group,
            head: &pc.head,
            kpi: blame.kpi,
        };
        if let Some(id) = culprit::join(tx, config, culprit, &finding).await? {
            return Ok(Some(id));
        }
    }
    // A patch read on a list is answered in its thread.
    let (addressing, posted) = match super::thread::patch_thread(tx, config, &pc.head.sha).await? {
        Some(thread) => (
            thread.place.addressing(config, now_ms()),
            Some(thread.posted),
        ),
        None => (addressing(config, &ctx.repo_name, &pc.head, now_ms()), None),
    };
    // A series tip is no branch head: no `[still regression on ...]` line.
    if posted.is_some() {
        data.still_on.clear();
    }
    data.posted = posted;
    // A report that cannot be built (an author address git accepted but SMTP
    // cannot carry, no recipient at all) must not keep the verdict from being
    // recorded: log it and queue nothing. Database errors still roll back.
    let built = report::render(&data, &config.report).and_then(|rendered| {
        mbox::message(&rendered, &addressing).map(|message| (rendered, message))
    });
    let (rendered, message) = match built {
        Ok(built) => built,
        Err(e) => {
            tracing::error!(atomic_job_id = pc.atomic_job_id, error = %e, "report not queued");
            return Ok(None);
        }
    };
    let facts = outbox::Facts {
        data,
        addressing,
        tbox_group: ctx.tbox_group.clone(),
    };
    let gather = i64::try_from(config.gather.as_millis()).unwrap_or(i64::MAX);
    let row = NewReport {
        message_id: rendered.message_id.to_string(),
        submission_id: Some(blame.submission_id),
        atomic_job_id: Some(pc.atomic_job_id),
        bisection_id: blame.bisection_id,
        kind: facts.data.kind.into(),
        state: if config.enabled {
            outbox::OutboxState::Pending
        } else {
            outbox::OutboxState::MailOff
        },
        subject: rendered.subject,
        envelope_from: config.report.robot_address.clone(),
        recipients: facts.addressing.recipients().into(),
        message,
        created_at: facts.addressing.date_ms,
        send_after: facts.addressing.date_ms.saturating_add(gather),
        culprit: blame.culprit.clone(),
        facts: Some(serde_json::to_string(&facts).map_err(anyhow::Error::from)?),
        thread: None,
    };
    let id = outbox::insert(tx, &row).await?;
    if id.is_some() {
        tracing::info!(message_id = %row.message_id, subject = %row.subject, state = %row.state, "report written");
        return Ok(id);
    }
    // Written before, or a finding of the same culprit committed first on
    // another replica: this one joins it.
    match &blame.culprit {
        Some(c) => {
            let finding = culprit::Finding {
                data: &facts.data,
                tbox_group: &ctx.tbox_group,
                head: &pc.head,
                kpi: blame.kpi,
            };
            culprit::join(tx, config, c, &finding).await
        }
        None => Ok(None),
    }
}

/// What the report needs beyond the comparison.
struct Context {
    repo_name: String,
    repo_url: String,
    branch: String,
    submission_created_at: i64,
    machine: Hardware,
    tbox_group: String,
    /// The measurement mode of the head's runs (a QEMU guest's).
    mode: Option<Mode>,
}

/// The machine a run was measured on, as its `agents` row holds it.
#[derive(sqlx::FromRow)]
struct MachineRow {
    arch: String,
    cpu_model: String,
    sockets: i64,
    cores: i64,
    threads: i64,
    numa_nodes: i64,
    memory_bytes: i64,
    page_size: i64,
    microcode: Option<String>,
    kernel: String,
    tbox_group: String,
    /// The run's tuning map (JSON): its measurement conditions.
    tuning: String,
}

async fn load_context(
    tx: &mut Tx,
    config: &MailConfig,
    submission_id: i64,
    atomic_job_id: i64,
) -> Result<Context> {
    let (repo_name, repo_url, branch, submission_created_at): (String, String, String, i64) =
        sqlx::query_as(
            // A watch's pair is on the watched branch (`submissions.branch`,
            // which a series pair also names: its report keeps the default).
            "SELECT r.name, r.url, \
                 COALESCE(CASE WHEN s.watch_id IS NOT NULL THEN s.branch END, r.default_branch), \
                 s.created_at \
             FROM submissions s JOIN repos r ON r.id = s.repo_id WHERE s.id = $1",
        )
        .bind(submission_id)
        .fetch_one(&mut **tx)
        .await?;
    // The machine of the head's runs: the one the regression was measured on.
    let agent = sqlx::query_as::<_, MachineRow>(
        "SELECT a.arch, a.cpu_model, a.sockets, a.cores, a.threads, a.numa_nodes, \
         a.memory_bytes, a.page_size, a.microcode, a.kernel, a.tbox_group, res.tuning \
         FROM jobs j JOIN results res ON res.job_id = j.id JOIN agents a ON a.id = res.agent_id \
         WHERE j.atomic_job_id = $1 AND j.side = 'head' ORDER BY j.id LIMIT 1",
    )
    .bind(atomic_job_id)
    .fetch_optional(&mut **tx)
    .await?;
    let (machine, tbox_group, mode) = match agent {
        Some(a) => (
            Hardware {
                arch: a.arch,
                cpu_model: a.cpu_model,
                sockets: count(a.sockets),
                cores: count(a.cores),
                threads: count(a.threads),
                numa_nodes: count(a.numa_nodes),
                memory_bytes: u64::try_from(a.memory_bytes).unwrap_or(0),
                page_size: u64::try_from(a.page_size).unwrap_or(0),
                microcode: a.microcode,
                kernel: a.kernel,
            },
            a.tbox_group,
            serde_json::from_str(&a.tuning)
                .ok()
                .and_then(|t| Mode::of(&t)),
        ),
        None => (unknown_machine(), String::new(), None),
    };
    Ok(Context {
        // The report goes to lists and people: never a private tree's
        // credentials nor a path on the server's disk (the facts rendered
        // again later carry the same).
        repo_url: crate::repos::public_tree(config, &repo_name, &repo_url),
        repo_name,
        branch,
        submission_created_at,
        machine,
        tbox_group,
        mode,
    })
}

fn count(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

fn unknown_machine() -> Hardware {
    Hardware {
        arch: String::new(),
        cpu_model: "(machine unknown)".into(),
        sockets: 0,
        cores: 0,
        threads: 0,
        numa_nodes: 0,
        memory_bytes: 0,
        page_size: 0,
        microcode: None,
        kernel: String::new(),
    }
}

/// Most changed rows of one monitor or profile group in a report's compare
/// table (0-day's mails show the top movers; the dashboard has them all).
const REPORT_ROWS_PER_GROUP: usize = 15;

fn report_data(pc: &PairComparison, kpi: &MetricComparison, ctx: &Context) -> ReportData {
    let mut axes = pc.job.axes();
    if !ctx.tbox_group.is_empty() {
        axes.entry("tbox_group".into())
            .or_insert_with(|| ctx.tbox_group.clone());
    }
    let table_input = TableInput::from_comparison(
        axes.clone(),
        pc.base.commit_ref(),
        pc.head.commit_ref(),
        &pc.comparison,
        RowFilter::Changed,
    );
    let axes_key: Vec<String> = axes.iter().map(|(k, v)| format!("{k}={v}")).collect();
    ReportData {
        tree: ctx.repo_name.clone(),
        branch: ctx.branch.clone(),
        repo_url: ctx.repo_url.clone(),
        commit: pc.head.commit_ref(),
        base: pc.base.commit_ref(),
        metric: kpi.metric.clone(),
        change_percent: kpi.change,
        kind: if kpi.impact == Impact::Improvement {
            ChangeKind::Improvement
        } else {
            ChangeKind::Regression
        },
        still_on: Vec::new(),
        testcase: pc.job.testcase.clone(),
        kconfig: pc.job.kconfig.clone(),
        compiler: pc.job.compiler.clone(),
        machine: ctx.machine.clone(),
        measured_by: ctx.mode.map(measured_by),
        parameters: report::job_parameters(&pc.job),
        other_impacts: other_impacts(pc, kpi, &ctx.machine),
        compare_table: table::render(&table_input.within_budget(REPORT_ROWS_PER_GROUP)),
        recorded_at_ms: ctx.submission_created_at,
        identity_key: format!(
            "{}/{}..{}/{}/{}",
            ctx.repo_name,
            pc.base.sha,
            pc.head.sha,
            axes_key.join(","),
            kpi.metric
        ),
        preface: None,
        posted: None,
    }
}

/// The report's `measured on:` line: the mode and what it cannot see.
fn measured_by(mode: Mode) -> String {
    format!("{mode}; cannot see {}", mode.blind_to())
}

/// "In addition to that": the job's other KPIs the same pair changed, of
/// those the job acts on ([`kbot_core::stats::Comparison::acting`]).
fn other_impacts(
    pc: &PairComparison,
    kpi: &MetricComparison,
    machine: &Hardware,
) -> Vec<OtherImpact> {
    pc.comparison
        .acting()
        .filter(|m| m.kpi && m.metric != kpi.metric && m.kbot.outcome == Outcome::Different)
        .filter(|m| matches!(m.impact, Impact::Regression | Impact::Improvement))
        .map(|m| OtherImpact {
            testcase: pc.job.testcase.clone(),
            metric: m.metric.clone(),
            change_percent: m.change.abs(),
            kind: if m.impact == Impact::Improvement {
                ChangeKind::Improvement
            } else {
                ChangeKind::Regression
            },
            machine: report::describe_machine(machine),
            parameters: report::job_parameters(&pc.job),
            compare_table: None,
        })
        .collect()
}

/// To the commit's author; Cc the repo's lists and, if configured, the committer.
fn addressing(
    config: &MailConfig,
    repo: &str,
    commit: &StoredCommit,
    date_ms: i64,
) -> mbox::Addressing {
    let v = &commit.view;
    let mut cc: Vec<mbox::Mailbox> = config
        .repo_lists
        .get(repo)
        .into_iter()
        .flatten()
        .map(|a| mbox::Mailbox::new("", a.clone()))
        .collect();
    if config.cc_committer
        && !v.committer_email.is_empty()
        && !v.committer_email.eq_ignore_ascii_case(&v.author_email)
    {
        cc.push(mbox::Mailbox::new(
            v.committer_name.clone(),
            v.committer_email.clone(),
        ));
    }
    cc.retain(|m| outbox::usable(&m.address));
    let author = mbox::Mailbox::new(v.author_name.clone(), v.author_email.clone());
    let to: Vec<mbox::Mailbox> = Some(author)
        .filter(|m| outbox::usable(&m.address))
        .into_iter()
        .collect();
    mbox::Addressing {
        from: mbox::Mailbox::new(
            config.report.robot_name.clone(),
            config.report.robot_address.clone(),
        ),
        to,
        cc,
        date_ms,
        in_reply_to: None,
        references: Vec::new(),
    }
}
