//! `#kbot test`: a patch in the reply, or a commit it names, tested against
//! the report's first bad commit.

use kbot_api::lists::CommandName;

use super::{queue_check, short, testing, Taken};
use crate::error::Result;
use crate::lists::answers;
use crate::lists::message::ListMessage;
use crate::lists::recheck::Reported;
use crate::repos::{self, git::Am};
use crate::state::AppState;

/// `#kbot test`: the patch in the mail on top of the first bad commit, or
/// the named commit of the report's repo, against the first bad commit.
pub(super) async fn test(
    state: &AppState,
    r: &Reported,
    m: &ListMessage,
    (name, argument): (CommandName, String),
    repo_name: Option<&str>,
    rev: Option<&str>,
) -> Result<Taken> {
    let repo = r.repo(&state.db).await?;
    let first_bad = r.first_bad(state).await?;
    let fix = match (repo_name, rev) {
        (Some(named), Some(rev)) => {
            if named != repo.name {
                return Ok(Taken::refused(
                    name,
                    argument,
                    format!(
                    "the report is about repo {}; kbot compares commits within one registered repo",
                    repo.name
                ),
                ));
            }
            let resolved = match mail_rev(rev) {
                Ok(specs) => resolve_first(state, &repo, &specs).await,
                Err(why) => return Ok(Taken::refused(name, argument, why)),
            };
            match resolved {
                Ok(c) => c,
                Err(e) => {
                    return Ok(Taken::refused(
                        name,
                        argument,
                        crate::error::error_chain(&e),
                    ))
                }
            }
        }
        (None, None) if m.patch.is_some() => {
            let mirror = repos::mirror_for(state, &repo.name);
            let raw = reply_mbox(m)?;
            let paths =
                crate::lists::patches::touched_paths(m.patch.as_deref().unwrap_or_default());
            let robot = &state.config.mail.report.robot_address;
            match mirror
                .am(&first_bad.sha, raw, &paths, ("kbot", robot))
                .await?
            {
                Am::Applied(tip) => {
                    let ref_name = format!("refs/kbot/tests/{}/{}", r.regression_id, short(&tip));
                    mirror.set_ref(&ref_name, &tip).await?;
                    repos::resolve_commit(state, &repo, &tip).await?
                }
                Am::Refused(why) => {
                    return Ok(Taken::refused(
                        name,
                        argument,
                        format!(
                            "the patch does not apply on the first bad commit {}:\n{}",
                            first_bad.sha,
                            answers::am_lines(&why)
                        ),
                    ))
                }
            }
        }
        _ => return Ok(Taken::refused(
            name,
            argument,
            "#kbot test needs a patch in the mail (inline or attached), or REPO and BRANCH|COMMIT"
                .into(),
        )),
    };
    let id = queue_check(state, r, &first_bad, &fix).await?;
    Ok(testing(
        name,
        argument,
        id,
        format!(
            "{} against the first bad commit {}",
            short(&fix.sha),
            short(&first_bad.sha)
        ),
    ))
}

/// The reply itself as a one-message mbox: git am takes the patch from it
/// (the reply's text becomes the commit message, as with any posted patch).
fn reply_mbox(m: &ListMessage) -> Result<Vec<u8>> {
    let mut text = format!(
        "From: {} <{}>\nSubject: {}\nDate: {}\n\n",
        m.from.name.as_deref().unwrap_or(&m.from.address),
        m.from.address,
        m.subject.replace(['\r', '\n'], " "),
        chrono::DateTime::from_timestamp_millis(m.date_ms.unwrap_or(0))
            .unwrap_or_default()
            .to_rfc2822()
    );
    let body = m
        .body
        .split(m.patch.as_deref().unwrap_or("\u{0}"))
        .next()
        .unwrap_or_default();
    for line in body
        .lines()
        .filter(|l| !l.starts_with('>') && !l.trim_start().starts_with("#kbot"))
    {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str("---\n");
    text.push_str(m.patch.as_deref().unwrap_or_default());
    crate::lists::patches::mboxrd(&[text])
}

/// A revision a mail may name: a full commit id, or a plain branch or tag
/// name (git check-ref-format's rules, nothing `rev-parse` would evaluate:
/// no `^{/regex}`, `@{...}`, `~N`), as the refs to try in order.
fn mail_rev(rev: &str) -> std::result::Result<Vec<String>, String> {
    if repos::git::is_full_sha(rev) {
        return Ok(vec![rev.to_ascii_lowercase()]);
    }
    let bad_char = |c: char| c.is_ascii_control() || c.is_whitespace() || "~^:?*[\\@{}".contains(c);
    let component_ok = |c: &str| {
        !c.is_empty() && !c.starts_with('.') && !c.ends_with(".lock") && !c.ends_with('.')
    };
    let plain = !rev.is_empty()
        && rev.len() <= 200
        && !rev.starts_with('-')
        && !rev.contains("..")
        && !rev.chars().any(bad_char)
        && rev.split('/').all(component_ok);
    if plain {
        Ok(vec![
            format!("refs/heads/{rev}"),
            format!("refs/tags/{rev}"),
        ])
    } else {
        Err(format!(
            "{rev:?} is neither a full commit id nor a plain branch or tag name: kbot takes \
             no revision expressions (^, ~, @{{...}}, :/) from mail"
        ))
    }
}

/// The first of `specs` the repo has.
async fn resolve_first(
    state: &AppState,
    repo: &repos::RepoRow,
    specs: &[String],
) -> Result<repos::StoredCommit> {
    let mut last = None;
    for spec in specs {
        match repos::resolve_commit(state, repo, spec).await {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no revision given").into()))
}
