//! The agents' dashboard page: every enrolled test machine, its tbox group,
//! hardware, state and last heartbeat.

use askama::Template;
use axum::extract::State;
use kbot_core::report::describe_machine;

use crate::auth::{AgentRecord, AgentRow as StoredAgent, AGENT_COLUMNS};
use crate::error::Error;
use crate::state::AppState;
use crate::time::format_time;
use crate::web::{render, PageResult};

#[derive(Template)]
#[template(path = "agents.html")]
struct AgentsPage {
    agents: Vec<AgentRow>,
}

/// `GET /agents`.
pub async fn agents(State(state): State<AppState>) -> PageResult {
    let rows = sqlx::query_as::<_, StoredAgent>(&format!(
        "SELECT {AGENT_COLUMNS} FROM agents ORDER BY tbox_group, name"
    ))
    .fetch_all(state.db.read())
    .await
    .map_err(Error::from)?;
    let agents = rows
        .into_iter()
        .map(|row| AgentRecord::try_from(row).map(|a| AgentRow::from(&a)))
        .collect::<Result<Vec<_>, Error>>()?;
    render(&AgentsPage { agents })
}

pub struct AgentRow {
    pub name: String,
    pub tbox_group: String,
    pub machine: String,
    pub state: String,
    pub last_heartbeat: String,
}

impl From<&AgentRecord> for AgentRow {
    fn from(a: &AgentRecord) -> AgentRow {
        AgentRow {
            name: a.name.clone(),
            tbox_group: a.tbox_group.clone(),
            machine: machine_line(a),
            state: a.state.to_string(),
            last_heartbeat: format_time(a.last_seen_at),
        }
    }
}

/// The machine under test with its arch, page size and kernel; for a qemu
/// agent the guest, then the host it runs on.
fn machine_line(a: &AgentRecord) -> String {
    let one = |hw: &kbot_core::machine::Hardware| {
        format!(
            "{} ({}, {} pages, kernel {})",
            describe_machine(hw),
            hw.arch,
            kbot_core::needs::human_size(hw.page_size),
            hw.kernel
        )
    };
    match &a.host {
        Some(host) => format!("guest: {}; host: {}", one(&a.hardware), one(host)),
        None => one(&a.hardware),
    }
}
