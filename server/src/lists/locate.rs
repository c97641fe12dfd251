//! Which patch of a series breaks the build. 0-day answers a build error in
//! the thread of the patch that introduced it; kbot does too. When a
//! series' tip does not build and the series has several patches, the
//! breaking patch is bisected: between the last patch known to build (the
//! base at first) and the first known not to (the tip), the middle patch is
//! built (a `verify` pair, base against the patch: never reported by
//! itself), until the two are neighbours. A series of n patches costs at
//! most ⌈log2 n⌉ builds. The breaking patch is answered with its own
//! compiler lines. A one-patch series is answered at once.

use kbot_api::lists::{ListEventKind, SeriesPart};

use super::answers;
use super::pairs::{self, Purpose};
use super::store::{self, ListRow, SeriesRow, SeriesState};
use crate::db::Tx;
use crate::error::Result;
use crate::repos::{self, StoredCommit};
use crate::state::AppState;

/// The patch being built and its pair, and what is known: every patch up
/// to `good_index` builds (0: the base), patch `bad_index` does not, as the
/// build log of `bad_submission_id` shows.
#[derive(Debug, Clone, Copy, sqlx::FromRow)]
pub struct Probe {
    pub part_index: i64,
    pub submission_id: i64,
    pub good_index: i64,
    pub bad_index: i64,
    pub bad_submission_id: Option<i64>,
}

/// A probe with the series it moves on.
#[derive(sqlx::FromRow)]
struct SeriesProbe {
    series_id: i64,
    #[sqlx(flatten)]
    probe: Probe,
}

const PROBE_COLUMNS: &str = "part_index, submission_id, good_index, bad_index, bad_submission_id";

pub async fn probe_of(state: &AppState, series_id: i64) -> Result<Option<Probe>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {PROBE_COLUMNS} FROM series_build_probes WHERE series_id = $1"
    ))
    .bind(series_id)
    .fetch_optional(state.db.read())
    .await?)
}

/// The series' patches (not the cover letter), in order.
async fn patches(state: &AppState, s: &SeriesRow) -> Result<Vec<SeriesPart>> {
    let mut parts = store::parts(&state.db, s.id).await?;
    parts.retain(|p| p.index > 0 && p.commit.is_some());
    Ok(parts)
}

/// Where the bisection stands: patches up to `good` build, patch `bad`
/// does not (`bad_submission`'s log shows it).
#[derive(Debug, Clone, Copy)]
struct Bounds {
    good: i64,
    bad: i64,
    bad_submission: Option<i64>,
}

/// A patch to build, with its commit and the series' base resolved outside
/// any transaction (resolving may store the commits).
pub struct Target {
    index: i64,
    bounds: Bounds,
    base: StoredCommit,
    head: StoredCommit,
}

/// The middle patch between the bounds.
async fn target(
    state: &AppState,
    l: &ListRow,
    s: &SeriesRow,
    parts: &[SeriesPart],
    bounds: Bounds,
) -> Result<Target> {
    let index = bounds.good + (bounds.bad - bounds.good) / 2;
    let part = parts
        .iter()
        .find(|p| i64::from(p.index) == index)
        .ok_or_else(|| anyhow::anyhow!("series {} has no applied patch {index}", s.id))?;
    let repo = repos::repo_by_id(&state.db, l.repo_id).await?;
    let base_sha = s.base_sha.as_deref().unwrap_or_default();
    let base = repos::resolve_commit(state, &repo, base_sha).await?;
    let head_sha = part.commit.as_deref().unwrap_or_default();
    let head = repos::resolve_commit(state, &repo, head_sha).await?;
    Ok(Target {
        index,
        bounds,
        base,
        head,
    })
}

/// The tip did not build: the first patch to build (the middle one), or
/// `None` for a one-patch series (nothing to look for).
pub async fn first(state: &AppState, l: &ListRow, s: &SeriesRow) -> Result<Option<Target>> {
    let parts = patches(state, s).await?;
    let Some(last) = parts.last().filter(|_| parts.len() >= 2) else {
        return Ok(None);
    };
    let bounds = Bounds {
        good: 0,
        bad: i64::from(last.index),
        bad_submission: s.submission_id,
    };
    Ok(Some(target(state, l, s, &parts, bounds).await?))
}

/// Queues base against the target patch and records it as the series' probe.
pub async fn probe(
    state: &AppState,
    tx: &mut Tx,
    l: &ListRow,
    s: &SeriesRow,
    t: &Target,
) -> Result<()> {
    let pair = (&t.base, &t.head);
    let id = pairs::queue(state, tx, l, pair, Purpose::BuildProbe).await?;
    let (index, b) = (t.index, t.bounds);
    sqlx::query(
        "INSERT INTO series_build_probes (series_id, part_index, submission_id, good_index, \
             bad_index, bad_submission_id) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (series_id) DO UPDATE SET part_index = $7, submission_id = $8, \
             good_index = $9, bad_index = $10, bad_submission_id = $11",
    )
    .bind(s.id)
    .bind(index)
    .bind(id)
    .bind(b.good)
    .bind(b.bad)
    .bind(b.bad_submission)
    .bind(index)
    .bind(id)
    .bind(b.good)
    .bind(b.bad)
    .bind(b.bad_submission)
    .execute(&mut **tx)
    .await?;
    let detail = format!(
        "series {}: the tip does not build; patches up to {} build, {} does not; \
         building patch {index} (submission {id})",
        s.id, b.good, b.bad
    );
    store::event(tx, l.id, ListEventKind::BuildProbe, &detail).await?;
    state.wake_lessees();
    Ok(())
}

/// A build probe's pair ended (`robot::ended`): moves its series' probe on.
pub async fn probe_ended(state: &AppState, submission_id: i64) -> Result<()> {
    let found: Option<SeriesProbe> = sqlx::query_as(&format!(
        "SELECT series_id, {PROBE_COLUMNS} FROM series_build_probes WHERE submission_id = $1"
    ))
    .bind(submission_id)
    .fetch_optional(state.db.read())
    .await?;
    let Some(SeriesProbe { series_id, probe }) = found else {
        // A later probe replaced it, or another replica was told first.
        return Ok(());
    };
    let s = store::series(&state.db, series_id).await?;
    if s.state != SeriesState::Testing {
        return Ok(());
    }
    let l = store::get(&state.db, s.list_id).await?;
    step(state, &l, &s, probe).await
}

/// Moves a probe on once its pair ended: the next patch to build, or the
/// answer in the thread of the patch that breaks the build.
async fn step(state: &AppState, l: &ListRow, s: &SeriesRow, p: Probe) -> Result<()> {
    let outcome = answers::pair_outcome(&state.db, p.submission_id).await?;
    let parts = patches(state, s).await?;
    let bounds = match outcome.build_log {
        Some(_) => Bounds {
            good: p.good_index,
            bad: p.part_index,
            bad_submission: Some(p.submission_id),
        },
        None => Bounds {
            good: p.part_index,
            bad: p.bad_index,
            bad_submission: p.bad_submission_id,
        },
    };
    if bounds.bad - bounds.good > 1 {
        let next = target(state, l, s, &parts, bounds).await?;
        let mut tx = state.db.begin().await?;
        probe(state, &mut tx, l, s, &next).await?;
        tx.commit().await?;
        return Ok(());
    }
    let culprit = parts
        .iter()
        .find(|part| i64::from(part.index) == bounds.bad)
        .ok_or_else(|| anyhow::anyhow!("series {} has no patch {}", s.id, bounds.bad))?;
    let log = match bounds.bad_submission {
        Some(id) => answers::pair_outcome(&state.db, id).await?.build_log,
        None => None,
    }
    .unwrap_or_default();
    let place = answers::message_place(state, l, &culprit.message_id).await?;
    let detail = format!(
        "patch {} of {} does not build ({}):\n{log}",
        culprit.index,
        parts.len(),
        culprit.subject
    );
    let mut tx = state.db.begin().await?;
    answers::build_failed(state, &mut tx, (l, s), &place, &log).await?;
    sqlx::query("DELETE FROM series_build_probes WHERE series_id = $1")
        .bind(s.id)
        .execute(&mut *tx)
        .await?;
    let (from, to) = (SeriesState::Testing, SeriesState::BuildFailed);
    if store::set_state(&mut tx, s.id, from, to, Some(&detail)).await? {
        let what = format!("series {}: {detail}", s.id);
        store::event(&mut tx, l.id, ListEventKind::BuildFailed, &what).await?;
        tx.commit().await?;
    }
    Ok(())
}
