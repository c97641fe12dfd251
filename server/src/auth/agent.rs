//! The agent record: an enrolled test machine as stored, which an agent
//! token authenticates as and jobs are matched against. It is here, under
//! the features, because the token check ([`super::AgentAuth`]) and its
//! cache return it; enrolment is in `agents`.

use kbot_api::agent::{BootBackend, Hardware};

use crate::db::JsonText;
use crate::error::{Error, Result};

kbot_api::wire_enum! {
    /// `agents.state`: what the agent last told the server it is doing.
    pub enum AgentState {
        Idle = "idle",
        Busy = "busy",
        Offline = "offline",
    }
}

/// An enrolled agent as stored.
#[derive(Debug, Clone)]
pub struct AgentRecord {
    pub id: i64,
    pub name: String,
    pub tbox_group: String,
    pub backend: BootBackend,
    /// The machine under test: jobs are matched against it.
    pub hardware: Hardware,
    /// The machine the agent runs on, when that is not the machine under
    /// test (qemu agents).
    pub host: Option<Hardware>,
    pub state: AgentState,
    pub last_seen_at: i64,
    /// The operator marked the machine disposable (at enrolment): a kexec
    /// agent runs list work only then (see `scheduler`).
    pub disposable: bool,
}

/// Columns [`AgentRow`] reads, for `SELECT {AGENT_COLUMNS} FROM agents`.
pub const AGENT_COLUMNS: &str = "id, name, tbox_group, backend, arch, cpu_model, sockets, cores, \
     threads, numa_nodes, memory_bytes, page_size, microcode, kernel, host_hardware, state, \
     last_seen_at, disposable";

/// An `agents` row as stored ([`AGENT_COLUMNS`]); [`AgentRecord`] is what
/// the rest of the server sees. The hardware's counts are `i64` columns
/// and `BootBackend` is `kbot-api`'s, so both are converted by hand.
#[derive(sqlx::FromRow)]
pub struct AgentRow {
    id: i64,
    name: String,
    tbox_group: String,
    backend: String,
    arch: String,
    cpu_model: String,
    sockets: i64,
    cores: i64,
    threads: i64,
    numa_nodes: i64,
    memory_bytes: i64,
    page_size: i64,
    microcode: Option<String>,
    kernel: String,
    host_hardware: Option<JsonText<Hardware>>,
    #[sqlx(try_from = "String")]
    state: AgentState,
    last_seen_at: i64,
    disposable: i64,
}

impl TryFrom<AgentRow> for AgentRecord {
    type Error = Error;

    fn try_from(row: AgentRow) -> Result<AgentRecord> {
        // Counts out of range saturate (u32) or read as unknown (u64, 0)
        // rather than fail: a fingerprint is shown and matched, never
        // written back.
        let count = |v: i64| u32::try_from(v).unwrap_or(u32::MAX);
        let size = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok(AgentRecord {
            id: row.id,
            name: row.name,
            tbox_group: row.tbox_group,
            backend: parse_backend(&row.backend)?,
            hardware: Hardware {
                arch: row.arch,
                cpu_model: row.cpu_model,
                sockets: count(row.sockets),
                cores: count(row.cores),
                threads: count(row.threads),
                numa_nodes: count(row.numa_nodes),
                memory_bytes: size(row.memory_bytes),
                page_size: size(row.page_size),
                microcode: row.microcode,
                kernel: row.kernel,
            },
            host: row.host_hardware.map(|JsonText(host)| host),
            state: row.state,
            last_seen_at: row.last_seen_at,
            disposable: row.disposable != 0,
        })
    }
}

pub fn backend_str(backend: BootBackend) -> &'static str {
    match backend {
        BootBackend::Qemu => "qemu",
        BootBackend::Kexec => "kexec",
        BootBackend::Host => "host",
    }
}

pub fn parse_backend(s: &str) -> Result<BootBackend> {
    match s {
        "qemu" => Ok(BootBackend::Qemu),
        "kexec" => Ok(BootBackend::Kexec),
        "host" => Ok(BootBackend::Host),
        other => Err(anyhow::anyhow!("unknown backend {other:?} in the agents table").into()),
    }
}
