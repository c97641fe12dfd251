//! Kernel profiles as agents upload them: the folded call stacks of one
//! extra, unmeasured execution of a workload (QEMU guests with perf), kept
//! in `result_profiles` (migration 0017) with the result they belong to.
//!
//! This feature only stores them ([`insert`], called by `jobs::results` in
//! the upload's transaction). A run's profile is served by `jobs::profile`;
//! the comparison of two sides (a pair, a bisection step) is a dashboard
//! page (`dashboard::profiles`), which reads the pairs and steps it compares.

use kbot_api::agent::FoldedProfile;

use crate::db::Tx;
use crate::error::Result;

/// Stores the profile of result `result_id`, in the upload's transaction.
/// A result has one profile: a second write of the same result changes
/// nothing.
pub async fn insert(tx: &mut Tx, result_id: i64, profile: &FoldedProfile) -> Result<()> {
    sqlx::query(
        "INSERT INTO result_profiles (result_id, event, folded) VALUES ($1, $2, $3) \
         ON CONFLICT (result_id) DO NOTHING",
    )
    .bind(result_id)
    .bind(&profile.event)
    .bind(&profile.folded)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
