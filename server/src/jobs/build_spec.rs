//! How an agent gets a job's kernel source and configuration: where it
//! fetches the repo from, and the named kernel config as a `kconfigs` row
//! (or a bare make target) says. The lease reply and the build orders both
//! hand them out.

use kbot_api::agent::{KconfigSpec, RepoSpec};
use sqlx::AnyConnection;

use crate::error::Result;
use crate::state::AppState;

/// A `kconfigs` row's columns, all NULL where no row has the name.
#[derive(sqlx::FromRow)]
pub(crate) struct KconfigRow {
    pub kconfig_id: Option<i64>,
    pub base: Option<String>,
    pub fragment: Option<String>,
    pub full_artifact: Option<String>,
}

/// Where an agent fetches repo `name` from: its URL, and the server's own
/// git of it for the series kbot applied from lists.
pub(crate) fn repo_spec(state: &AppState, name: String, url: String) -> RepoSpec {
    RepoSpec {
        series_url: Some(state.config.mail.git_url(&name)),
        name,
        // The one place a stored URL leaves whole: the agent clones a
        // private tree with it. Only an agent's token reads a lease or an
        // order.
        url,
    }
}

/// The kernel config named `name` (a make target when no `kconfigs` row
/// has the name).
pub(crate) async fn kconfig_named(
    state: &AppState,
    conn: &mut AnyConnection,
    name: &str,
) -> Result<KconfigSpec> {
    let row = sqlx::query_as::<_, KconfigRow>(
        "SELECT k.id AS kconfig_id, k.base, k.fragment, k.full_artifact \
         FROM kconfigs k WHERE k.name = $1",
    )
    .bind(name)
    .fetch_optional(conn)
    .await?
    .unwrap_or(KconfigRow {
        kconfig_id: None,
        base: None,
        fragment: None,
        full_artifact: None,
    });
    kconfig_spec(state, name, &row).await
}

/// The named kernel config from its `kconfigs` columns in `row`.
pub(crate) async fn kconfig_spec(
    state: &AppState,
    name: &str,
    row: &KconfigRow,
) -> Result<KconfigSpec> {
    if row.kconfig_id.is_none() {
        return Ok(KconfigSpec::make_target(name));
    }
    let full = match &row.full_artifact {
        Some(path) => Some(state.artifacts.get(path).await?),
        None => None,
    };
    Ok(KconfigSpec {
        name: name.to_string(),
        base: row.base.clone(),
        // NOT NULL in a `kconfigs` row (NULL only where none joined).
        fragment: row.fragment.clone().unwrap_or_default(),
        full,
    })
}
