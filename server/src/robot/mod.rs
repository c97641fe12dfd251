//! The robot's one "a pair ended" dispatch: the comparison worker, which
//! ends submissions, tells each ended submission to the feature that
//! queued it, by the [`Origin`] stored with it (`comparisons::OnEnded`).
//! No feature polls for its pairs' outcomes; a feature told twice (a
//! replica that died before marking it told) finds its own state moved on
//! and does nothing.

use futures::future::BoxFuture;

use crate::error::Result;
use crate::jobs::Origin;
use crate::state::AppState;

/// Tells submission `id`'s origin that it ended (done or cancelled).
pub fn ended(state: &AppState, id: i64, origin: Origin) -> BoxFuture<'_, Result<()>> {
    Box::pin(async move {
        match origin {
            // A person reads the result; a bisection steps on its probes'
            // uploads (`bisect::spawn_worker`).
            Origin::User | Origin::BisectProbe => Ok(()),
            Origin::Watch => crate::watches::pair_ended(state, id).await,
            Origin::Series => crate::lists::series::pair_ended(state, id).await,
            Origin::BuildProbe => crate::lists::locate::probe_ended(state, id).await,
            Origin::Recheck => crate::lists::commands::pair_ended(state, id).await,
            Origin::Verify => crate::bisect::verify_ended(state, id).await,
        }
    })
}
