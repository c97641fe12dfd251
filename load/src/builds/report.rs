//! What `kbot-load builds` reports: the agents' counts, the store's, and
//! whether the run held.

use std::collections::BTreeSet;

/// What the store holds after the run.
#[derive(Debug, Default)]
pub struct BuildCounts {
    /// Rows of `builds`: one per key ever claimed.
    pub builds: i64,
    /// `SUM(builds.claims)`: more than `builds` when a claim passed on.
    pub claims: i64,
    pub ready: i64,
    pub failed: i64,
    /// Distinct commits of finished or failed jobs.
    pub commits_ended: i64,
    pub finished_jobs: i64,
    pub build_failed_jobs: i64,
    pub queued_jobs: i64,
    /// Jobs still leased (or in a later active state).
    pub active_jobs: i64,
    /// Rows of `build_orders` (a lab run's kernels ordered ahead).
    pub orders: i64,
    /// `SUM(build_orders.leases)`: more than `orders` when a builder died.
    pub order_leases: i64,
}

/// Counts of the agents, then of the database.
#[derive(Debug, Default)]
pub struct BuildsReport {
    pub agents: usize,
    /// Dedicated builders (0: every agent builds what it is first to need).
    pub builders: usize,
    pub groups: usize,
    pub commits: usize,
    /// Of those, commits seeded not to build.
    pub failing_commits: usize,
    pub seconds: f64,
    pub jobs: u64,
    pub heartbeats: u64,
    /// `Build` answers: builds the agents ran.
    pub build_answers: u64,
    /// Of those, builds that failed (`build_failed` sent).
    pub builds_failed: u64,
    pub downloads: u64,
    pub downloaded_bytes: u64,
    /// Downloads whose bytes matched the listed, sent and expected SHA-256.
    pub sha_checks: u64,
    pub wait_answers: u64,
    /// Time the waiting jobs slept as told, in all.
    pub wait_secs: f64,
    /// The `retry_after_secs` values the server gave.
    pub retry_hints: BTreeSet<u32>,
    /// `Failed` answers: jobs failed with another job's build log.
    pub failed_answers: u64,
    /// Distinct build keys the agents claimed.
    pub keys_asked: usize,
    /// `Wait` answers to claims sent after the key's build had failed.
    pub violations: u64,
    /// Calls that failed, and downloads that did not check.
    pub errors: u64,
    pub claim_p50_ms: f64,
    pub claim_p99_ms: f64,
    /// How long after a build's end a job that had waited for it learnt of
    /// it (the cost of the retry hint).
    pub lag_p50_ms: f64,
    pub lag_max_ms: f64,
    /// Lease latency of the agents that only test, without waiting.
    pub lease_p50_ms: f64,
    pub lease_p99_ms: f64,
    /// Build orders the builders leased.
    pub order_leases: u64,
    pub db: BuildCounts,
}

impl BuildsReport {
    /// Each key built once, nobody waited on a failed build, every job
    /// ended, nothing failed; in a lab, each key ordered and leased once
    /// and no test agent told to build or wait.
    pub fn holds(&self) -> bool {
        let built = i64::try_from(self.build_answers).unwrap_or(i64::MAX);
        let keys = i64::try_from(self.keys_asked).unwrap_or(i64::MAX);
        let leased = i64::try_from(self.order_leases).unwrap_or(i64::MAX);
        let lab = self.builders == 0
            || (self.db.orders == keys && self.db.order_leases == keys && leased == keys);
        lab && built == self.db.builds
            && self.db.builds == self.db.claims
            && self.db.claims == keys
            && self.violations == 0
            && self.db.queued_jobs == 0
            && self.db.active_jobs == 0
            && self.errors == 0
    }
}

impl std::fmt::Display for BuildsReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let db = &self.db;
        writeln!(
            f,
            "agents {} in {} tbox groups, {} commits ({} do not build): {} jobs in {:.1} s, {} heartbeats",
            self.agents, self.groups, self.commits, self.failing_commits, self.jobs, self.seconds,
            self.heartbeats
        )?;
        writeln!(
            f,
            "claims: {} built ({} did not build), {} waits ({:.1} s slept, retry hints {:?} s), \
             {} told it does not build",
            self.build_answers,
            self.builds_failed,
            self.wait_answers,
            self.wait_secs,
            self.retry_hints,
            self.failed_answers
        )?;
        writeln!(
            f,
            "downloads: {} ({:.1} MiB), {} SHA-256 checks passed",
            self.downloads,
            self.downloaded_bytes as f64 / f64::from(1 << 20),
            self.sha_checks
        )?;
        write!(
            f,
            "claim latency p50 {:.1} ms, p99 {:.1} ms; ",
            self.claim_p50_ms, self.claim_p99_ms
        )?;
        if self.wait_answers == 0 {
            writeln!(f, "no claim waited")?;
        } else {
            writeln!(
                f,
                "a waiter learnt of its build's end p50 {:.0} ms, max {:.0} ms after it",
                self.lag_p50_ms, self.lag_max_ms
            )?;
        }
        if self.builders > 0 {
            writeln!(
                f,
                "lab: {} builders leased {} orders ({} in the store, {} leases); test agents' \
                 leases p50 {:.1} ms, p99 {:.1} ms",
                self.builders,
                self.order_leases,
                self.db.orders,
                self.db.order_leases,
                self.lease_p50_ms,
                self.lease_p99_ms
            )?;
        }
        writeln!(
            f,
            "build keys asked {}, waits on a failed build (a lab: any build or wait a test \
             agent was told) {}, errors {}",
            self.keys_asked, self.violations, self.errors
        )?;
        writeln!(
            f,
            "database: {} builds ({} ready, {} failed), {} claims; {} commits with ended jobs; \
             jobs {} finished, {} failed to build, {} queued, {} leased",
            db.builds,
            db.ready,
            db.failed,
            db.claims,
            db.commits_ended,
            db.finished_jobs,
            db.build_failed_jobs,
            db.queued_jobs,
            db.active_jobs
        )?;
        write!(
            f,
            "verdict: {}",
            if self.holds() { "HOLDS" } else { "BROKEN" }
        )
    }
}
