//! A submission as a KCIDB v5.3 document ([`kbot_core::kcidb`]): its commits
//! as checkouts, the kernels its runs booted as builds, and every metric of
//! every finished run as a test with its number; a run that failed is a test
//! with the failure's status. `GET /api/v1/submissions/{id}/kcidb`.

use std::collections::{BTreeMap, HashMap};

use kbot_api::agent::JobState;
use kbot_api::submissions::Side;
use kbot_core::kcidb::{self, Build, Checkout, Document, Environment, Number, Status, Test};
use serde_json::json;

use crate::config::mail::MailConfig;
use crate::db::Db;
use crate::error::Result;

#[derive(sqlx::FromRow)]
struct CommitRow {
    id: i64,
    sha: String,
    subject: String,
    committed_at: i64,
    finished: i64,
}

#[derive(sqlx::FromRow)]
struct RunRow {
    job_id: i64,
    commit_id: i64,
    #[sqlx(try_from = "String")]
    side: Side,
    run_index: i64,
    #[sqlx(try_from = "String")]
    state: JobState,
    failure: Option<String>,
    failure_detail: Option<String>,
    atomic_job_id: i64,
    testcase: String,
    kconfig: String,
    compiler: String,
    tbox_group: Option<String>,
    build_id: Option<i64>,
    build_state: Option<String>,
    build_arch: Option<String>,
    build_secs: Option<f64>,
    build_created_at: Option<i64>,
    result_id: Option<i64>,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    kernel_release: Option<String>,
    agent: Option<String>,
    agent_arch: Option<String>,
    backend: Option<String>,
    updated_at: i64,
    /// The run's metrics, a JSON object (`results.metrics`).
    metrics: Option<String>,
}

const RUNS: &str = "SELECT j.id AS job_id, j.commit_id, j.side, j.run_index, j.state, j.failure, \
     j.failure_detail, j.atomic_job_id, aj.testcase, aj.kconfig, aj.compiler, aj.tbox_group, \
     b.id AS build_id, b.state AS build_state, b.arch AS build_arch, b.build_secs, \
     b.created_at AS build_created_at, res.id AS result_id, res.started_at, res.finished_at, \
     res.kernel_release, a.name AS agent, a.arch AS agent_arch, a.backend, j.updated_at, \
     res.metrics \
     FROM jobs j JOIN atomic_jobs aj ON aj.id = j.atomic_job_id \
     LEFT JOIN builds b ON b.id = j.build_id \
     LEFT JOIN results res ON res.job_id = j.id \
     LEFT JOIN agents a ON a.id = res.agent_id \
     WHERE j.submission_id = $1 AND j.state IN ('finished', 'failed') ORDER BY j.id";

/// The document of submission `id` (unknown: not found).
pub async fn document(db: &Db, id: i64, mail: &MailConfig) -> Result<Document> {
    let public_url = &mail.public_url;
    let submission = super::get_submission(db, id).await?;
    let pool = db.read();
    let repo_name = submission.repo_name;
    let repo_url: String = sqlx::query_scalar("SELECT url FROM repos WHERE name = $1")
        .bind(&repo_name)
        .fetch_one(pool)
        .await?;
    let commits: Vec<CommitRow> = sqlx::query_as(
        "SELECT c.id, c.sha, c.subject, c.committed_at, \
             SUM(CASE WHEN j.state = 'finished' THEN 1 ELSE 0 END) AS finished \
         FROM jobs j JOIN commits c ON c.id = j.commit_id WHERE j.submission_id = $1 \
         GROUP BY c.id, c.sha, c.subject, c.committed_at ORDER BY c.id",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    let runs: Vec<RunRow> = sqlx::query_as(RUNS).bind(id).fetch_all(pool).await?;
    let verdicts: Vec<(i64, String, String, Option<f64>)> = sqlx::query_as(
        "SELECT atomic_job_id, metric, verdict, change_pct FROM comparisons WHERE submission_id = $1",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;

    let tree = crate::repos::public_tree(mail, &repo_name, &repo_url);
    let checkout_id = |sha: &str| kcidb::id("checkout", format!("{repo_name}-{sha}"));
    let sha_of: HashMap<i64, &str> = commits.iter().map(|c| (c.id, c.sha.as_str())).collect();
    let checkouts = commits
        .iter()
        .map(|c| Checkout {
            id: checkout_id(&c.sha),
            origin: kcidb::ORIGIN,
            tree_name: Some(kcidb::text(&repo_name)),
            git_repository_url: kcidb::repository_url(&tree),
            git_commit_hash: c.sha.clone(),
            git_commit_name: Some(kcidb::text(&c.subject)),
            git_repository_branch: None,
            start_time: kcidb::time(c.committed_at),
            valid: c.finished > 0,
            // Any URL kbot fetched from, `https://` or not.
            misc: Some(json!({ "repository": tree })),
        })
        .collect();

    let mut builds: BTreeMap<String, Build> = BTreeMap::new();
    let verdict_of: HashMap<(i64, &str), (&str, Option<f64>)> = verdicts
        .iter()
        .map(|(aj, m, v, c)| ((*aj, m.as_str()), (v.as_str(), *c)))
        .collect();
    let mut tests = Vec::new();
    for run in &runs {
        let sha = sha_of.get(&run.commit_id).copied().unwrap_or_default();
        let build_id = build_of(run, sha, &checkout_id(sha), &mut builds);
        let ctx = RunContext {
            run,
            build_id: &build_id,
            submission: id,
            log_url: format!("{public_url}/jobs/{}/log", run.job_id),
        };
        let metrics = run
            .metrics
            .as_deref()
            .and_then(|m| serde_json::from_str::<BTreeMap<String, f64>>(m).ok());
        match metrics {
            Some(metrics) if run.state == JobState::Finished && run.result_id.is_some() => {
                for (metric, value) in &metrics {
                    let verdict = verdict_of
                        .get(&(run.atomic_job_id, metric.as_str()))
                        .copied();
                    tests.push(ctx.measured(metric, *value, verdict));
                }
            }
            _ => tests.push(ctx.failed()),
        }
    }
    Ok(Document {
        version: kcidb::VERSION,
        checkouts,
        builds: builds.into_values().collect(),
        tests,
    })
}

/// The run's build: the stored build it booted; else (the agent built it
/// without a record, or found it in its own cache) one per kernel, passed
/// when a run booted it, failed when its build failed, without a status
/// for the host backend (it boots no kernel of the commit).
fn build_of(
    run: &RunRow,
    sha: &str,
    checkout_id: &str,
    builds: &mut BTreeMap<String, Build>,
) -> String {
    let booted = run.state == JobState::Finished && run.backend.as_deref() != Some("host");
    let (id, status) = match run.build_id {
        Some(b) => (
            kcidb::id("build", b),
            match run.build_state.as_deref() {
                Some("ready") => Some(Status::Pass),
                Some("failed") => Some(Status::Fail),
                _ => None,
            },
        ),
        None => {
            let kernel = format!("{sha}-{}-{}", run.kconfig, run.compiler);
            let status = match run.failure.as_deref() {
                Some("build_failed") => Some(Status::Fail),
                _ if booted => Some(Status::Pass),
                _ => None,
            };
            (kcidb::id("kernel", kernel), status)
        }
    };
    builds.entry(id.clone()).or_insert_with(|| Build {
        id: id.clone(),
        origin: kcidb::ORIGIN,
        checkout_id: checkout_id.to_owned(),
        architecture: run.build_arch.clone().or_else(|| run.agent_arch.clone()),
        compiler: Some(run.compiler.clone()),
        config_name: Some(run.kconfig.clone()),
        start_time: run.build_created_at.and_then(kcidb::time),
        duration: run.build_secs.filter(|s| s.is_finite() && *s >= 0.0),
        log_url: None,
        log_excerpt: None,
        status,
        misc: Some(json!({ "commit": sha })),
    });
    id
}

struct RunContext<'a> {
    run: &'a RunRow,
    build_id: &'a str,
    submission: i64,
    log_url: String,
}

impl RunContext<'_> {
    fn environment(&self) -> Environment {
        let r = self.run;
        Environment {
            comment: r.agent.as_ref().map(|a| {
                format!(
                    "kbot agent {a} (tbox group {})",
                    r.tbox_group.as_deref().unwrap_or("-")
                )
            }),
            misc: Some(json!({
                "tbox_group": r.tbox_group,
                "kernel_release": r.kernel_release,
            })),
        }
    }

    fn misc(&self) -> serde_json::Value {
        let r = self.run;
        json!({
            "submission": self.submission,
            "job": r.job_id,
            "side": r.side,
            "run_index": r.run_index,
            "testcase": r.testcase,
        })
    }

    fn duration(&self) -> Option<f64> {
        match (self.run.started_at, self.run.finished_at) {
            (Some(s), Some(f)) if f >= s => Some((f - s) as f64 / 1000.0),
            _ => None,
        }
    }

    /// One metric of a finished run; the pair's verdict on the head side.
    fn measured(&self, metric: &str, value: f64, verdict: Option<(&str, Option<f64>)>) -> Test {
        let mut misc = self.misc();
        if let (Some((v, change)), Side::Head) = (verdict, self.run.side) {
            misc["kbot_verdict"] = json!(v);
            misc["change_percent"] = json!(change);
        }
        misc["metric"] = json!(metric);
        Test {
            id: kcidb::id("run", format!("{}-{metric}", self.run.job_id)),
            origin: kcidb::ORIGIN,
            build_id: self.build_id.to_owned(),
            path: kcidb::test_path(metric),
            comment: None,
            status: Status::Done,
            number: Some(Number {
                value,
                unit: kcidb::unit_of(metric),
            }),
            start_time: self.run.started_at.and_then(kcidb::time),
            duration: self.duration(),
            log_url: Some(self.log_url.clone()),
            environment: Some(self.environment()),
            misc: Some(misc),
        }
    }

    /// A run without numbers: the kernel did not build (`MISS`: the test
    /// never ran) or the run failed (`ERROR`).
    fn failed(&self) -> Test {
        let r = self.run;
        let status = match r.failure.as_deref() {
            Some("build_failed") => Status::Miss,
            _ => Status::Error,
        };
        let comment = format!(
            "{}: {}",
            r.failure.as_deref().unwrap_or("no result"),
            r.failure_detail.as_deref().unwrap_or_default()
        );
        Test {
            id: kcidb::id("run", r.job_id),
            origin: kcidb::ORIGIN,
            build_id: self.build_id.to_owned(),
            path: kcidb::test_path(&r.testcase),
            comment: Some(kcidb::text(&comment).chars().take(1000).collect()),
            status,
            number: None,
            start_time: kcidb::time(r.updated_at),
            duration: None,
            log_url: Some(self.log_url.clone()),
            environment: Some(self.environment()),
            misc: Some(self.misc()),
        }
    }
}
