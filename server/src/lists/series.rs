//! From posted mails to a tested series: assembly into series (waiting for
//! missing parts, superseding older versions that have not started), the
//! base, `git am -3` into `refs/kbot/series/LIST/ID`, the pair, and how it
//! ended.

use kbot_api::lists::ListEventKind;

use super::answers;
use super::assemble::{self, MessageMeta, SeriesDraft};
use super::base::{self, Base};
use super::locate;
use super::pairs::{self, Purpose};
use super::patches;
use super::patchwork::{self, CheckState};
use super::prerequisites;
use super::store::{self, ListRow, SeriesRow, SeriesState};
use super::subject;
use crate::error::Result;
use crate::repos::git::Am;
use crate::repos::{self, RepoRow};
use crate::state::AppState;
use crate::time::now_ms;

/// Messages older than this (by when kbot read them) no longer join series.
const ASSEMBLY_WINDOW_MS: i64 = 30 * 24 * 3600 * 1000;

/// Assembles the list's open patch mails and moves each series on.
pub async fn progress(state: &AppState, l: &ListRow) -> Result<()> {
    let now = now_ms();
    let rows = store::open_patch_messages(&state.db, l.id, now - ASSEMBLY_WINDOW_MS).await?;
    let metas: Vec<MessageMeta> = rows.iter().map(meta).collect();
    for draft in assemble::assemble(&metas) {
        let s = record(state, l, &draft, &rows).await?;
        if s.state != SeriesState::Waiting {
            continue;
        }
        supersede_older(state, l, &s, &draft).await?;
        let max_parts = state.config.lists.max_parts;
        if draft.total > max_parts {
            let why = format!(
                "it has {} patches, and kbot tests series of at most {max_parts}",
                draft.total
            );
            refuse(state, (l, &s), SeriesState::TooLarge, &why, Notice::Series).await?;
        } else if draft.complete() {
            apply_and_submit(state, l, &s, &draft, &rows).await?;
        } else if now - s.last_part_at > l.wait_secs * 1000 {
            let missing: Vec<String> = draft.missing().iter().map(u32::to_string).collect();
            let detail = format!(
                "patches {} of {} never came within {} s",
                missing.join(", "),
                draft.total,
                l.wait_secs
            );
            let mut tx = state.db.begin().await?;
            if store::set_state(
                &mut tx,
                s.id,
                SeriesState::Waiting,
                SeriesState::Incomplete,
                Some(&detail),
            )
            .await?
            {
                store::event(
                    &mut tx,
                    l.id,
                    ListEventKind::Incomplete,
                    &format!("series {}: {detail}", s.id),
                )
                .await?;
            }
            tx.commit().await?;
        }
    }
    Ok(())
}

fn meta(r: &store::MessageMetaRow) -> MessageMeta {
    MessageMeta {
        message_id: r.message_id.clone(),
        in_reply_to: r.in_reply_to.clone(),
        references: r
            .refs
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        subject: subject::parse(&r.subject),
        from_address: r.from_address.clone(),
        date_ms: r.date_ms,
        has_patch: r.has_diff != 0,
    }
}

/// The series' `change-id:`: the cover letter's, else the first patch's
/// that has one.
fn change_id(draft: &SeriesDraft, rows: &[store::MessageMetaRow]) -> Option<String> {
    draft
        .cover
        .iter()
        .chain(draft.patches.values())
        .find_map(|id| {
            rows.iter()
                .find(|r| &r.message_id == id)
                .and_then(|r| r.change_id.clone())
        })
}

/// Stores the draft as a series (new, or with the parts that came since).
async fn record(
    state: &AppState,
    l: &ListRow,
    draft: &SeriesDraft,
    rows: &[store::MessageMetaRow],
) -> Result<SeriesRow> {
    let version = i64::from(draft.version);
    let existing = store::series_by_key(&state.db, l.id, &draft.key, version).await?;
    if existing
        .as_ref()
        .is_some_and(|s| s.state != SeriesState::Waiting)
    {
        return existing.ok_or_else(|| anyhow::anyhow!("series vanished").into());
    }
    let known = match &existing {
        Some(s) => store::parts(&state.db, s.id).await?.len(),
        None => 0,
    };
    let parts = draft
        .cover
        .iter()
        .map(|c| (0u32, c))
        .chain(draft.patches.iter().map(|(i, m)| (*i, m)));
    let now = now_ms();
    let mut tx = state.db.begin().await?;
    let id = match &existing {
        Some(s) => s.id,
        None => {
            let author_name = rows
                .iter()
                .find(|r| r.from_address == draft.author)
                .map(|r| r.from_name.clone())
                .unwrap_or_default();
            let id = store::insert_series(
                &mut tx,
                &store::NewSeries {
                    list_id: l.id,
                    key: &draft.key,
                    version,
                    total: i64::from(draft.total),
                    rfc: draft.rfc,
                    title: &draft.title,
                    author_name: &author_name,
                    author_address: &draft.author,
                    posted_at: draft.first_date_ms,
                    last_part_at: now,
                    change_id: change_id(draft, rows).as_deref(),
                },
            )
            .await?;
            let detail = format!(
                "series {id}: v{} {} ({} patches) by {}",
                draft.version, draft.title, draft.total, draft.author
            );
            store::event(&mut tx, l.id, ListEventKind::Series, &detail).await?;
            id
        }
    };
    let mut count = 0;
    for (index, message_id) in parts {
        store::put_part(&mut tx, id, i64::from(index), message_id).await?;
        count += 1;
    }
    if existing.is_some() && count > known {
        store::touch_series(&mut tx, id, now).await?;
    }
    tx.commit().await?;
    store::series(&state.db, id).await
}

/// A newer version supersedes the author's older versions of the same
/// series that have not started.
async fn supersede_older(
    state: &AppState,
    l: &ListRow,
    s: &SeriesRow,
    draft: &SeriesDraft,
) -> Result<()> {
    for older in store::older_waiting(&state.db, l.id, &s.author_address, s.version).await? {
        let older_draft = SeriesDraft {
            key: older.series_key.clone(),
            version: u32::try_from(older.version).unwrap_or(0),
            total: u32::try_from(older.total).unwrap_or(0),
            rfc: older.rfc != 0,
            title: older.title.clone(),
            author: older.author_address.clone(),
            cover: None,
            patches: Default::default(),
            first_date_ms: older.posted_at,
            last_date_ms: older.last_part_at,
            references: Default::default(),
        };
        // b4's change-id names the series across versions (titles change);
        // the author must still be the same.
        let same = match (&s.change_id, &older.change_id) {
            (Some(new), Some(old)) => new == old,
            _ => assemble::supersedes(draft, &older_draft),
        };
        if !same {
            continue;
        }
        let mut tx = state.db.begin().await?;
        if store::superseded(&mut tx, older.id, s.id).await? {
            let detail = format!(
                "series {} superseded by series {} (v{})",
                older.id, s.id, s.version
            );
            store::event(&mut tx, l.id, ListEventKind::Superseded, &detail).await?;
        }
        tx.commit().await?;
    }
    Ok(())
}

/// A series' base once its prerequisite patches are applied on it.
enum Prepared {
    /// The base, with the prerequisites on it (kept at
    /// `refs/kbot/series/LIST/ID-prerequisites`) when it names any.
    Ready(Base),
    /// A prerequisite was never posted or does not apply: the plain base,
    /// and why.
    Refused(Base, String),
}

/// The series' base with its prerequisite patches applied ([`Prepared`]).
async fn with_prerequisites(
    state: &AppState,
    l: &ListRow,
    s: &SeriesRow,
    repo: &RepoRow,
    base: Base,
    ids: &[&String],
    rows: &[store::MessageMetaRow],
) -> Result<Prepared> {
    let named = prerequisites::named(rows, ids);
    if named.is_empty() {
        return Ok(Prepared::Ready(base));
    }
    let texts = match prerequisites::posted(&state.db, &named).await? {
        prerequisites::Posted::All(texts) => texts,
        prerequisites::Posted::Missing(id) => {
            let why = format!(
                "prerequisite-patch-id {id} is not among the patches posted to the lists kbot reads"
            );
            return Ok(Prepared::Refused(base, why));
        }
    };
    match patches::apply(state, repo, &base.sha, &texts).await? {
        Am::Applied(tip) => {
            let name = format!("refs/kbot/series/{}/{}-prerequisites", l.name, s.id);
            repos::mirror_for(state, &repo.name)
                .set_ref(&name, &tip)
                .await?;
            let how = format!("{} + {} prerequisite patch(es)", base.how, named.len());
            Ok(Prepared::Ready(Base { sha: tip, how }))
        }
        Am::Refused(why) => Ok(Prepared::Refused(
            base,
            format!("the prerequisite patches: {why}"),
        )),
    }
}

/// Applies a complete series on its base and queues its pair; a series
/// that does not apply is answered and not tested.
async fn apply_and_submit(
    state: &AppState,
    l: &ListRow,
    s: &SeriesRow,
    draft: &SeriesDraft,
    rows: &[store::MessageMetaRow],
) -> Result<()> {
    if let Some(why) = oversized_patch(state, l, draft).await? {
        return refuse(state, (l, s), SeriesState::TooLarge, &why, Notice::Series).await;
    }
    let repo = repos::repo_by_id(&state.db, l.repo_id).await?;
    let mut texts = Vec::new();
    for message_id in draft.patches.values() {
        texts.push(patches::mail_text(
            &store::message(&state.db, l.id, message_id).await?.raw,
        ));
    }
    let posting = base::Posting {
        draft,
        rows,
        patches: &texts.concat(),
    };
    let base = base::choose(state, l, &repo, &posting).await?;
    let ids: Vec<&String> = draft.cover.iter().chain(draft.patches.values()).collect();
    let base = match with_prerequisites(state, l, s, &repo, base, &ids, rows).await? {
        Prepared::Ready(base) => base,
        Prepared::Refused(base, why) => return cannot_apply(state, l, s, &repo, &base, &why).await,
    };
    let mirror = repos::mirror_for(state, &repo.name);
    let tip = match patches::apply(state, &repo, &base.sha, &texts).await? {
        Am::Applied(tip) => tip,
        Am::Refused(why) => return cannot_apply(state, l, s, &repo, &base, &why).await,
    };
    let ref_name = format!("refs/kbot/series/{}/{}", l.name, s.id);
    let commits = mirror.rev_list(&base.sha, &tip, true).await?;
    let mut parts = Vec::new();
    for (index, sha) in (1i64..).zip(&commits) {
        parts.push((
            index,
            sha.clone(),
            mirror.patch_id(sha).await.ok().flatten(),
        ));
    }
    let applied = store::Applied {
        base_sha: &base.sha,
        base_how: &base.how,
        ref_name: &ref_name,
        tip_sha: &tip,
        commits: &parts,
    };
    if let Some(tested) = tested_before(state, l, s, &applied).await? {
        mirror.set_ref(&ref_name, &tip).await?;
        return duplicate(state, l, s, &applied, &tested).await;
    }
    // A refused series leaves no ref behind.
    if let Some((why, notice)) = over_quota(state, l, s).await? {
        return refuse(state, (l, s), SeriesState::OverQuota, &why, notice).await;
    }
    mirror.set_ref(&ref_name, &tip).await?;
    let base_commit = repos::resolve_commit(state, &repo, &base.sha).await?;
    let tip_commit = repos::resolve_commit(state, &repo, &tip).await?;
    let mut tx = state.db.begin().await?;
    if !store::set_state(
        &mut tx,
        s.id,
        SeriesState::Waiting,
        SeriesState::Testing,
        None,
    )
    .await?
    {
        return Ok(());
    }
    store::applied(&mut tx, s.id, &applied).await?;
    let pair = (&base_commit, &tip_commit);
    let submission = pairs::queue(state, &mut tx, l, pair, Purpose::Series).await?;
    store::set_submission(&mut tx, s.id, submission).await?;
    let testing = format!("kbot is testing the series on {}", base.sha);
    patchwork::set_all(state, &mut tx, s, CheckState::Pending, &testing).await?;
    let detail = format!(
        "series {} applied on {} ({}) as {ref_name} = {tip}; submission {submission}",
        s.id, base.sha, base.how
    );
    store::event(&mut tx, l.id, ListEventKind::Applied, &detail).await?;
    tx.commit().await?;
    state.wake_lessees();
    tracing::info!(list = l.id, series = s.id, %tip, submission, "series applied and queued");
    Ok(())
}

/// Why the series is not applied when one of its patch mails is larger than
/// the server applies (`KBOT_LIST_MAX_PATCH_BYTES`).
async fn oversized_patch(
    state: &AppState,
    l: &ListRow,
    draft: &SeriesDraft,
) -> Result<Option<String>> {
    let max = state.config.lists.max_patch_bytes;
    for (index, message_id) in &draft.patches {
        let size = store::message_size(&state.db, l.id, message_id).await?;
        if u64::try_from(size).unwrap_or(u64::MAX) > max {
            return Ok(Some(format!(
                "patch {index} is a mail of {size} bytes, and kbot applies patch mails of at \
                 most {max} bytes"
            )));
        }
    }
    Ok(None)
}

/// The series of the list already queued with the same patches (patch-ids,
/// in order) on the same base: posting a patch again under a new
/// Message-ID does not test it again.
async fn tested_before(
    state: &AppState,
    l: &ListRow,
    s: &SeriesRow,
    applied: &store::Applied<'_>,
) -> Result<Option<SeriesRow>> {
    let ids: Option<Vec<String>> = applied.commits.iter().map(|c| c.2.clone()).collect();
    match ids {
        Some(ids) => store::tested_same(&state.db, l.id, applied.base_sha, &ids, s.id).await,
        None => Ok(None),
    }
}

/// Ends the series `duplicate` of `tested`, applied but not tested again.
async fn duplicate(
    state: &AppState,
    l: &ListRow,
    s: &SeriesRow,
    applied: &store::Applied<'_>,
    tested: &SeriesRow,
) -> Result<()> {
    let detail = format!(
        "the same patches on the same base ({}) as series {} ({}); not tested again",
        applied.base_sha,
        tested.id,
        tested.state.as_str()
    );
    let mut tx = state.db.begin().await?;
    if store::duplicate(&mut tx, s.id, tested.id, &detail).await? {
        store::applied(&mut tx, s.id, applied).await?;
        let what = format!("series {}: {detail}", s.id);
        store::event(&mut tx, l.id, ListEventKind::Duplicate, &what).await?;
        tx.commit().await?;
    }
    Ok(())
}

const DAY_MS: i64 = 24 * 3600 * 1000;

/// Why the series is not tested when its sender's, or its list's, pairs of
/// the last 24 hours reached the daily quota, and who hears of it.
async fn over_quota(
    state: &AppState,
    l: &ListRow,
    s: &SeriesRow,
) -> Result<Option<(String, Notice)>> {
    let limits = &state.config.lists;
    let since = now_ms() - DAY_MS;
    let sender = &s.author_address;
    let by_sender = store::pairs_since(&state.db, l.id, Some(sender), since).await?;
    if by_sender >= i64::from(limits.sender_daily_pairs) {
        let why = format!(
            "{sender} had {by_sender} series tested on {} in the last 24 hours, the most kbot \
             tests for one sender in a day; kindly post it again after that",
            l.name
        );
        return Ok(Some((why, Notice::SenderToday)));
    }
    let on_list = store::pairs_since(&state.db, l.id, None, since).await?;
    if on_list >= i64::from(limits.list_daily_pairs) {
        let why = format!(
            "{} had {on_list} series tested in the last 24 hours, the most kbot tests on it in \
             a day",
            l.name
        );
        return Ok(Some((why, Notice::Nobody)));
    }
    Ok(None)
}

/// Who hears that a series is not tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Notice {
    /// No one (the list's own quota: the sender did nothing wrong).
    Nobody,
    /// The series' sender, in its thread.
    Series,
    /// The series' sender, once a day per list (a flood gets one answer).
    SenderToday,
}

/// Ends a `waiting` series untested in `to`, with an event on the list and
/// the answer `notice` asks for.
async fn refuse(
    state: &AppState,
    (l, s): (&ListRow, &SeriesRow),
    to: SeriesState,
    why: &str,
    notice: Notice,
) -> Result<()> {
    let mut tx = state.db.begin().await?;
    if !store::set_state(&mut tx, s.id, SeriesState::Waiting, to, Some(why)).await? {
        return Ok(());
    }
    let answer = match notice {
        Notice::Nobody => false,
        Notice::Series => true,
        Notice::SenderToday => {
            let day = now_ms() / DAY_MS;
            store::quota_noticed(&mut tx, l.id, &s.author_address, day).await?
        }
    };
    if answer {
        answers::not_tested(state, &mut tx, (l, s), to.as_str(), why).await?;
    }
    let what = format!("series {}: {why}", s.id);
    store::event(&mut tx, l.id, to.event(), &what).await?;
    tx.commit().await?;
    tracing::info!(
        list = l.id,
        series = s.id,
        state = to.as_str(),
        "series not tested"
    );
    Ok(())
}

async fn cannot_apply(
    state: &AppState,
    l: &ListRow,
    s: &SeriesRow,
    repo: &RepoRow,
    base: &Base,
    why: &str,
) -> Result<()> {
    let mut tx = state.db.begin().await?;
    let detail = format!("git am -3 on {} ({}):\n{why}", base.sha, base.how);
    if !store::set_state(
        &mut tx,
        s.id,
        SeriesState::Waiting,
        SeriesState::CannotApply,
        Some(&detail),
    )
    .await?
    {
        return Ok(());
    }
    store::set_base(&mut tx, s.id, &base.sha, &base.how).await?;
    answers::cannot_apply(state, &mut tx, l, s, repo, (&base.sha, &base.how), why).await?;
    let refused = format!("does not apply on {} ({})", base.sha, base.how);
    patchwork::set_all(state, &mut tx, s, CheckState::Fail, &refused).await?;
    store::event(
        &mut tx,
        l.id,
        ListEventKind::CannotApply,
        &format!("series {}: {detail}", s.id),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(list = l.id, series = s.id, "series does not apply");
    Ok(())
}

/// A series' pair ended (`robot::ended`): the series is `tested`,
/// `build_failed` (answered with the compiler's lines, after finding the
/// patch that breaks the build when there are several) or `failed`.
pub async fn pair_ended(state: &AppState, submission: i64) -> Result<()> {
    let Some(s) = store::testing_series_of(&state.db, submission).await? else {
        // Superseded or removed meanwhile, or another replica was told first.
        return Ok(());
    };
    if locate::probe_of(state, s.id).await?.is_some() {
        return Ok(());
    }
    let outcome = answers::pair_outcome(&state.db, submission).await?;
    let l = store::get(&state.db, s.list_id).await?;
    // Several patches and a tip that does not build: find the one that breaks it.
    let probe = match (outcome.head_finished, &outcome.build_log) {
        (0, Some(_)) => locate::first(state, &l, &s).await?,
        _ => None,
    };
    let mut tx = state.db.begin().await?;
    if let Some(target) = probe {
        locate::probe(state, &mut tx, &l, &s, &target).await?;
        tx.commit().await?;
        return Ok(());
    }
    let (to, detail) = conclusion(state, &mut tx, (&l, &s), submission, &outcome).await?;
    if store::set_state(&mut tx, s.id, SeriesState::Testing, to, Some(&detail)).await? {
        if to == SeriesState::Tested {
            super::versions::answer_if_changed(state, &mut tx, &l, &s).await?;
        }
        store::event(
            &mut tx,
            l.id,
            to.event(),
            &format!("series {}: {detail}", s.id),
        )
        .await?;
        tx.commit().await?;
    }
    Ok(())
}

/// What a series becomes once its pair ended without a probe to run, with
/// the build failure's answer and the patchwork checks that go with it.
async fn conclusion(
    state: &AppState,
    tx: &mut crate::db::Tx,
    (l, s): (&ListRow, &SeriesRow),
    submission: i64,
    outcome: &answers::PairOutcome,
) -> Result<(SeriesState, String)> {
    Ok(if outcome.head_finished > 0 {
        let verdict = super::versions::verdict_line(tx, submission).await?;
        (
            SeriesState::Tested,
            format!("tested: submission {submission}: {verdict}"),
        )
    } else if let Some(log) = outcome.build_log.as_deref() {
        let place = answers::series_place(state, l, s).await?;
        answers::build_failed(state, tx, (l, s), &place, log).await?;
        let broken = "the series does not build (see the answer in its thread)";
        patchwork::set_all(state, tx, s, CheckState::Fail, broken).await?;
        (
            SeriesState::BuildFailed,
            format!("the series' tip does not build:\n{log}"),
        )
    } else {
        let why = outcome.head_failure.as_deref().unwrap_or("no finished run");
        let untested = format!("kbot could not run the tests: {why}");
        patchwork::set_all(state, tx, s, CheckState::Warning, &untested).await?;
        (SeriesState::Failed, format!("the tip did not run: {why}"))
    })
}
