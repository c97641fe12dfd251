//! The agent record: an enrolled test machine as stored, which an agent
//! token authenticates as and jobs are matched against. It is here, under
//! the features, because the token check ([`super::AgentAuth`]) and its
//! cache return it; enrolment is in `agents`.

use kbot_api::agent::{BootBackend, Hardware};
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::error::Result;

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
    pub state: String,
    pub last_seen_at: i64,
}

/// Columns [`AgentRecord::from_row`] reads, for `SELECT {AGENT_COLUMNS} FROM agents`.
pub const AGENT_COLUMNS: &str = "id, name, tbox_group, backend, arch, cpu_model, sockets, cores, \
     threads, numa_nodes, memory_bytes, page_size, microcode, kernel, host_hardware, state, \
     last_seen_at";

impl AgentRecord {
    pub fn from_row(row: &AnyRow) -> Result<AgentRecord> {
        let u32_col = |name: &str| -> Result<u32> {
            let v: i64 = row.try_get(name)?;
            Ok(u32::try_from(v).unwrap_or(u32::MAX))
        };
        let u64_col = |name: &str| -> Result<u64> {
            let v: i64 = row.try_get(name)?;
            Ok(u64::try_from(v).unwrap_or(0))
        };
        let backend: String = row.try_get("backend")?;
        Ok(AgentRecord {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            tbox_group: row.try_get("tbox_group")?,
            backend: parse_backend(&backend)?,
            hardware: Hardware {
                arch: row.try_get("arch")?,
                cpu_model: row.try_get("cpu_model")?,
                sockets: u32_col("sockets")?,
                cores: u32_col("cores")?,
                threads: u32_col("threads")?,
                numa_nodes: u32_col("numa_nodes")?,
                memory_bytes: u64_col("memory_bytes")?,
                page_size: u64_col("page_size")?,
                microcode: row.try_get("microcode")?,
                kernel: row.try_get("kernel")?,
            },
            host: match row.try_get::<Option<String>, _>("host_hardware")? {
                Some(json) => Some(serde_json::from_str(&json).map_err(|e| {
                    anyhow::anyhow!("stored host fingerprint is not valid JSON: {e}")
                })?),
                None => None,
            },
            state: row.try_get("state")?,
            last_seen_at: row.try_get("last_seen_at")?,
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

fn parse_backend(s: &str) -> Result<BootBackend> {
    match s {
        "qemu" => Ok(BootBackend::Qemu),
        "kexec" => Ok(BootBackend::Kexec),
        "host" => Ok(BootBackend::Host),
        other => Err(anyhow::anyhow!("unknown backend {other:?} in the agents table").into()),
    }
}
