//! Which patch of a series breaks the build. 0-day answers a build error in
//! the thread of the patch that introduced it; kbot does too. When a
//! series' tip does not build and the series has several patches, they are
//! built one by one from the first (a `verify` pair each, base against the
//! patch: never reported by itself) until one fails. The first that fails
//! is answered with its own compiler lines; when every earlier patch builds,
//! the last one broke it. A one-patch series is answered at once.

use kbot_api::lists::SeriesPart;

use super::answers;
use super::series::Purpose;
use super::store::{self, ListRow, SeriesRow, SeriesState};
use crate::db::Tx;
use crate::error::Result;
use crate::jobs::SubmissionState;
use crate::repos::{self, StoredCommit};
use crate::state::AppState;

/// The patch being built and its pair.
#[derive(Debug, Clone, Copy, sqlx::FromRow)]
pub struct Probe {
    pub part_index: i64,
    pub submission_id: i64,
}

pub async fn probe_of(state: &AppState, series_id: i64) -> Result<Option<Probe>> {
    Ok(sqlx::query_as(
        "SELECT part_index, submission_id FROM series_build_probes WHERE series_id = $1",
    )
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

/// A patch to build, with its commit and the series' base resolved outside
/// any transaction (resolving may store the commits).
pub struct Target {
    index: u32,
    base: StoredCommit,
    head: StoredCommit,
}

async fn target(state: &AppState, l: &ListRow, s: &SeriesRow, part: &SeriesPart) -> Result<Target> {
    let repo = repos::repo_by_id(&state.db, l.repo_id).await?;
    let base_sha = s.base_sha.as_deref().unwrap_or_default();
    let base = repos::resolve_commit(state, &repo, base_sha).await?;
    let head_sha = part.commit.as_deref().unwrap_or_default();
    let head = repos::resolve_commit(state, &repo, head_sha).await?;
    Ok(Target {
        index: part.index,
        base,
        head,
    })
}

/// The tip did not build: the first patch to build, or `None` for a
/// one-patch series (nothing to look for).
pub async fn first(state: &AppState, l: &ListRow, s: &SeriesRow) -> Result<Option<Target>> {
    let parts = patches(state, s).await?;
    if parts.len() < 2 {
        return Ok(None);
    }
    Ok(Some(target(state, l, s, &parts[0]).await?))
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
    let id = super::series::queue(state, tx, l, pair, Purpose::BuildProbe).await?;
    let index = i64::from(t.index);
    sqlx::query(
        "INSERT INTO series_build_probes (series_id, part_index, submission_id) \
         VALUES ($1, $2, $3) \
         ON CONFLICT (series_id) DO UPDATE SET part_index = $4, submission_id = $5",
    )
    .bind(s.id)
    .bind(index)
    .bind(id)
    .bind(index)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    let detail = format!(
        "series {}: the tip does not build; building patch {index} (submission {id})",
        s.id
    );
    store::event(tx, l.id, "build_probe", &detail).await?;
    state.wake_lessees();
    Ok(())
}

/// Moves a probe on once its pair has settled: the next patch, or the
/// answer in the thread of the patch that breaks the build.
pub async fn step(state: &AppState, l: &ListRow, s: &SeriesRow, p: Probe) -> Result<()> {
    let outcome = answers::pair_outcome(&state.db, p.submission_id).await?;
    if outcome.state == SubmissionState::Active {
        return Ok(());
    }
    let parts = patches(state, s).await?;
    let at = parts
        .iter()
        .position(|part| i64::from(part.index) == p.part_index);
    let (culprit, log) = match (outcome.build_log, at) {
        (Some(log), Some(i)) => (&parts[i], log),
        (None, Some(i)) if i + 2 < parts.len() => {
            let next = target(state, l, s, &parts[i + 1]).await?;
            let mut tx = state.db.begin().await?;
            probe(state, &mut tx, l, s, &next).await?;
            tx.commit().await?;
            return Ok(());
        }
        // Every patch before the last builds: the last breaks it (the tip's log).
        _ => {
            let tip = s.submission_id.unwrap_or_default();
            let log = answers::pair_outcome(&state.db, tip).await?.build_log;
            let last = parts
                .last()
                .ok_or_else(|| anyhow::anyhow!("series {} has no patches", s.id))?;
            (last, log.unwrap_or_default())
        }
    };
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
        store::event(&mut tx, l.id, "build_failed", &what).await?;
        tx.commit().await?;
    }
    Ok(())
}
