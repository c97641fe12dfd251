//! Retention: what outsiders' mail made is not kept forever
//! (`KBOT_KEEP_REFS_DAYS`, `KBOT_KEEP_RAW_MAIL_DAYS`).
//!
//! A pass ([`prune`]) deletes, on each registered repo's mirror, the
//! `refs/kbot/series/LIST/ID` (and `ID-prerequisites`) refs of series that
//! finished before the refs' cutoff and the `refs/kbot/tests/REG/SHA` refs
//! of regressions whose last `#kbot test` was before it and none runs,
//! together with any such ref whose series or regression is gone; then it
//! packs the refs and lets git collect garbage (`gc --auto`). It drops the
//! raw text of list messages that are no patch (replies, commands) read
//! before the mail cutoff; their headers stay for threading. And it lets
//! built kernels nobody used go (`builds::retention`).
//!
//! The server runs it every `KBOT_GC_INTERVAL_HOURS` ([`spawn_worker`]),
//! `kbot-server gc` once.

use std::collections::HashSet;
use std::time::Duration;

use crate::builds;
use crate::error::Result;
use crate::repos;
use crate::state::AppState;
use crate::time::now_ms;
use crate::worker::{self, Pace, Woken, Worker};

/// What one pass removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    pub refs: usize,
    pub raw_mails: u64,
    pub builds: u64,
}

/// One retention pass at `now` (Unix ms) with the server's settings.
pub async fn prune(state: &AppState, now: i64) -> Result<Pruned> {
    let retention = &state.config.retention;
    let mut pruned = Pruned::default();
    if let Some(keep) = retention.keep_refs {
        let cutoff = now.saturating_sub(millis(keep));
        for repo in repos::list_repos(&state.db).await? {
            pruned.refs += prune_refs(state, repo.id, &repo.name, cutoff).await?;
        }
    }
    if let Some(keep) = retention.keep_raw_mail {
        pruned.raw_mails = drop_raw_replies(state, now.saturating_sub(millis(keep))).await?;
    }
    if let Some(keep) = retention.keep_builds {
        pruned.builds = builds::retention::prune(state, now.saturating_sub(millis(keep))).await?;
    }
    tracing::info!(
        refs = pruned.refs,
        raw_mails = pruned.raw_mails,
        builds = pruned.builds,
        "retention pass"
    );
    Ok(pruned)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Deletes the stale `refs/kbot/` refs of one repo's mirror; how many.
async fn prune_refs(state: &AppState, repo_id: i64, repo: &str, cutoff: i64) -> Result<usize> {
    let mirror = repos::mirror_for(state, repo);
    if !mirror.path().exists() {
        return Ok(0);
    }
    let names = mirror.ref_names("refs/kbot/").await?;
    if names.is_empty() {
        return Ok(0);
    }
    let kept = Kept::read(state, repo_id, cutoff).await?;
    let stale: Vec<String> = names.into_iter().filter(|n| !kept.keeps(n)).collect();
    if !stale.is_empty() {
        repos::delete_refs(state, repo, &stale).await?;
    }
    Ok(stale.len())
}

/// The refs a pass keeps: of series still waiting or testing or finished
/// since the cutoff, and of regressions with a `#kbot test` running or
/// made since it.
struct Kept {
    series: HashSet<(String, i64)>,
    regressions: HashSet<i64>,
}

impl Kept {
    async fn read(state: &AppState, repo_id: i64, cutoff: i64) -> Result<Kept> {
        let series: Vec<(String, i64)> = sqlx::query_as(
            "SELECT l.name, s.id FROM series s JOIN lists l ON l.id = s.list_id \
             WHERE l.repo_id = $1 AND (s.state IN ('waiting', 'testing') OR s.updated_at >= $2)",
        )
        .bind(repo_id)
        .bind(cutoff)
        .fetch_all(state.db.read())
        .await?;
        let regressions: Vec<i64> = sqlx::query_scalar(
            "SELECT DISTINCT regression_id FROM list_commands \
             WHERE regression_id IS NOT NULL AND (state = 'testing' OR created_at >= $1)",
        )
        .bind(cutoff)
        .fetch_all(state.db.read())
        .await?;
        Ok(Kept {
            series: series.into_iter().collect(),
            regressions: regressions.into_iter().collect(),
        })
    }

    /// Whether ref `name` stays. Names kbot never writes stay too: a pass
    /// deletes only what it understands.
    fn keeps(&self, name: &str) -> bool {
        match kbot_ref(name) {
            Some(KbotRef::Series { list, id }) => self.series.contains(&(list.to_owned(), id)),
            Some(KbotRef::Test { regression }) => self.regressions.contains(&regression),
            None => true,
        }
    }
}

/// A ref kbot writes under `refs/kbot/`.
#[derive(Debug, PartialEq, Eq)]
enum KbotRef<'a> {
    /// `refs/kbot/series/LIST/ID` or `.../ID-prerequisites`.
    Series { list: &'a str, id: i64 },
    /// `refs/kbot/tests/REGRESSION/SHA`.
    Test { regression: i64 },
}

fn kbot_ref(name: &str) -> Option<KbotRef<'_>> {
    let parts: Vec<&str> = name.strip_prefix("refs/kbot/")?.split('/').collect();
    match parts.as_slice() {
        ["series", list, id] => {
            let id = id.strip_suffix("-prerequisites").unwrap_or(id);
            Some(KbotRef::Series {
                list,
                id: id.parse().ok()?,
            })
        }
        ["tests", regression, _sha] => Some(KbotRef::Test {
            regression: regression.parse().ok()?,
        }),
        _ => None,
    }
}

/// Empties `raw` of the messages that are no patch, read before `cutoff`.
async fn drop_raw_replies(state: &AppState, cutoff: i64) -> Result<u64> {
    let done = sqlx::query(
        "UPDATE list_messages SET raw = $1 \
         WHERE is_patch = 0 AND read_at < $2 AND length(raw) > 0",
    )
    .bind(Vec::<u8>::new())
    .bind(cutoff)
    .execute(state.db.write())
    .await?;
    Ok(done.rows_affected())
}

/// Starts the retention worker when `KBOT_GC_INTERVAL_HOURS` is not 0; it
/// runs until the server shuts down.
pub fn spawn_worker(state: AppState) -> Option<tokio::task::JoinHandle<()>> {
    let every = state.config.retention.gc_interval?;
    let shutdown = state.shutdown.clone();
    Some(tokio::spawn(worker::run(
        Collector(state),
        shutdown,
        Pace::Every(every),
    )))
}

/// The retention worker: a [`prune`] pass at start-up and every interval.
struct Collector(AppState);

impl Worker for Collector {
    type Event = ();

    async fn event(&mut self) -> Option<()> {
        std::future::pending().await
    }

    async fn pass(&mut self, _: Woken<()>) {
        if let Err(e) = prune(&self.0, now_ms()).await {
            tracing::warn!(err = %crate::error::error_chain(&e), "retention pass failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kbot_refs_are_read_and_others_left_alone() {
        assert_eq!(
            kbot_ref("refs/kbot/series/netdev/12"),
            Some(KbotRef::Series {
                list: "netdev",
                id: 12
            })
        );
        assert_eq!(
            kbot_ref("refs/kbot/series/netdev/12-prerequisites"),
            Some(KbotRef::Series {
                list: "netdev",
                id: 12
            })
        );
        assert_eq!(
            kbot_ref("refs/kbot/tests/7/0123456789ab"),
            Some(KbotRef::Test { regression: 7 })
        );
        for other in [
            "refs/heads/master",
            "refs/kbot/series/netdev/x",
            "refs/kbot/other/1",
            "refs/kbot/series/a/b/1",
        ] {
            assert_eq!(kbot_ref(other), None, "{other}");
        }
    }
}
