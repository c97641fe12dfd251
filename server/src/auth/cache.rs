//! A short-lived in-process memory of agent tokens already checked.
//!
//! Every agent call (lease, heartbeat, event, upload) starts with the token
//! check, a read of `tokens` joined with `agents`: a quarter of the
//! statements of a lease-to-upload cycle. An agent makes those calls seconds
//! apart with the same token, so the answer is kept for a few seconds.
//!
//! What a cached answer can miss, for at most the TTL: a token revoked by
//! the agent's re-enrolment on *another* replica (the replica that enrols
//! forgets the agent at once), and a changed fingerprint. The record's
//! `state` and `last_seen_at` are as of the check; the agent endpoints do
//! not read them. Only tokens that checked out are kept, so a flood of bad
//! tokens cannot grow the map; it is pruned of expired entries as it grows.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::AgentRecord;

/// Past this many entries an insert first drops the expired ones.
const PRUNE_AT: usize = 4096;

#[derive(Debug)]
pub struct AgentTokenCache {
    ttl: Duration,
    /// By token hash: when the entry was checked, and the agent.
    entries: Mutex<HashMap<String, (Instant, AgentRecord)>>,
}

impl AgentTokenCache {
    /// A TTL of zero keeps nothing.
    pub fn new(ttl: Duration) -> AgentTokenCache {
        AgentTokenCache {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The agent behind `token_hash`, if checked less than a TTL ago.
    pub fn get(&self, token_hash: &str) -> Option<AgentRecord> {
        let entries = self.lock();
        let (checked, record) = entries.get(token_hash)?;
        (checked.elapsed() < self.ttl).then(|| record.clone())
    }

    pub fn insert(&self, token_hash: String, record: AgentRecord) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = self.lock();
        if entries.len() >= PRUNE_AT {
            entries.retain(|_, (checked, _)| checked.elapsed() < self.ttl);
        }
        entries.insert(token_hash, (Instant::now(), record));
    }

    /// Drops every token of `agent_id` (its tokens were just revoked).
    pub fn forget_agent(&self, agent_id: i64) {
        self.lock().retain(|_, (_, record)| record.id != agent_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, AgentRecord)>> {
        // A panic while holding the lock cannot leave the map inconsistent
        // (every critical section is a single map operation).
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kbot_api::agent::{BootBackend, Hardware};

    fn record(id: i64) -> AgentRecord {
        AgentRecord {
            id,
            name: format!("agent-{id}"),
            tbox_group: "vm-2p".into(),
            backend: BootBackend::Host,
            hardware: Hardware {
                arch: "x86_64".into(),
                cpu_model: "test CPU".into(),
                sockets: 1,
                cores: 2,
                threads: 2,
                numa_nodes: 1,
                memory_bytes: 1 << 30,
                page_size: 4096,
                microcode: None,
                kernel: "6.1.0".into(),
            },
            host: None,
            state: crate::auth::AgentState::Idle,
            last_seen_at: 0,
            disposable: false,
        }
    }

    #[test]
    fn answers_within_the_ttl_only() {
        let cache = AgentTokenCache::new(Duration::from_millis(50));
        cache.insert("h1".into(), record(1));
        assert_eq!(cache.get("h1").map(|r| r.id), Some(1));
        assert!(cache.get("h2").is_none());
        std::thread::sleep(Duration::from_millis(60));
        assert!(cache.get("h1").is_none());
    }

    #[test]
    fn zero_ttl_keeps_nothing() {
        let cache = AgentTokenCache::new(Duration::ZERO);
        cache.insert("h1".into(), record(1));
        assert!(cache.get("h1").is_none());
    }

    #[test]
    fn forgetting_an_agent_drops_all_its_tokens() {
        let cache = AgentTokenCache::new(Duration::from_secs(60));
        cache.insert("old".into(), record(1));
        cache.insert("new".into(), record(1));
        cache.insert("other".into(), record(2));
        cache.forget_agent(1);
        assert!(cache.get("old").is_none());
        assert!(cache.get("new").is_none());
        assert_eq!(cache.get("other").map(|r| r.id), Some(2));
    }
}
