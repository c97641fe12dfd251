//! Robot-style regression reports: the 0-day e-mail layout, filled from kbot's data.
//!
//! [`ReportData`] holds the facts of one regression (or improvement), [`ReportConfig`]
//! the robot's configured identity and texts. [`render`] turns both into a
//! [`RenderedReport`]: the subject, the body in the layout of 0-day's reports
//! (`core/tests/fixtures/seed_001_report.txt`), and the stable Message-ID. [`mbox`] turns a
//! rendered report plus recipients into an RFC 5322 message and an mbox file.
//!
//! The compare table itself comes rendered from [`crate::table`]'s caller; this
//! module only places it.

mod body;
mod impact;
mod machine;
pub mod mbox;
mod message_id;
mod subject;

/// A commit as a report names it (full id and subject), as the table does.
pub use crate::table::CommitRef;
pub use body::{commit_label, render_body};
pub use impact::render_impact_table;
pub use machine::describe_machine;
pub use message_id::MessageId;
pub use subject::{render_subject, reply_subject, subject_prefix};

use serde::{Deserialize, Serialize};

use crate::job::AtomicJob;
use crate::machine::Hardware;

/// Whether a change is bad or good for the metric's direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Regression,
    Improvement,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Regression => "regression",
            ChangeKind::Improvement => "improvement",
        }
    }
}

/// kbot's default disclaimer: like 0-day's, without claiming anyone's internal analysis.
pub const DEFAULT_DISCLAIMER: &str = "\
Results have been measured by kbot on the test machine described above and are
provided for informational purposes only. Any difference in system hardware or
software design or configuration may affect actual performance.";

/// kbot's default signature, printed after `-- `.
pub const DEFAULT_SIGNATURE: &str = "kbot kernel performance robot";

/// The robot's configured identity and the fixed texts of every report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportConfig {
    /// Display name, used in `From:`, `Reported-by:` and the opening line ("kernel test robot").
    pub robot_name: String,
    /// The robot's address (`From:` and `Reported-by:`), e.g. `kbot@example.org`.
    pub robot_address: String,
    /// What follows `<stamp>.<hex>-` in Message-IDs (`lkp@intel.com` for 0-day).
    pub message_id_domain: String,
    /// Prefix of the `Closes:` link; the Message-ID (without `<>`) is appended.
    pub archive_url: String,
    /// Prefix of the reproduction link; `<YYYYMMDD>/<message-id>` is appended.
    pub materials_url: String,
    /// Text after `Disclaimer:`; lines as they should appear.
    pub disclaimer: String,
    /// Lines after the `-- ` signature separator.
    pub signature: String,
}

impl ReportConfig {
    /// `Name <address>`, as used in `From:` and `Reported-by:`.
    pub fn identity(&self) -> String {
        format!("{} <{}>", self.robot_name, self.robot_address)
    }

    /// The report with Message-ID `message_id` in the archive: what a fix's
    /// `Closes:` names.
    pub fn closes_url(&self, message_id: &str) -> String {
        body::join_url(&self.archive_url, message_id)
    }
}

/// `[still regression on <tree>/<branch> <sha>]`: a later head that still shows the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StillOn {
    /// `linus/master`, `linux-next/master`, ...
    pub tree_branch: String,
    pub sha: String,
}

/// Another test whose metric the same commit changed significantly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OtherImpact {
    pub testcase: String,
    pub metric: String,
    /// Absolute size of the change in percent.
    pub change_percent: f64,
    pub kind: ChangeKind,
    /// One-line machine description ([`describe_machine`]).
    pub machine: String,
    /// `key=value` parameters in display order.
    pub parameters: Vec<(String, String)>,
    /// The test's rendered compare table, printed after the main one; `None` to omit.
    pub compare_table: Option<OtherCompare>,
}

/// The details block of another impacted test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtherCompare {
    /// `lkp-spr-2sp2` (0-day prints the test box group before the machine line).
    pub tbox_group: String,
    /// The rendered compare table from `kbot_core::table`.
    pub table: String,
}

/// Everything a report says about one regression (or improvement).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportData {
    /// The tree's short name (`linus`) and the branch (`master`) for `[tree:branch]`.
    pub tree: String,
    pub branch: String,
    /// URL of the repository, printed after the commit subject.
    pub repo_url: String,
    /// The commit blamed: the first bad commit once bisected, else the pair's head.
    pub commit: CommitRef,
    /// The base the commit was compared against.
    pub base: CommitRef,
    /// The KPI that triggered the report, LKP-named.
    pub metric: String,
    /// Absolute size of the change in percent (18.5 for -18.5%).
    pub change_percent: f64,
    pub kind: ChangeKind,
    pub still_on: Vec<StillOn>,
    pub testcase: String,
    /// Kernel config name (`config:`).
    pub kconfig: String,
    pub compiler: String,
    pub machine: Hardware,
    /// kbot's `measured on:` line: how a QEMU guest measured the runs and
    /// what that mode cannot see; `None` on real machines.
    #[serde(default)]
    pub measured_by: Option<String>,
    /// `key: value` parameters in display order.
    pub parameters: Vec<(String, String)>,
    pub other_impacts: Vec<OtherImpact>,
    /// The compare table rendered by `kbot_core::table` (axes header to the last row).
    pub compare_table: String,
    /// When the regression was recorded (Unix ms); dates the Message-ID and archive path.
    pub recorded_at_ms: i64,
    /// A stable key of the regression's identity (repo, pair, job, metric); the
    /// Message-ID hashes it so a retry never makes a second id.
    pub identity_key: String,
    /// Optional hand-written preface, printed before `Hello,`.
    pub preface: Option<String>,
    /// Set when the commit is a patch kbot read on a mailing list and
    /// applied itself: the report answers in the patch's thread.
    pub posted: Option<PostedPatch>,
}

/// 0-day's lines under `commit:` for a patch posted to a list (its report
/// is a reply in the patch's thread, `Re: <patch subject>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostedPatch {
    /// `url:`: where the applied series can be fetched.
    pub url: String,
    /// `base:`: the tree and the commit the series was applied on.
    pub base: String,
    /// `patch link:`: the patch mail in the list's archive.
    pub patch_link: String,
    /// `patch subject:`: the mail's subject as posted.
    pub patch_subject: String,
}

impl ReportData {
    /// This finding as a section of another report of the same commit
    /// (0-day's "In addition to that" block with its own compare table):
    /// one culprit found on several tbox groups or jobs is one mail.
    pub fn as_section(&self, tbox_group: &str) -> OtherImpact {
        OtherImpact {
            testcase: self.testcase.clone(),
            metric: self.metric.clone(),
            change_percent: self.change_percent.abs(),
            kind: self.kind,
            machine: describe_machine(&self.machine),
            parameters: self.parameters.clone(),
            compare_table: Some(OtherCompare {
                tbox_group: tbox_group.to_owned(),
                table: self.compare_table.clone(),
            }),
        }
    }

    /// Whether `section` already says what this report (whose primary
    /// finding was made on `tbox_group`) or one of its sections says: the
    /// same test, metric, parameters and tbox group.
    pub fn covers(&self, tbox_group: &str, section: &OtherImpact) -> bool {
        let same = |o: &OtherImpact| {
            o.testcase == section.testcase
                && o.metric == section.metric
                && o.parameters == section.parameters
                && o.compare_table.as_ref().map(|c| &c.tbox_group)
                    == section.compare_table.as_ref().map(|c| &c.tbox_group)
        };
        same(&self.as_section(tbox_group)) || self.other_impacts.iter().any(same)
    }
}

/// A report ready to send or show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderedReport {
    pub subject: String,
    pub body: String,
    pub message_id: MessageId,
}

/// Renders subject, body and Message-ID of one report.
pub fn render(data: &ReportData, config: &ReportConfig) -> crate::Result<RenderedReport> {
    let message_id = MessageId::derive(
        data.recorded_at_ms,
        &data.identity_key,
        &config.message_id_domain,
    )?;
    Ok(RenderedReport {
        subject: render_subject(data),
        body: render_body(data, config, &message_id),
        message_id,
    })
}

/// A job's parameters in the order 0-day prints them: global parameters, then the
/// program's options, then setup programs (`cpufreq_governor`) last.
pub fn job_parameters(job: &AtomicJob) -> Vec<(String, String)> {
    const SETUP_KEYS: [&str; 1] = ["cpufreq_governor"];
    let globals = job
        .params
        .iter()
        .filter(|(k, _)| !SETUP_KEYS.contains(&k.as_str()));
    let setups = job
        .params
        .iter()
        .filter(|(k, _)| SETUP_KEYS.contains(&k.as_str()));
    globals
        .chain(job.options.iter())
        .chain(setups)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
