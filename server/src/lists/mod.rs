//! Mailing lists: patch series tested before they are merged, answers in
//! their threads, and `#kbot` commands in the replies.
//!
//! The worker ([`spawn_worker`]) reads each list's archive every interval
//! ([`ingest`]: public-inbox v2 or v1, mbox, Maildir, parsed with a MIME
//! parser: [`message`]), keeps every message, and acts on `#kbot` command
//! lines in replies to kbot's own mails ([`commands`](mod@commands)). It then assembles
//! the posted series ([`subject`], [`assemble`]), waits for missing parts,
//! lets a newer version supersede an older one that has not started, and
//! applies each complete series with `git am -3` on its base (the sender's
//! `base-commit:`, else the list's branch head when it was posted) into
//! `refs/kbot/series/LIST/ID` on the server's mirror ([`series`]). The series
//! is then tested as a pair, base against tip; a regression inside it is
//! bisected to the patch and answered in that patch's thread (the report
//! threading lives in `mail::thread`). A series that does not apply and a
//! tip that does not build get an answer of their own ([`answers`]).
//! Regressions whose fix lands on a watched tree with `Closes:` (or `Link:`)
//! are rerun and closed when the KPI is back ([`fixes`]).
//!
//! Who may do what, and that a From line can be forged, is in
//! `docs/lists.md`. Refs of finished series and raw replies are pruned
//! after a while ([`retention`]).

pub mod answers;
pub mod archive;
pub mod assemble;
pub mod base;
pub mod commands;
pub mod dkim;
pub mod fixes;
pub mod ingest;
pub mod locate;
pub mod maintainers;
pub mod message;
pub mod pages;
pub mod pairs;
pub mod patch_status;
pub mod patches;
pub mod patchwork;
pub mod prerequisites;
pub mod recheck;
pub mod retention;
pub mod routes;
pub mod series;
mod store;
pub mod subject;
pub mod trust;
pub mod versions;

use std::time::{Duration, Instant};

use crate::auth::UserAuth;
use crate::error::{Error, Result};
use crate::repos;
use crate::state::AppState;
use crate::submissions;
use crate::time::now_ms;
use crate::web::without_credentials;
use crate::worker::{self, Pace, Woken, Worker};
use kbot_api::lists::{ListCreate, ListDetail, ListView, SeriesDetail, SeriesView};
pub use store::{ListRow, SeriesState};

/// How often the worker looks for due lists.
const TICK: Duration = Duration::from_secs(1);

/// Defaults and bounds of a list's read interval and of a series' wait.
pub const DEFAULT_INTERVAL_SECS: u32 = 300;
pub const DEFAULT_WAIT_SECS: u32 = 3600;
pub const MAX_INTERVAL_SECS: u32 = 7 * 24 * 3600;

/// Most events and series shown with a list.
const SHOWN: i64 = 200;

pub async fn create(state: &AppState, user: &UserAuth, req: ListCreate) -> Result<ListView> {
    let name = req.name.trim();
    check_name(name)?;
    let plan = submissions::parse_job(&req.job_file, state.config.lkp_root.as_deref())?;
    let max_runs = submissions::max_runs(req.max_runs)?;
    let interval = bounded("interval_secs", req.interval_secs, DEFAULT_INTERVAL_SECS)?;
    let wait = bounded("wait_secs", req.wait_secs, DEFAULT_WAIT_SECS)?;
    let repo = repos::get_repo(&state.db, &req.repo).await?;
    let branch = match req
        .branch
        .as_deref()
        .map(str::trim)
        .filter(|b| !b.is_empty())
    {
        Some(b) => b.to_owned(),
        None => repo.default_branch.clone(),
    };
    // The branch must exist now; a typo is refused here, not found later.
    repos::resolve_commit(state, &repo, &branch).await?;
    let kind = ingest::prepare(state, name, req.archive.trim()).await?;
    let cursor =
        ingest::start_cursor(state, name, req.archive.trim(), kind, req.from_start).await?;
    let trimmed = |o: &Option<String>| {
        o.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let id = store::insert(
        &state.db,
        &store::NewList {
            name,
            archive: req.archive.trim(),
            archive_kind: kind,
            address: trimmed(&req.address).as_deref(),
            web_url: trimmed(&req.web_url).as_deref(),
            repo_id: repo.id,
            branch: &branch,
            job_name: &submissions::job_name(&plan.jobs),
            job_file: &req.job_file,
            tbox_group: trimmed(&req.tbox_group).as_deref(),
            runs_cap: i64::from(max_runs),
            interval_secs: i64::from(interval),
            wait_secs: i64::from(wait),
            user_id: user.user_id,
            cursor: cursor.as_deref(),
            accept_unsigned: req.accept_unsigned,
            maintainers: &maintainers(&req.maintainers)?,
            tree_tags: &base::tree_tags(state, &req.tree_tags).await?,
            patchwork: patchwork_settings(&req)?,
        },
    )
    .await?;
    let archive = without_credentials(&req.archive);
    tracing::info!(list = id, name, %archive, user = %user.user_name, "list added");
    Ok(store::get(&state.db, id).await?.view())
}

/// The patchwork settings, each part given; an http(s) URL.
fn patchwork_settings(req: &ListCreate) -> Result<Option<(&str, &str, &str)>> {
    let Some(p) = &req.patchwork else {
        return Ok(None);
    };
    let (url, project, token) = (p.url.trim(), p.project.trim(), p.token.trim());
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(Error::BadRequest(format!(
            "patchwork.url {url:?} is not an http(s) URL"
        )));
    }
    if project.is_empty() || token.is_empty() {
        return Err(Error::BadRequest(
            "patchwork needs a project and a token".into(),
        ));
    }
    Ok(Some((url, project, token)))
}

/// The list's maintainers as stored (one address a line); a value that is
/// no address is refused.
fn maintainers(given: &[String]) -> Result<String> {
    let mut out = Vec::new();
    for a in given.iter().map(|a| a.trim()).filter(|a| !a.is_empty()) {
        if !crate::mail::outbox::usable(a) {
            return Err(Error::BadRequest(format!(
                "maintainers: {a:?} is not a mail address"
            )));
        }
        out.push(a.to_ascii_lowercase());
    }
    Ok(out.join("\n"))
}

/// A list name goes into refs and paths: letters, digits, `.`, `_`, `-`.
fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(Error::BadRequest(format!(
            "list name {name:?}: use 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'"
        )))
    }
}

fn bounded(what: &str, value: Option<u32>, default: u32) -> Result<u32> {
    let v = value.unwrap_or(default);
    if (1..=MAX_INTERVAL_SECS).contains(&v) {
        Ok(v)
    } else {
        Err(Error::BadRequest(format!(
            "{what} {v} must be between 1 and {MAX_INTERVAL_SECS}"
        )))
    }
}

pub async fn list(state: &AppState) -> Result<Vec<ListView>> {
    Ok(store::list(&state.db)
        .await?
        .iter()
        .map(ListRow::view)
        .collect())
}

pub async fn detail(state: &AppState, id: i64) -> Result<ListDetail> {
    let list = store::get(&state.db, id).await?;
    Ok(ListDetail {
        series: store::series_of_list(&state.db, id, SHOWN)
            .await?
            .iter()
            .map(store::SeriesRow::view)
            .collect(),
        events: store::events(&state.db, id, SHOWN).await?,
        list: list.view(),
    })
}

pub async fn remove(state: &AppState, user: &UserAuth, id: i64) -> Result<ListView> {
    store::get(&state.db, id).await?;
    store::remove(&state.db, id, &user.user_name).await?;
    tracing::info!(list = id, user = %user.user_name, "list removed");
    Ok(store::get(&state.db, id).await?.view())
}

/// Reads the list now instead of at its next interval.
pub async fn read_now(state: &AppState, id: i64) -> Result<ListView> {
    let list = store::get(&state.db, id).await?;
    // The worker's next tick (a second at most) takes it.
    store::SCHEDULE.poke(&state.db, list.id).await?;
    Ok(store::get(&state.db, id).await?.view())
}

pub async fn series_detail(state: &AppState, id: i64) -> Result<SeriesDetail> {
    let series = store::series(&state.db, id).await?;
    Ok(SeriesDetail {
        parts: store::parts(&state.db, id).await?,
        series: series.view(),
    })
}

pub async fn commands(state: &AppState, id: i64) -> Result<Vec<kbot_api::lists::ListCommand>> {
    store::get(&state.db, id).await?;
    store::commands(&state.db, id, SHOWN).await
}

/// Every list's series, newest first (the dashboard's and the CLI's view).
pub async fn all_series(state: &AppState) -> Result<Vec<SeriesView>> {
    let mut out = Vec::new();
    for l in store::list(&state.db).await? {
        out.extend(
            store::series_of_list(&state.db, l.id, SHOWN)
                .await?
                .iter()
                .map(store::SeriesRow::view),
        );
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.id));
    Ok(out)
}

/// Starts the list worker; it runs until the server shuts down.
pub fn spawn_worker(state: AppState) -> tokio::task::JoinHandle<()> {
    let shutdown = state.shutdown.clone();
    let reader = Reader {
        state,
        last_fix_look: None,
    };
    tokio::spawn(worker::run(reader, shutdown, Pace::Every(TICK)))
}

/// The list worker: every [`TICK`], reads the due lists, then moves every
/// series and command pair on; every [`fixes::LOOK_EVERY`], looks for fixes.
struct Reader {
    state: AppState,
    /// The worker's own: servers sharing a process (tests, or replicas in
    /// one) each look on their own schedule.
    last_fix_look: Option<Instant>,
}

impl Worker for Reader {
    type Event = ();

    async fn event(&mut self) -> Option<()> {
        std::future::pending().await
    }

    async fn pass(&mut self, _: Woken<()>) {
        pass(&self.state).await;
        if self
            .last_fix_look
            .is_none_or(|t| t.elapsed() >= fixes::LOOK_EVERY)
        {
            self.last_fix_look = Some(Instant::now());
            if let Err(e) = fixes::look(&self.state).await {
                log_error("looking for fixes", None, &e);
            }
        }
    }
}

/// One pass: read due lists, then decide and post patchwork checks. A
/// pair's end reaches the lists through `robot::ended`.
async fn pass(state: &AppState) {
    let now = now_ms();
    match store::SCHEDULE.due::<ListRow>(&state.db, now).await {
        Ok(due) => {
            for l in due {
                match store::SCHEDULE
                    .claim(&state.db, l.id, l.next_check_at, l.interval_secs, now)
                    .await
                {
                    Ok(true) => check(state, &l).await,
                    Ok(false) => {}
                    Err(e) => log_error("claiming a list", Some(l.id), &e),
                }
            }
        }
        Err(e) => log_error("listing due lists", None, &e),
    }
    if let Err(e) = patchwork::resolve(state).await {
        log_error("deciding patchwork checks", None, &e);
    }
    if let Err(e) = patchwork::send_due(state).await {
        log_error("posting patchwork checks", None, &e);
    }
}

/// One look at a list: read new mail, act on commands, move its series on.
async fn check(state: &AppState, l: &ListRow) {
    let read = match ingest::read(state, l).await {
        Ok(read) => read,
        Err(e) => {
            let why = crate::error::error_chain(&e);
            tracing::warn!(list = l.id, error = %why, "list read failed");
            if let Err(e) = store::read_failed(&state.db, l.id, &why).await {
                log_error("recording a failed read", Some(l.id), &e);
            }
            return;
        }
    };
    for m in &read.replies {
        if let Err(e) = commands::take(state, l, m).await {
            log_error("taking a command", Some(l.id), &e);
        }
    }
    if let Err(e) = series::progress(state, l).await {
        log_error("assembling series", Some(l.id), &e);
    }
}

fn log_error(what: &str, list: Option<i64>, e: &Error) {
    tracing::error!(list, error = %crate::error::error_chain(e), "{what} failed");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_names_are_path_safe() {
        for good in ["linux-fsdevel", "lkml", "netdev.v2", "a_b"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".git", "a/b", "a b", "..", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}

#[cfg(test)]
mod format_patch_tests {
    use super::assemble::{assemble, MessageMeta};
    use super::message;
    use std::path::Path;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "Ann Author")
            .env("GIT_AUTHOR_EMAIL", "ann@example.org")
            .env("GIT_COMMITTER_NAME", "Cid Sender")
            .env("GIT_COMMITTER_EMAIL", "cid@example.org")
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Commits a file per subject; the last commit.
    fn commit_each(repo: &Path, subjects: &[&str]) -> String {
        for subject in subjects {
            std::fs::write(repo.join(subject.replace(' ', "_")), subject).expect("write");
            git(repo, &["add", "."]);
            git(repo, &["commit", "-q", "-m", subject]);
        }
        git(repo, &["rev-parse", "HEAD"])
    }

    /// `git format-patch -v2 --cover-letter --thread=shallow --base=...`
    /// output, parsed and assembled: one complete series with its cover
    /// letter and base.
    #[test]
    fn a_format_patch_series_assembles() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = tmp.path().join("repo");
        std::fs::create_dir(&repo).expect("mkdir");
        git(&repo, &["init", "-q", "-b", "main"]);
        let base = commit_each(&repo, &["base"]);
        commit_each(&repo, &["mm: one", "mm: two", "mm: three"]);
        let out = tmp.path().join("out");
        let (base_arg, out_arg) = (format!("--base={base}"), out.display().to_string());
        let args = [
            "format-patch",
            "-q",
            "-v2",
            "--cover-letter",
            "--thread=shallow",
        ];
        git(
            &repo,
            &[
                &args[..],
                &[base_arg.as_str(), "-o", out_arg.as_str(), "HEAD~3"],
            ]
            .concat(),
        );
        let mut files: Vec<_> = std::fs::read_dir(&out)
            .expect("patches")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        let parsed: Vec<_> = files
            .iter()
            .map(|f| message::parse(&std::fs::read(f).expect("read")).expect("parses"))
            .collect();
        let metas: Vec<_> = parsed.iter().map(|m| MessageMeta::new(m, 1)).collect();
        let drafts = assemble(&metas);
        assert_eq!(drafts.len(), 1, "{drafts:#?}");
        let series = &drafts[0];
        assert!(series.complete());
        assert_eq!((series.version, series.total), (2, 3));
        assert_eq!(series.cover.as_ref(), Some(&parsed[0].message_id));
        assert_eq!(series.key, parsed[0].message_id);
        // The cover letter is the sender's (the committer), the patches
        // the author's.
        assert_eq!(series.author, "cid@example.org");
        assert_eq!(parsed[1].from.address, "ann@example.org");
        assert_eq!(parsed[0].base_commit.as_deref(), Some(base.as_str()));
        assert_eq!(parsed[0].patch, None);
        assert_eq!(parsed[2].subject, "[PATCH v2 2/3] mm: two");
        let patch = parsed[2].patch.as_deref().expect("a diff");
        assert!(
            patch.starts_with("diff --git a/mm:_two b/mm:_two"),
            "{patch}"
        );
        assert!(!patch.contains("\n-- \n"), "{patch}");
    }
}
