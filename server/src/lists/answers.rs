//! The answers kbot posts in a list thread that are no KPI report: a series
//! that does not apply, a tip that does not build, and what a `#kbot`
//! command did. Each goes In-Reply-To the mail it is about, To its author,
//! Cc the list and the other recipients (`mail::thread`).

use std::fmt::Write;

use kbot_core::build_log;

use super::store::{self, ListRow, SeriesRow};
use crate::db::{Db, Tx};
use crate::error::{Error, Result};
use crate::jobs::SubmissionState;
use crate::mail::thread::{self, Answer, ThreadPlace};
use crate::repos::RepoRow;
use crate::state::AppState;
use crate::web::without_credentials;

/// Most compiler lines quoted from a failed build, as 0-day trims them.
const MAX_BUILD_LINES: usize = 30;

/// How a series' pair ended on its head side.
#[derive(sqlx::FromRow)]
pub struct PairOutcome {
    #[sqlx(try_from = "String")]
    pub state: SubmissionState,
    pub head_finished: i64,
    pub head_failure: Option<String>,
    /// The agent's build log tail when a head job failed to build.
    pub build_log: Option<String>,
}

pub async fn pair_outcome(db: &Db, submission_id: i64) -> Result<PairOutcome> {
    sqlx::query_as::<_, PairOutcome>(
        "SELECT s.state, \
             (SELECT COUNT(*) FROM jobs j WHERE j.submission_id = s.id AND j.side = 'head' \
              AND j.state = 'finished') AS head_finished, \
             (SELECT MIN(j.failure) FROM jobs j WHERE j.submission_id = s.id \
              AND j.side = 'head' AND j.state = 'failed') AS head_failure, \
             (SELECT MIN(j.failure_detail) FROM jobs j WHERE j.submission_id = s.id \
              AND j.side = 'head' AND j.state = 'failed' AND j.failure = 'build_failed') \
              AS build_log \
         FROM submissions s WHERE s.id = $1",
    )
    .bind(submission_id)
    .fetch_optional(db.read())
    .await?
    .ok_or_else(|| Error::not_found("submission", submission_id))
}

/// The series' place to answer: its cover letter, else patch 1.
pub async fn series_place(state: &AppState, l: &ListRow, s: &SeriesRow) -> Result<ThreadPlace> {
    let parts = store::parts(&state.db, s.id).await?;
    let first = parts
        .iter()
        .min_by_key(|p| p.index)
        .ok_or_else(|| anyhow::anyhow!("series {} has no parts", s.id))?;
    message_place(state, l, &first.message_id).await
}

/// A stored message's place as the parent of an answer.
pub async fn message_place(state: &AppState, l: &ListRow, message_id: &str) -> Result<ThreadPlace> {
    let m = store::message(&state.db, l.id, message_id).await?;
    Ok(thread::place_of(
        m.message_id.clone(),
        &m.refs,
        m.subject.clone(),
        (m.from_name.clone(), m.from_address.clone()),
        m.recipients.0,
        l.address.as_deref(),
    ))
}

fn greeting(place: &ThreadPlace) -> String {
    let name = place
        .to
        .name
        .as_deref()
        .and_then(|n| n.split_whitespace().next())
        .unwrap_or("");
    if name.is_empty() {
        "Hi,\n\n".into()
    } else {
        format!("Hi {name},\n\n")
    }
}

/// `[cannot apply to TREE/BRANCH]`, with git am's words; no test follows.
pub async fn cannot_apply(
    state: &AppState,
    tx: &mut Tx,
    l: &ListRow,
    s: &SeriesRow,
    repo: &RepoRow,
    (base, how): (&str, &str),
    why: &str,
) -> Result<()> {
    let place = series_place(state, l, s).await?;
    let config = &state.config.mail;
    let mut body = greeting(&place);
    let _ = write!(
        body,
        "{} tried to test your patch series, but it does not apply.\n\n\
         [cannot apply to {}/{}]\n\n\
         base: {} {} ({base}, chosen as: {how})\n\
         patch link: {}\n\n\
         git am -3 said:\n\n{}\n\n\
         If the series is meant for another tree or needs other patches first, kindly say\n\
         so with `git format-patch --base=<commit>` (the base-commit: and\n\
         prerequisite-patch-id: lines), as documented in\n\
         https://git-scm.com/docs/git-format-patch#_base_tree_information\n",
        config.report.robot_name,
        repo.name,
        l.branch,
        without_credentials(&repo.url),
        l.branch,
        thread::patch_link(l.web_url.as_deref(), &l.name, &place.parent),
        indent(&am_lines(why), 40),
    );
    body.push_str(&thread::signature(config));
    let answer = Answer {
        place: &place,
        identity_key: format!("cannot-apply/{}/{}", l.id, s.id),
        body,
        submission_id: None,
    };
    thread::enqueue_answer(tx, config, &answer).await?;
    Ok(())
}

/// The series does not build: the compiler's error lines, in reply to
/// `place` (the patch that breaks it, or the cover letter).
pub async fn build_failed(
    state: &AppState,
    tx: &mut Tx,
    (l, s): (&ListRow, &SeriesRow),
    place: &ThreadPlace,
    log: &str,
) -> Result<()> {
    let config = &state.config.mail;
    let jobs = super::pairs::list_jobs(state, l)?.0;
    let job = jobs.first();
    let mut body = greeting(place);
    let _ = write!(
        body,
        "{} noticed the following build errors:\n\n\
         [auto build test ERROR on {}/{}]\n\n\
         url: {} {}\n\
         base: {} ({})\n\
         patch link: {}\n\
         config: {}\n\
         compiler: {}\n\n\
         If you fix the issue in a separate patch/commit (i.e. not just a new version of the\n\
         same patch/commit), kindly add following tags\n\
         | Reported-by: {}\n\n\
         All errors (new ones prefixed by >>):\n\n{}\n",
        config.report.robot_name,
        l.repo_name,
        l.branch,
        config.git_url(&l.repo_name),
        s.ref_name.as_deref().unwrap_or_default(),
        s.base_sha.as_deref().unwrap_or_default(),
        s.base_how.as_deref().unwrap_or_default(),
        thread::patch_link(l.web_url.as_deref(), &l.name, &place.parent),
        job.map_or("", |j| j.kconfig.as_str()),
        job.map_or("", |j| j.compiler.as_str()),
        config.report.identity(),
        indent(&compiler_lines(log), MAX_BUILD_LINES),
    );
    body.push_str(&thread::signature(config));
    let answer = Answer {
        place,
        identity_key: format!("build-failed/{}/{}", l.id, s.id),
        body,
        submission_id: s.submission_id,
    };
    thread::enqueue_answer(tx, config, &answer).await?;
    Ok(())
}

/// Longest line quoted from a build log or git am's output.
const MAX_QUOTED_CHARS: usize = 200;

/// What is said when a log has no line of a known form.
const NOTHING_QUOTABLE: &str =
    "(no line of a known diagnostic form; the whole log is on the dashboard)";

/// The lines of git am's output (and kbot's own reasons) worth quoting, of
/// fixed forms only: a posting chooses the rest of the text (its subject,
/// its commit message), and kbot quotes no free text a stranger wrote.
pub fn am_lines(why: &str) -> String {
    let known = |l: &str| {
        l.starts_with("error: patch failed: ")
            || (l.starts_with("error: ") && l.ends_with(": patch does not apply"))
            || l.starts_with("error: sha1 information is lacking")
            || l.starts_with("error: Failed to merge in the changes")
            || l.starts_with("CONFLICT (")
            || l.starts_with("@@ ")
            || l.starts_with("prerequisite-patch-id ")
            || l == "git am made no commit"
    };
    let mut out: Vec<String> = Vec::new();
    for line in why.lines().map(str::trim_end) {
        if let Some(rest) = line.strip_prefix("Patch failed at ") {
            // `Patch failed at 0002 SUBJECT`: the number only.
            let number: String = rest.chars().take_while(char::is_ascii_digit).collect();
            out.push(format!("Patch failed at {number}"));
        } else if known(line) {
            out.push(clip(line));
        }
    }
    if out.is_empty() {
        NOTHING_QUOTABLE.into()
    } else {
        out.join("\n")
    }
}

fn clip(line: &str) -> String {
    match line.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line.to_owned(),
    }
}

/// The lines of a build log a developer needs, as kbuild reports show them:
/// the compiler's diagnostics (`file:line:col: error:`, with the source line
/// and caret under each), the `In function` lines above them and make's
/// `*** ... Error` lines, paths relative to the source tree, each clipped.
/// Nothing else: the rest of a log is whatever the patch's build printed.
/// Kconfig's `.config:N:warning: override` chatter and make's directory
/// lines are not diagnostics.
pub fn compiler_lines(log: &str) -> String {
    let src = source_dir(log);
    let picked = build_log::pick(log, build_log::Keep::Diagnostics);
    if picked.is_empty() {
        return NOTHING_QUOTABLE.into();
    }
    picked
        .iter()
        .map(|l| match &src {
            Some(dir) => l.replace(dir.as_str(), ""),
            None => (*l).to_owned(),
        })
        .map(|l| {
            if l.contains(": error:") {
                format!(">> {}", clip(&l))
            } else {
                format!("   {}", clip(&l))
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The source tree of the build (`make -C DIR`), with a trailing slash.
fn source_dir(log: &str) -> Option<String> {
    let rest = log.split("make -C ").nth(1)?;
    let dir = rest.split_whitespace().next()?;
    Some(format!("{}/", dir.trim_end_matches('/')))
}

/// `text` indented by four spaces, at most `max` lines.
fn indent(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines.iter().take(max).map(|l| format!("    {l}")).collect();
    if lines.len() > max {
        out.push(format!("    [... {} more lines]", lines.len() - max));
    }
    out.join("\n")
}

/// The series will not be tested, and why (too large, or its sender's
/// daily quota spent), in reply to its cover letter (or patch 1). `key`
/// names the answer; no text of the mail is quoted.
pub async fn not_tested(
    state: &AppState,
    tx: &mut Tx,
    (l, s): (&ListRow, &SeriesRow),
    key: &str,
    why: &str,
) -> Result<()> {
    let place = series_place(state, l, s).await?;
    let config = &state.config.mail;
    let mut body = greeting(&place);
    let _ = writeln!(
        body,
        "{} did not test your patch series: {why}",
        config.report.robot_name
    );
    body.push_str(&thread::signature(config));
    let answer = Answer {
        place: &place,
        identity_key: format!("not-tested/{key}/{}/{}", l.id, s.id),
        body,
        submission_id: None,
    };
    thread::enqueue_answer(tx, config, &answer).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real kbuild failure as the agent reports it (paths shortened):
    /// the error, its source excerpt and make's error lines, nothing of
    /// kconfig's overrides or make's directory lines.
    #[test]
    fn compiler_lines_of_a_kernel_build() {
        let log = "$ make -C /w/linux O=/w/objs ARCH=x86_64 olddefconfig\n\
            .config:1303:warning: override: reassigning to symbol 64BIT\n\
            make[1]: Entering directory '/w/objs'\n\
            $ make -C /w/linux O=/w/objs ARCH=x86_64 -j2 bzImage\n\
              CC      kernel/sys.o\n\
            /w/linux/kernel/sys.c: In function \u{2018}kbot_e2e_helper\u{2019}:\n\
            /w/linux/kernel/sys.c:2844:16: error: \u{2018}kbot_e2e_limit\u{2019} undeclared\n\
             2844 |         return kbot_e2e_limit;\n\
                  |                ^~~~~~~~~~~~~~\n\
            make[3]: *** [/w/linux/scripts/Makefile.build:255: kernel/sys.o] Error 1\n\
            make[1]: Leaving directory '/w/objs'\n";
        let out = compiler_lines(log);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 5, "{out}");
        assert!(
            lines[1].starts_with(">> kernel/sys.c:2844:16: error:"),
            "{out}"
        );
        assert!(
            lines[2].contains("2844 |") && lines[3].contains("^~~"),
            "{out}"
        );
        assert!(
            lines[4].contains("scripts/Makefile.build:255: kernel/sys.o] Error 1"),
            "{out}"
        );
        assert!(
            !out.contains("override") && !out.contains("Entering"),
            "{out}"
        );
    }

    #[test]
    fn compiler_lines_keep_diagnostics() {
        let log = "  CC fs/pipe.o\nfs/pipe.c:12:5: error: 'x' undeclared\n   12 | x = 1;\n      | ^\n  CC other.o\nmake[2]: *** [fs/pipe.o] Error 1\n";
        let out = compiler_lines(log);
        assert!(out.contains(">> fs/pipe.c:12:5: error: 'x' undeclared"));
        assert!(out.contains("make[2]"));
        assert!(!out.contains("CC other.o"));
    }

    #[test]
    fn a_log_of_free_text_is_not_quoted() {
        let out = compiler_lines("#kbot invalid\nBUY NOW http://x\n");
        assert!(!out.contains("#kbot") && !out.contains("BUY"), "{out}");
        assert_eq!(out, NOTHING_QUOTABLE);
    }

    #[test]
    fn git_am_output_is_quoted_by_form() {
        let why = "Applying: BUY NOW http://x\n\
            error: patch failed: kernel/sys.c:1\n\
            error: kernel/sys.c: patch does not apply\n\
            Patch failed at 0002 BUY NOW http://x\n\
            hint: Use 'git am --show-current-patch=diff' to see the failed patch\n";
        let out = am_lines(why);
        assert_eq!(
            out,
            "error: patch failed: kernel/sys.c:1\n\
             error: kernel/sys.c: patch does not apply\nPatch failed at 0002"
        );
        assert_eq!(am_lines("#kbot invalid\nBUY NOW"), NOTHING_QUOTABLE);
        let long = format!("error: patch failed: {}:1", "a".repeat(500));
        assert!(am_lines(&long).len() < 260);
    }

    #[test]
    fn indent_caps_lines() {
        assert_eq!(indent("a\nb\nc", 2), "    a\n    b\n    [... 1 more lines]");
    }
}
