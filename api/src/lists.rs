//! Wire types of mailing lists and the patch series read from them, shared
//! by the REST handlers and the CLI.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use crate::watches::SourceState;

crate::wire_enum! {
    /// The layout of a list's archive.
    pub enum ArchiveKind {
        /// public-inbox v2: `git/N.git` epochs.
        PublicInboxV2 = "public-inbox-v2",
        /// public-inbox v1: one git repository.
        PublicInboxV1 = "public-inbox-v1",
        Mbox = "mbox",
        Maildir = "maildir",
    }
}

crate::wire_enum! {
    /// Where a posted series is.
    pub enum SeriesState {
        /// Parts are missing.
        Waiting = "waiting",
        /// The missing parts never came.
        Incomplete = "incomplete",
        /// A newer version came before it started.
        Superseded = "superseded",
        /// It does not apply on its base.
        CannotApply = "cannot_apply",
        /// Applied; its pair runs.
        Testing = "testing",
        Tested = "tested",
        /// Its tip does not build.
        BuildFailed = "build_failed",
        /// Its tip did not run.
        Failed = "failed",
        /// More patches, or a larger patch mail, than the server tests.
        TooLarge = "too_large",
        /// The same patches on the same base as `duplicate_of`.
        Duplicate = "duplicate",
        /// The sender's or the list's pairs of the day are spent.
        OverQuota = "over_quota",
    }
}

impl SeriesState {
    /// The list event that puts a series in this state.
    pub fn event(self) -> ListEventKind {
        match self {
            SeriesState::Waiting => ListEventKind::Series,
            SeriesState::Incomplete => ListEventKind::Incomplete,
            SeriesState::Superseded => ListEventKind::Superseded,
            SeriesState::CannotApply => ListEventKind::CannotApply,
            SeriesState::Testing => ListEventKind::Applied,
            SeriesState::Tested => ListEventKind::Tested,
            SeriesState::BuildFailed => ListEventKind::BuildFailed,
            SeriesState::Failed => ListEventKind::Failed,
            SeriesState::TooLarge => ListEventKind::TooLarge,
            SeriesState::Duplicate => ListEventKind::Duplicate,
            SeriesState::OverQuota => ListEventKind::OverQuota,
        }
    }
}

crate::wire_enum! {
    /// Something a list's reader did or saw.
    pub enum ListEventKind {
        Created = "created",
        Removed = "removed",
        /// The archive could not be read.
        ReadFailed = "read_failed",
        /// A message that does not parse.
        BadMessage = "bad_message",
        /// A new series (or a part of one) was read.
        Series = "series",
        Incomplete = "incomplete",
        Superseded = "superseded",
        /// A series was applied on its base and its pair queued.
        Applied = "applied",
        CannotApply = "cannot_apply",
        /// A pair to find the base of a series was queued.
        BuildProbe = "build_probe",
        BuildFailed = "build_failed",
        Tested = "tested",
        Failed = "failed",
        TooLarge = "too_large",
        Duplicate = "duplicate",
        OverQuota = "over_quota",
        /// A `#kbot` command was taken.
        Command = "command",
    }
}

crate::wire_enum! {
    /// A `#kbot` command's name.
    pub enum CommandName {
        /// Test a commit or branch against the report's pair.
        Test = "test",
        /// Run the reported pair again.
        Retest = "retest",
        /// The report was wrong.
        Invalid = "invalid",
        /// The regression duplicates another.
        Dup = "dup",
        /// A fix: test it, and mark the regression fixed when it is.
        Fix = "fix",
        /// Not a mail's: a commit on a watched tree says it closes a report.
        Closes = "closes",
        /// More commands in one mail than kbot reads.
        TooMany = "too_many",
        /// A `#kbot` line kbot does not know.
        Unknown = "unknown",
    }
}

crate::wire_enum! {
    /// Where a `#kbot` command is.
    pub enum CommandState {
        Done = "done",
        Refused = "refused",
        /// Its pair runs.
        Testing = "testing",
        Tested = "tested",
    }
}

/// `POST /api/v1/lists`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ListCreate {
    /// Short name (`linux-fsdevel`), used in refs and on the dashboard.
    pub name: String,
    /// The archive: a public-inbox v2 directory (`git/N.git` epochs) or v1
    /// repository, an mbox file or a Maildir, as a path on the server; or
    /// the URL of a public-inbox (its epochs `URL/0`, `URL/1`, ... are
    /// cloned, as lore.kernel.org serves them).
    pub archive: String,
    /// The registered repo the list's patches apply to.
    pub repo: String,
    /// The branch whose head at posting time is the base when a series
    /// names none (default: the repo's default branch).
    pub branch: Option<String>,
    /// The LKP-style job file run on every series, as YAML text.
    pub job_file: String,
    /// The list's posting address, Cc'd on every answer.
    pub address: Option<String>,
    /// The web archive the `patch link:` lines point into
    /// (`https://lore.kernel.org/linux-fsdevel`).
    pub web_url: Option<String>,
    pub tbox_group: Option<String>,
    /// How often the archive is read (default 300 s).
    pub interval_secs: Option<u32>,
    /// How long a series with missing parts waits before it ends
    /// `incomplete` (default 3600 s).
    pub wait_secs: Option<u32>,
    /// Cap on runs per side of each pair (default 10).
    pub max_runs: Option<u32>,
    /// Read the archive's history too (default: only mail that arrives
    /// after the list is added, as a watch starts at the branch's head).
    #[serde(default)]
    pub from_start: bool,
    /// Take a mail without any DKIM signature as from an unverified sender
    /// (an archive that strips signatures, a local mbox); it still needs a
    /// role to command kbot. Off by default: state-changing commands need a
    /// DKIM pass aligned with the From.
    #[serde(default)]
    pub accept_unsigned: bool,
    /// Addresses that may command kbot about every report of the list's
    /// patches, besides the tree's MAINTAINERS.
    #[serde(default)]
    pub maintainers: Vec<String>,
    /// Subject tags and the trees they name: `{"net-next": "net-next:main"}`
    /// (a registered repo, then `:BRANCH`, default its default branch). A
    /// `[PATCH net-next]` series without a usable `base-commit:` is based on
    /// that branch's head when it was posted.
    #[serde(default)]
    pub tree_tags: std::collections::BTreeMap<String, String>,
    /// A patchwork instance that gets a check on every tested patch.
    #[serde(default)]
    pub patchwork: Option<PatchworkSettings>,
}

/// A patchwork instance and the project the list's patches are in.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PatchworkSettings {
    /// Its base URL (`https://patchwork.kernel.org`); the REST API is
    /// under `/api/1.2/`.
    pub url: String,
    /// The project's link name (`netdevbpf`).
    pub project: String,
    /// An API token of a user with the check permission (never shown).
    pub token: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ListView {
    pub id: i64,
    pub name: String,
    pub archive: String,
    pub archive_kind: ArchiveKind,
    pub address: Option<String>,
    pub web_url: Option<String>,
    pub repo: String,
    pub branch: String,
    pub job_name: String,
    pub tbox_group: Option<String>,
    pub interval_secs: u32,
    pub wait_secs: u32,
    pub max_runs: u32,
    pub state: SourceState,
    pub messages_read: i64,
    pub last_error: Option<String>,
    /// Unix milliseconds.
    pub checked_at: Option<i64>,
    pub created_at: i64,
    /// See [`ListCreate::accept_unsigned`].
    #[serde(default)]
    pub accept_unsigned: bool,
    /// See [`ListCreate::maintainers`].
    #[serde(default)]
    pub maintainers: Vec<String>,
    /// See [`ListCreate::tree_tags`].
    #[serde(default)]
    pub tree_tags: std::collections::BTreeMap<String, String>,
    /// The patchwork instance that gets checks, if any (its token is never
    /// shown).
    #[serde(default)]
    pub patchwork_url: Option<String>,
}

/// Something a list's reader did or saw.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ListEvent {
    /// Unix milliseconds.
    pub at: i64,
    pub kind: ListEventKind,
    pub detail: String,
}

/// `GET /api/v1/lists/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ListDetail {
    pub list: ListView,
    pub series: Vec<SeriesView>,
    pub events: Vec<ListEvent>,
}

/// A patch series as posted: its parts, where it was applied and how it was
/// tested.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SeriesView {
    pub id: i64,
    pub list: String,
    /// The Message-ID of the cover letter, else of patch 1.
    pub key: String,
    pub version: u32,
    /// Patches in the series (the cover letter not counted).
    pub total: u32,
    pub rfc: bool,
    pub title: String,
    pub author: String,
    pub state: SeriesState,
    /// The base commit and how it was chosen: `base-commit` (the sender's
    /// `git format-patch --base`), or `tree head` (the list's branch head
    /// when the series was posted).
    pub base: Option<String>,
    pub base_how: Option<String>,
    /// Where the applied series is, fetchable from the server's git.
    pub ref_name: Option<String>,
    pub tip: Option<String>,
    pub submission: Option<i64>,
    pub superseded_by: Option<i64>,
    /// The series tested with the same patches on the same base.
    #[serde(default)]
    pub duplicate_of: Option<i64>,
    pub detail: Option<String>,
    /// Unix milliseconds: the first part's Date.
    pub posted_at: i64,
    pub updated_at: i64,
}

/// One part of a series.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SeriesPart {
    /// 0 is the cover letter.
    pub index: u32,
    pub message_id: String,
    pub subject: String,
    /// The commit `git am` made of it.
    pub commit: Option<String>,
    pub patch_id: Option<String>,
}

/// A `#kbot` command read from a reply to one of kbot's mails.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ListCommand {
    pub id: i64,
    pub message_id: String,
    pub sender: String,
    pub command: CommandName,
    pub argument: String,
    pub state: CommandState,
    pub outcome: String,
    pub regression: Option<i64>,
    pub submission: Option<i64>,
    pub created_at: i64,
}

/// `GET /api/v1/series/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SeriesDetail {
    pub series: SeriesView,
    pub parts: Vec<SeriesPart>,
}
