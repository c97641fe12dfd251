//! Regression reports: `reports`, `report show` and `report resend`.

use clap::Subcommand;

use kbot_api::reports::StoredReport;

use super::{client, Connection};
use crate::error::Result;
use crate::output;

#[derive(Debug, Clone, Subcommand)]
pub enum ReportCommand {
    /// A report: its message as written (with `--json`, also its state,
    /// recipients and delivery attempts).
    Show {
        #[command(flatten)]
        conn: Connection,
        /// The report's id or Message-ID.
        id: String,
    },
    /// Send an `uncertain` report (its sender stopped while handing it to
    /// the relay: it may have arrived) or a `failed` one (again).
    Resend {
        #[command(flatten)]
        conn: Connection,
        /// The report's id or Message-ID.
        id: String,
    },
}

pub(super) async fn list(conn: &Connection) -> Result<()> {
    let reports = client(conn)?.reports().await?;
    if conn.json {
        return output::json(&reports);
    }
    for r in &reports {
        output::line(&report_line(r))?;
    }
    Ok(())
}

pub(super) async fn run(cmd: ReportCommand) -> Result<()> {
    match cmd {
        ReportCommand::Show { conn, id } => show(&conn, &id).await,
        ReportCommand::Resend { conn, id } => resend(&conn, &id).await,
    }
}

async fn show(conn: &Connection, id: &str) -> Result<()> {
    let detail = client(conn)?.report(id).await?;
    if conn.json {
        return output::json(&detail);
    }
    // The message ends with its own line end, as a mail does.
    output::line(detail.report.message.trim_end_matches('\n'))
}

async fn resend(conn: &Connection, id: &str) -> Result<()> {
    let detail = client(conn)?.resend_report(id).await?;
    // Through a JSON value, whose keys print sorted, as they did
    // before the answer had a type.
    output::json(&serde_json::to_value(&detail)?)
}

fn report_line(r: &StoredReport) -> String {
    format!(
        "{}\t{}\t{}\t{}\t{}",
        r.id,
        r.state,
        kbot_server::time::format_time(r.created_at),
        r.message_id,
        r.subject
    )
}
