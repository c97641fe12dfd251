//! Who follows a tree's branches by mail: addresses copied on an answer
//! about a change that landed on those branches (`mail_followers`,
//! migration 0031). A mailing list registers its posting address for its
//! tree when it is added, and takes it back when it is removed.

use crate::db::Tx;
use crate::error::Result;

/// `address` follows `branch` of repository `repo_id` for `follower` (its
/// one registration: a list's is `list/ID`).
pub async fn follow(
    tx: &mut Tx,
    follower: &str,
    repo_id: i64,
    branch: &str,
    address: &str,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO mail_followers (follower, repo_id, branch, address) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (follower) DO UPDATE SET repo_id = excluded.repo_id, \
         branch = excluded.branch, address = excluded.address",
    )
    .bind(follower)
    .bind(repo_id)
    .bind(branch)
    .bind(address.trim())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// `follower` follows nothing any more.
pub async fn unfollow(tx: &mut Tx, follower: &str) -> Result<()> {
    sqlx::query("DELETE FROM mail_followers WHERE follower = $1")
        .bind(follower)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The addresses that follow any of `branches` of repository `repo_id`,
/// oldest registration first.
pub async fn of_branches(tx: &mut Tx, repo_id: i64, branches: &[String]) -> Result<Vec<String>> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT branch, address FROM mail_followers WHERE repo_id = $1 ORDER BY id")
            .bind(repo_id)
            .fetch_all(&mut **tx)
            .await?;
    Ok(rows
        .into_iter()
        .filter(|(branch, _)| branches.contains(branch))
        .map(|(_, address)| address)
        .collect())
}
