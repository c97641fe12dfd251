//! Bisections: `bisections`, `bisect show` and `bisect cancel`.

use clap::Subcommand;

use super::{client, Connection};
use crate::error::Result;
use crate::output;

#[derive(Debug, Clone, Subcommand)]
pub enum BisectCommand {
    /// A bisection and its steps (JSON).
    Show {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
    /// Cancel a bisection and its queued runs.
    Cancel {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
}

pub(super) async fn list(conn: &Connection, limit: u32) -> Result<()> {
    output::json(&client(conn)?.bisections(limit).await?)
}

pub(super) async fn run(cmd: BisectCommand) -> Result<()> {
    match cmd {
        BisectCommand::Show { conn, id } => output::json(&client(&conn)?.bisection(id).await?),
        BisectCommand::Cancel { conn, id } => {
            output::json(&client(&conn)?.cancel_bisection(id).await?)
        }
    }
}
