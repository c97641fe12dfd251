//! `kbot-load seed`: a store with a long history for measuring the
//! dashboard: a watched branch of `commits` commits, each new head compared
//! with the previous one on every tbox group, `runs` runs per side of the
//! two bw_pipe atomic jobs of [`LOAD_JOB_FILE`], `metrics` metrics per run,
//! until the store holds `samples` samples; with the comparisons the
//! server's own statistics draw, the agents' events, a build failure every
//! 97th run, and a 10% drop of the KPI on the first group from 60% of the
//! history on (with its regression report), so the trend has a change point.
//!
//! Rows are written straight to the store, many per statement, the way
//! the server stores them (results' metrics as one JSON object per run).

use std::collections::BTreeMap;
use std::fmt::Write;

use kbot_core::stats::rng::SplitMix64;
use sqlx::Row;

use super::seed::{atomic_jobs, LOAD_JOB_FILE};
use kbot_server::comparisons::stats_config;
use kbot_server::db::{self, Db, NullableF64, Tx};
use kbot_server::error::Result;

/// What to seed.
#[derive(Debug, Clone, clap::Args)]
pub struct SeedArgs {
    #[command(flatten)]
    pub db: kbot_server::config::DbArgs,
    /// Samples (one metric of one run) to write in all.
    #[arg(long, default_value_t = 1_000_000)]
    pub samples: u64,
    /// Metrics per run.
    #[arg(long, default_value_t = 40)]
    pub metrics: usize,
    /// Runs per side of each atomic job.
    #[arg(long, default_value_t = 5)]
    pub runs: u32,
    /// Tbox groups, each with its own watch of the branch and 4 agents.
    #[arg(long, default_value_t = 2)]
    pub groups: usize,
}

/// Rows per multi-row INSERT: well under SQLite's 32766 and PostgreSQL's
/// 65535 bound parameters at 16 columns.
const BATCH: usize = 200;
/// The KPI every run reports first; the rest are side metrics and monitors.
const KPI: &str = "bw_pipe.bandwidth.MB/sec";
/// One run in this many fails its build instead (posts a failure event).
const FAIL_EVERY: u64 = 97;

/// A bound value of a multi-row insert.
#[derive(Debug, Clone)]
enum V {
    I(i64),
    T(String),
    F(f64),
    /// A NULL of a TEXT column; PostgreSQL takes the parameter's type
    /// from the bound value, so a float column needs [`V::NullF`].
    Null,
    NullF,
}

/// What was written.
#[derive(Debug, Default)]
pub struct Seeded {
    pub commits: usize,
    pub submissions: usize,
    pub results: usize,
    pub samples: u64,
    pub comparisons: usize,
}

pub async fn run(args: &SeedArgs) -> Result<Seeded> {
    let db = Db::connect(&args.db.resolve()).await?;
    kbot_server::server::migrate(&db).await?;
    // One run in FAIL_EVERY fails and uploads nothing: plan for that, and
    // stop once the samples are in.
    let per_submission = 2 * 2 * u64::from(args.runs) * args.metrics as u64;
    let per_submission = (per_submission * (FAIL_EVERY - 1) / FAIL_EVERY).max(1);
    let groups = args.groups.max(1);
    let submissions = args.samples.div_ceil(per_submission) as usize + 2 * groups;
    let commits = submissions.div_ceil(groups) + 1;
    let names = metric_names(args.metrics);
    let mut tx = db.begin().await?;
    let fixed = fixed_rows(&mut tx, commits, groups).await?;
    tx.commit().await?;
    let mut seeded = Seeded {
        commits,
        ..Seeded::default()
    };
    let mut rng = SplitMix64::new(0x6b62_6f74);
    for i in 0..submissions {
        if seeded.samples >= args.samples {
            break;
        }
        let group = i % groups;
        let head = i / groups + 1;
        let pair = Pair {
            group,
            base: fixed.commit_ids[head - 1],
            head: fixed.commit_ids[head],
            head_index: head,
            commits,
        };
        let mut tx = db.begin().await?;
        let counts = submission(&mut tx, &fixed, &pair, args, &names, &mut rng).await?;
        tx.commit().await?;
        seeded.submissions += 1;
        seeded.results += counts.0;
        seeded.samples += counts.0 as u64 * names.len() as u64;
        seeded.comparisons += counts.1;
        if i % 100 == 99 {
            eprintln!("{} of {submissions} submissions", i + 1);
        }
    }
    // The rows went in by SQL, not through uploads: summarise them as the
    // backfill of an existing store does.
    kbot_server::jobs::summaries::rebuild(&db).await?;
    // The dashboard is measured on a store whose planner statistics
    // autovacuum would have gathered by then (metric_summaries is written
    // in one go here; without them PostgreSQL walked the whole tbox group
    // for the trend page's window).
    super::refresh_planner_stats(&db).await?;
    db.close().await;
    Ok(seeded)
}

/// The KPI, then side metrics and monitors with the names LKP gives them.
fn metric_names(n: usize) -> Vec<String> {
    let fixed = [
        KPI,
        "bw_pipe.time.elapsed_time",
        "bw_pipe.time.user_time",
        "bw_pipe.time.system_time",
        "bw_pipe.time.voluntary_context_switches",
        "vmstat.system.cs",
        "vmstat.cpu.sy",
        "perf-stat.ps.instructions",
    ];
    let mut names: Vec<String> = fixed.iter().take(n).map(|s| (*s).to_owned()).collect();
    names.extend((names.len()..n).map(|i| format!("perf-stat.ps.event_{i:02}")));
    names
}

/// Rows every submission refers to.
struct Fixed {
    repo_id: i64,
    user_id: i64,
    commit_ids: Vec<i64>,
    /// Per group: (name, watch id, agent ids).
    groups: Vec<(String, i64, Vec<i64>)>,
}

async fn fixed_rows(tx: &mut Tx, commits: usize, groups: usize) -> Result<Fixed> {
    let now = kbot_server::time::now_ms();
    let repo_id = returning(
        sqlx::query(
            "INSERT INTO repos (name, url, default_branch, created_at) \
             VALUES ('linux-seed', 'https://example.invalid/linux.git', 'master', $1) RETURNING id",
        )
        .bind(now),
        tx,
    )
    .await?;
    let user_id = returning(
        sqlx::query("INSERT INTO users (name, created_at) VALUES ('kbot-seed', $1) RETURNING id")
            .bind(now),
        tx,
    )
    .await?;
    let mut commit_ids = Vec::with_capacity(commits);
    for i in 0..commits {
        let sha = fake_sha(i);
        let subject = format!("pipe: seeded change {i}");
        let id = returning(
            sqlx::query(
                "INSERT INTO commits (repo_id, sha, parents, subject, author_name, author_email, \
                     authored_at, committed_at) \
                 VALUES ($1, $2, '', $3, 'Seed Author', 'seed@example.invalid', $4, $5) RETURNING id",
            )
            .bind(repo_id)
            .bind(sha)
            .bind(subject)
            .bind(now)
            .bind(now),
            tx,
        )
        .await?;
        commit_ids.push(id);
    }
    let mut out = Vec::with_capacity(groups);
    for g in 0..groups {
        let name = format!("seed-group-{g}");
        out.push((
            name.clone(),
            watch(tx, repo_id, user_id, &name, now).await?,
            agents(tx, &name, now).await?,
        ));
    }
    Ok(Fixed {
        repo_id,
        user_id,
        commit_ids,
        groups: out,
    })
}

async fn watch(tx: &mut Tx, repo_id: i64, user_id: i64, group: &str, now: i64) -> Result<i64> {
    returning(
        sqlx::query(
            "INSERT INTO watches (repo_id, branch, job_name, job_file, tbox_group, interval_secs, \
                 runs_cap, user_id, next_check_at, created_at) \
             VALUES ($1, 'master', 'bw_pipe', $2, $3, 3600, 10, $4, $5, $6) RETURNING id",
        )
        .bind(repo_id)
        .bind(LOAD_JOB_FILE)
        .bind(group)
        .bind(user_id)
        .bind(now)
        .bind(now),
        tx,
    )
    .await
}

async fn agents(tx: &mut Tx, group: &str, now: i64) -> Result<Vec<i64>> {
    let mut ids = Vec::new();
    for i in 0..4 {
        let id = returning(
            sqlx::query(
                "INSERT INTO agents (name, tbox_group, backend, arch, cpu_model, sockets, cores, \
                     threads, numa_nodes, memory_bytes, page_size, kernel, state, enrolled_at, \
                     last_seen_at) \
                 VALUES ($1, $2, 'qemu', 'x86_64', 'QEMU Virtual CPU version 2.5+', 1, 2, 2, 1, \
                     4294967296, 4096, '6.1.0-seed', 'idle', $3, $4) RETURNING id",
            )
            .bind(format!("{group}-{i}"))
            .bind(group)
            .bind(now)
            .bind(now),
            tx,
        )
        .await?;
        ids.push(id);
    }
    Ok(ids)
}

/// A 40-hex-digit name that differs from the first digit on, like a sha.
fn fake_sha(i: usize) -> String {
    let mut rng = SplitMix64::new(i as u64 ^ 0x5eed);
    let mut sha = String::with_capacity(40);
    while sha.len() < 40 {
        let _ = write!(sha, "{:016x}", rng.next_u64());
    }
    sha.truncate(40);
    sha
}

async fn returning<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    tx: &mut Tx,
) -> Result<i64> {
    Ok(query.fetch_one(&mut **tx).await?.try_get("id")?)
}

/// One watch pair: which group, and the commits it compares.
struct Pair {
    group: usize,
    base: i64,
    head: i64,
    head_index: usize,
    commits: usize,
}

impl Pair {
    /// The level of `metric` (index) on a side of this pair: the first
    /// group's KPI drops 10% from 60% of the history on.
    fn level(&self, metric: usize, head: bool) -> f64 {
        let index = if head {
            self.head_index
        } else {
            self.head_index - 1
        };
        let base = 1000.0 * (1.0 + metric as f64 / 10.0);
        let dropped = self.group == 0 && metric == 0 && index * 10 >= self.commits * 6;
        if dropped {
            0.9 * base
        } else {
            base
        }
    }

    /// The pair whose head is the first dropped commit: it gets a report.
    fn is_the_drop(&self) -> bool {
        self.group == 0
            && self.head_index * 10 >= self.commits * 6
            && (self.head_index - 1) * 10 < self.commits * 6
    }
}

/// Writes one watch submission with its jobs, results, events and
/// comparisons; returns (results, comparison rows).
async fn submission(
    tx: &mut Tx,
    fixed: &Fixed,
    pair: &Pair,
    args: &SeedArgs,
    names: &[String],
    rng: &mut SplitMix64,
) -> Result<(usize, usize)> {
    let now = kbot_server::time::now_ms();
    let (group, watch_id, agent_ids) = &fixed.groups[pair.group];
    let submission_id = returning(
        sqlx::query(
            "INSERT INTO submissions (user_id, repo_id, job_name, job_file, base_commit_id, \
                 head_commit_id, runs_cap, state, created_at, finished_at, kind, watch_id, \
                 branch) \
             VALUES ($1, $2, 'bw_pipe', $3, $4, $5, 10, 'done', $6, $7, 'watch', $8, 'master') \
             RETURNING id",
        )
        .bind(fixed.user_id)
        .bind(fixed.repo_id)
        .bind(LOAD_JOB_FILE)
        .bind(pair.base)
        .bind(pair.head)
        .bind(now)
        .bind(now)
        .bind(*watch_id),
        tx,
    )
    .await?;
    let mut results = 0;
    let mut comparisons = 0;
    for (position, mut job) in atomic_jobs(LOAD_JOB_FILE)?.into_iter().enumerate() {
        job.tbox_group = Some(group.clone());
        let spec = serde_json::to_string(&job)
            .map_err(|e| anyhow::anyhow!("atomic job does not serialise: {e}"))?;
        let atomic_job_id = returning(
            sqlx::query(
                "INSERT INTO atomic_jobs (submission_id, position, spec, testcase, tbox_group, \
                     kconfig, compiler, preferred_agent_id, settled_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
            )
            .bind(submission_id)
            .bind(position as i64)
            .bind(spec)
            .bind(&job.testcase)
            .bind(group.as_str())
            .bind(&job.kconfig)
            .bind(&job.compiler)
            .bind(agent_ids[position % agent_ids.len()])
            .bind(now),
            tx,
        )
        .await?;
        let ids = AtomicIds {
            submission_id,
            atomic_job_id,
            agent_id: agent_ids[position % agent_ids.len()],
        };
        let runs = runs(tx, &ids, pair, args.runs, names, rng).await?;
        results += runs.base.len() + runs.head.len();
        comparisons += compare(tx, &ids, &runs).await?;
    }
    if pair.is_the_drop() {
        report(tx, submission_id, pair.head, now).await?;
    }
    Ok((results, comparisons))
}

struct AtomicIds {
    submission_id: i64,
    atomic_job_id: i64,
    agent_id: i64,
}

/// Per side, the metric maps of the runs that finished.
struct Runs {
    base: Vec<BTreeMap<String, f64>>,
    head: Vec<BTreeMap<String, f64>>,
}

/// The pair's jobs (base, head, base, head, ...), their events and results.
async fn runs(
    tx: &mut Tx,
    ids: &AtomicIds,
    pair: &Pair,
    count: u32,
    names: &[String],
    rng: &mut SplitMix64,
) -> Result<Runs> {
    let now = kbot_server::time::now_ms();
    let mut out = Runs {
        base: Vec::new(),
        head: Vec::new(),
    };
    let (mut events, mut results) = (Vec::new(), Vec::new());
    for seq in 0..2 * i64::from(count) {
        let head = seq % 2 == 1;
        let failed = rng.next_u64().is_multiple_of(FAIL_EVERY);
        let job_id = returning(
            sqlx::query(
                "INSERT INTO jobs (submission_id, atomic_job_id, commit_id, side, run_index, seq, \
                     state, attempts, max_attempts, lease_owner, failure, failure_detail, \
                     created_at, updated_at, finished_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 1, 3, $8, $9, $10, $11, $12, $13) RETURNING id",
            )
            .bind(ids.submission_id)
            .bind(ids.atomic_job_id)
            .bind(if head { pair.head } else { pair.base })
            .bind(if head { "head" } else { "base" })
            .bind(seq / 2)
            .bind(seq)
            .bind(if failed { "failed" } else { "finished" })
            .bind(ids.agent_id)
            .bind(failed.then_some("build_failed"))
            .bind(failed.then_some("error: seeded build failure"))
            .bind(now)
            .bind(now)
            .bind(now),
            tx,
        )
        .await?;
        for state in ["leased", "building", "booting", "running"] {
            events.push(vec![
                V::I(job_id),
                V::I(ids.agent_id),
                V::I(now),
                V::T(state.into()),
                V::Null,
                V::T(String::new()),
            ]);
        }
        if failed {
            let detail = "CC fs/pipe.o\nerror: seeded build failure".to_owned();
            events.push(vec![
                V::I(job_id),
                V::I(ids.agent_id),
                V::I(now),
                V::T("failed".into()),
                V::T("build_failed".into()),
                V::T(detail),
            ]);
            continue;
        }
        let metrics: BTreeMap<String, f64> = names
            .iter()
            .enumerate()
            .map(|(m, name)| {
                let noise = 1.0 + 0.04 * (rng.next_f64() - 0.5);
                (
                    name.clone(),
                    (pair.level(m, head) * noise * 100.0).round() / 100.0,
                )
            })
            .collect();
        let json = serde_json::to_string(&metrics)
            .map_err(|e| anyhow::anyhow!("metrics do not serialise: {e}"))?;
        results.push(vec![
            V::I(job_id),
            V::I(ids.agent_id),
            V::T("6.1.0-seed".into()),
            V::T("{}".into()),
            V::T(String::from("seed/none")),
            V::I(now),
            V::I(now),
            V::I(now),
            V::T(json),
        ]);
        if head {
            out.head.push(metrics);
        } else {
            out.base.push(metrics);
        }
    }
    insert(
        tx,
        "job_events (job_id, agent_id, at, state, failure, detail)",
        events,
    )
    .await?;
    insert(
        tx,
        "results (job_id, agent_id, kernel_release, tuning, raw_output_path, started_at, \
         finished_at, uploaded_at, metrics)",
        results,
    )
    .await?;
    Ok(out)
}

/// The comparison rows the server would store for this pair: kbot's
/// statistics on the seeded runs (`kbot_core::stats::compare_runs`).
async fn compare(tx: &mut Tx, ids: &AtomicIds, runs: &Runs) -> Result<usize> {
    if runs.base.is_empty() || runs.head.is_empty() {
        return Ok(0);
    }
    let (base, head) = (runs.base.clone(), runs.head.clone());
    let cfg = stats_config(10);
    let comparison =
        tokio::task::spawn_blocking(move || kbot_core::stats::compare_runs(&base, &head, &cfg))
            .await
            .map_err(|e| anyhow::anyhow!("comparison task failed: {e}"))??;
    let now = kbot_server::time::now_ms();
    let finite = |x: f64| if x.is_finite() { V::F(x) } else { V::NullF };
    let mut rows = Vec::with_capacity(comparison.metrics.len());
    for m in &comparison.metrics {
        let detail = serde_json::to_string(m)
            .map_err(|e| anyhow::anyhow!("metric comparison does not serialise: {e}"))?;
        rows.push(vec![
            V::I(ids.submission_id),
            V::I(ids.atomic_job_id),
            V::T(m.metric.clone()),
            V::T(m.kbot.outcome.as_str().into()),
            finite(m.change),
            V::I(m.base.n as i64),
            V::I(m.head.n as i64),
            finite(m.base.mean),
            finite(m.head.mean),
            finite(m.base.stddev),
            finite(m.head.stddev),
            finite(m.kbot.p_value),
            V::T(detail),
            V::I(now),
            V::I(now),
        ]);
    }
    let n = rows.len();
    insert(
        tx,
        "comparisons (submission_id, atomic_job_id, metric, verdict, change_pct, base_n, head_n, \
         base_mean, head_mean, base_stddev, head_stddev, p_value, detail, created_at, updated_at)",
        rows,
    )
    .await?;
    Ok(n)
}

/// The regression report of the first dropped commit.
async fn report(tx: &mut Tx, submission_id: i64, head: i64, now: i64) -> Result<()> {
    let subject = format!("[linux-seed:master] seeded commit {head}: {KPI} 10.0% regression");
    sqlx::query(
        "INSERT INTO report_outbox (message_id, submission_id, kind, subject, envelope_from, \
             recipients, message, state, next_attempt_at, created_at) \
         VALUES ($1, $2, 'regression', $3, 'kbot@localhost', '', $4, 'mail_off', $5, $6)",
    )
    .bind(format!("seed-{submission_id}-kbot@localhost"))
    .bind(submission_id)
    .bind(&subject)
    .bind(format!("Subject: {subject}\n\nSeeded report.\n"))
    .bind(now)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// `INSERT INTO {table_and_columns} VALUES (...), (...)`, [`BATCH`] rows a statement.
async fn insert(tx: &mut Tx, table_and_columns: &str, rows: Vec<Vec<V>>) -> Result<()> {
    for chunk in rows.chunks(BATCH) {
        let width = chunk.first().map_or(0, Vec::len);
        let sql = format!(
            "INSERT INTO {table_and_columns} VALUES {}",
            db::value_rows(chunk.len(), width)
        );
        let mut query = sqlx::query(&sql);
        for value in chunk.iter().flatten() {
            query = match value {
                V::I(v) => query.bind(*v),
                V::T(v) => query.bind(v.clone()),
                V::F(v) => query.bind(*v),
                V::Null => query.bind(None::<String>),
                V::NullF => query.bind(NullableF64(None)),
            };
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_shas_look_real() {
        let names = metric_names(12);
        assert_eq!(names.len(), 12);
        assert_eq!(names[0], KPI);
        assert_eq!(
            names
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            12
        );
        let (a, b) = (fake_sha(1), fake_sha(2));
        assert_eq!(a.len(), 40);
        assert_ne!(a[..10], b[..10]);
    }

    #[test]
    fn the_first_group_drops_from_sixty_percent_on() {
        let pair = |group, head_index| Pair {
            group,
            base: 0,
            head: 0,
            head_index,
            commits: 100,
        };
        assert_eq!(pair(0, 59).level(0, true), 1000.0);
        assert_eq!(pair(0, 60).level(0, true), 900.0);
        assert_eq!(pair(0, 60).level(0, false), 1000.0);
        assert!(pair(0, 60).is_the_drop() && !pair(0, 61).is_the_drop());
        assert_eq!(pair(1, 80).level(0, true), 1000.0);
        assert_eq!(pair(0, 80).level(1, true), 1100.0);
    }
}
