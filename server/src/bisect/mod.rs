//! Bisection: from a regressed pair to its verified first bad commit.
//!
//! A pair that settles with a KPI `different` in the regression direction,
//! more than one commit apart, starts a bisection ([`start`], in the
//! comparison's transaction). The worker ([`spawn_worker`]) then steps it:
//! - each step tests a commit `git rev-list --bisect-all` picks (more than
//!   one at a time when the tbox group has several agents), with probe runs
//!   queued as ordinary jobs of a `bisect` submission pinned to the pair's
//!   tbox group;
//! - a tested commit is classified against both ends' samples
//!   ([`kbot_core::stats::bisect::classify`]): `unknown` queues more runs up
//!   to the cap, then the commit is `undecided`; a commit none of whose runs
//!   finished (build or boot failure) is skipped like `git bisect skip`;
//! - when no candidate is left, the first bad commit is run again against
//!   its parent in a fresh `verify` pair; only a confirmed regression is
//!   reported, once per patch-id.
//!
//! Everything is in the database: a restarted server resumes where it was,
//! and replicas advance a bisection optimistically (`store::take`).

pub mod pages;
pub mod routes;
mod store;
pub mod types;
pub mod views;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use kbot_core::job::AtomicJob;
use kbot_core::metrics::Impact;
use kbot_core::stats::bisect::{classify, StepClass};
use kbot_core::stats::{MetricComparison, Outcome};
use tokio::sync::broadcast::error::RecvError;

use crate::comparisons::{self, BootedCommits, PairComparison};
use crate::db::Tx;
use crate::error::{Error, Result};
use crate::jobs::SubmissionState;
use crate::regressions;
use crate::repos::{self, StoredCommit};
use crate::state::AppState;
use crate::submissions::{self, NewPair};
pub use store::{BisectionRow, BisectionState};
use store::{CommitRuns, Conclusion, StepRow, StepState};

/// How often the worker looks at open bisections without an upload to wake it.
const TICK: Duration = Duration::from_secs(2);

/// Most commits a bisection tests at once, however many agents the group has.
const MAX_PARALLEL_PROBES: i64 = 7;

/// The KPI regression that should start a bisection, if any: the first KPI
/// kbot calls `different` in the bad direction.
pub fn regressed_kpi(pc: &PairComparison) -> Option<&MetricComparison> {
    pc.comparison
        .metrics
        .iter()
        .find(|m| m.kpi && m.kbot.outcome == Outcome::Different && m.impact == Impact::Regression)
}

/// Whether `base..head` is a single commit: nothing to bisect.
pub fn adjacent(base: &StoredCommit, head: &StoredCommit) -> bool {
    head.view.parents.contains(&base.sha)
}

/// The job's identity for de-duplication: testcase and axes.
fn job_key(job: &AtomicJob) -> String {
    let axes: Vec<String> = job.axes().iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{}/{}", job.testcase, axes.join(","))
}

/// Starts a bisection of `metric` between the pair's base (good) and head
/// (bad), in the caller's transaction. `None` when the same range, metric,
/// tbox group and job is already being bisected.
pub async fn start(
    tx: &mut Tx,
    submission_id: i64,
    pc: &PairComparison,
    metric: &str,
) -> Result<Option<i64>> {
    let origin = store::origin_job(tx, pc.atomic_job_id).await?;
    let tbox_group = origin.tbox_group.clone().unwrap_or_default();
    let key = job_key(&pc.job);
    let runs_cap = origin.runs_cap.max(1);
    let dedup_key = format!(
        "{}/{}..{}/{key}/{tbox_group}/{metric}",
        pc.head.repo_id, pc.base.sha, pc.head.sha
    );
    let Some(id) = store::insert(
        tx,
        &store::NewBisection {
            repo_id: pc.head.repo_id,
            origin_submission_id: submission_id,
            origin_atomic_job_id: pc.atomic_job_id,
            good_commit_id: pc.base.id,
            bad_commit_id: pc.head.id,
            metric,
            tbox_group: &tbox_group,
            job_key: &key,
            dedup_key: &dedup_key,
            runs_cap,
        },
    )
    .await?
    else {
        tracing::info!(submission_id, %dedup_key, "already being bisected");
        return Ok(None);
    };
    let probe_submission = submissions::insert_submission(
        tx,
        &submissions::NewSubmission {
            user_id: origin.user_id,
            kind: "bisect",
            bisect: false,
            watch_id: None,
            repo_id: pc.head.repo_id,
            job_name: format!("bisect {}", pc.job.testcase),
            job_file: &origin.job_file,
            // Probes run one atomic job the origin queued: nothing skipped.
            skipped: crate::db::JsonText(&[]),
            base_commit_id: pc.base.id,
            head_commit_id: pc.head.id,
            priority: origin.priority,
            runs_cap,
            created_at: crate::time::now_ms(),
        },
    )
    .await?;
    let probe_job = crate::jobs::add_pinned_atomic_job(
        tx,
        probe_submission,
        &pc.job,
        &tbox_group,
        origin.preferred_agent_id,
    )
    .await?;
    store::set_probe(tx, id, probe_submission, probe_job).await?;
    tracing::info!(
        bisection = id,
        submission_id,
        good = %pc.base.sha,
        bad = %pc.head.sha,
        metric,
        "bisection started"
    );
    Ok(Some(id))
}

/// What follows from a settled pair, in the transaction that records its
/// verdict: a bisection when a user or watch pair regressed across more than
/// one commit (and the submission asked for it), else a report of the pair
/// when it is reportable. Bisection and verification pairs are read by their
/// bisection instead; a pair that did not boot its commits blames none.
pub async fn on_pair_settled(
    tx: &mut Tx,
    state: &AppState,
    submission_id: i64,
    pc: &PairComparison,
    booted: &BootedCommits,
) -> Result<()> {
    let origin = store::origin_job(tx, pc.atomic_job_id).await?;
    if matches!(origin.kind.as_str(), "bisect" | "verify") {
        return Ok(());
    }
    if !booted.tests_the_commits() {
        tracing::info!(
            submission_id,
            atomic_job_id = pc.atomic_job_id,
            note = booted.note().unwrap_or_default(),
            "no report: the runs did not boot their commits"
        );
        return Ok(());
    }
    let regressed = regressed_kpi(pc);
    let bisects = origin.bisect && !adjacent(&pc.base, &pc.head);
    let (bisection_id, report_id) = match regressed {
        Some(m) if bisects => {
            let Some(id) = start(tx, submission_id, pc, &m.metric).await? else {
                // The range is being bisected already; its regression is recorded.
                return Ok(());
            };
            (Some(id), None)
        }
        _ => {
            let mail = &state.config.mail;
            let report = crate::mail::enqueue_pair_report(tx, mail, submission_id, pc).await?;
            (None, report)
        }
    };
    // No regression: an improvement's report, or nothing, was written.
    let Some(m) = regressed else {
        return Ok(());
    };
    let regression = regressions::NewRegression {
        repo_id: pc.head.repo_id,
        submission_id,
        atomic_job_id: pc.atomic_job_id,
        metric: &m.metric,
        tbox_group: origin.tbox_group.as_deref().unwrap_or_default(),
        // Perf-profile and `%` stats change in points, not percent.
        change_pct: Some(m.change).filter(|c| c.is_finite() && !m.change_is_absolute),
        bisection_id,
        report_id,
    };
    regressions::record(tx, &regression).await?;
    Ok(())
}

/// Starts the bisection worker; it runs until the server shuts down.
pub fn spawn_worker(state: AppState) -> tokio::task::JoinHandle<()> {
    let done = state.job_done.subscribe();
    tokio::spawn(async move { worker(state, done).await })
}

async fn worker(
    state: AppState,
    mut done: tokio::sync::broadcast::Receiver<crate::state::JobDone>,
) {
    let mut shutdown = state.shutdown.clone();
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            msg = done.recv() => {
                if matches!(msg, Err(RecvError::Closed)) {
                    return;
                }
                // One look after a burst of uploads is enough.
                while done.try_recv().is_ok() {}
            }
            _ = tick.tick() => {}
        }
        if *shutdown.borrow() {
            return;
        }
        advance_all(&state).await;
    }
}

/// Advances every open bisection once.
pub async fn advance_all(state: &AppState) {
    let ids = match store::open_ids(&state.db).await {
        Ok(ids) => ids,
        Err(e) => {
            tracing::error!(error = %crate::error::error_chain(&e), "listing open bisections failed");
            return;
        }
    };
    for id in ids {
        if let Err(e) = advance(state, id).await {
            tracing::error!(bisection = id, error = %crate::error::error_chain(&e), "bisection step failed");
        }
    }
}

/// Takes one bisection as far as the finished runs allow.
pub async fn advance(state: &AppState, id: i64) -> Result<()> {
    let b = store::get(&state.db, id).await?;
    match b.state {
        BisectionState::Running => step(state, &b).await,
        BisectionState::Verifying => check_verification(state, &b).await,
        _ => Ok(()),
    }
}

/// The samples of the bisected metric at the range's ends and the probe runs
/// at each commit.
pub(super) struct Samples {
    pub(super) good: Vec<f64>,
    pub(super) bad: Vec<f64>,
    pub(super) probes: HashMap<i64, CommitRuns>,
}

impl Samples {
    /// A bisection without its probe job yet has only its ends' samples.
    pub(super) async fn load(state: &AppState, b: &BisectionRow) -> Result<Samples> {
        let origin = store::runs_by_commit(&state.db, &[b.origin_atomic_job_id]).await?;
        let probes = match b.probe_atomic_job_id {
            Some(probe_job) => store::runs_by_commit(&state.db, &[probe_job]).await?,
            None => HashMap::new(),
        };
        let values = |commit_id: i64| -> Vec<f64> {
            [origin.get(&commit_id), probes.get(&commit_id)]
                .into_iter()
                .flatten()
                .flat_map(|runs| metric_values(runs, &b.metric))
                .collect()
        };
        Ok(Samples {
            good: values(b.good_commit_id),
            bad: values(b.bad_commit_id),
            probes,
        })
    }
}

pub(super) fn metric_values(runs: &CommitRuns, metric: &str) -> Vec<f64> {
    runs.finished
        .iter()
        .filter_map(|m| m.get(metric).copied())
        .collect()
}

/// What one look at a running bisection decided, written in one transaction.
#[derive(Default)]
struct Plan {
    /// Steps that ended: (step id, state, change vs good, detail).
    finished: Vec<(i64, StepState, Option<f64>, String)>,
    /// Commits that need more runs, and how many.
    more_runs: Vec<(i64, u32)>,
    /// Testing steps the range has moved past: (step id, commit id).
    dropped: Vec<(i64, i64)>,
    /// Commits whose queued runs are pointless (the kernel does not build or boot).
    cancel_queued: Vec<i64>,
    /// New commits to test.
    new_steps: Vec<StoredCommit>,
    /// The first bad commit, when no candidate is left.
    found: Option<StoredCommit>,
    conclusion: Option<Conclusion>,
}

impl Plan {
    fn is_empty(&self) -> bool {
        self.finished.is_empty()
            && self.more_runs.is_empty()
            && self.dropped.is_empty()
            && self.cancel_queued.is_empty()
            && self.new_steps.is_empty()
            && self.found.is_none()
            && self.conclusion.is_none()
    }
}

async fn step(state: &AppState, b: &BisectionRow) -> Result<()> {
    let steps = store::steps(&state.db, b.id).await?;
    let samples = Samples::load(state, b).await?;
    let mut plan = Plan::default();
    let mut decided: HashMap<i64, StepState> = steps
        .iter()
        .filter(|s| s.state != StepState::Testing)
        .map(|s| (s.commit_id, s.state))
        .collect();
    for s in steps.iter().filter(|s| s.state == StepState::Testing) {
        if let Some(outcome) = judge_step(b, s, &samples, &mut plan) {
            decided.insert(s.commit_id, outcome);
        }
    }
    plan_range(state, b, &steps, &decided, &mut plan).await?;
    apply(state, b, &steps, plan).await
}

/// Classifies a testing step whose runs are all in; `None` while it waits.
fn judge_step(
    b: &BisectionRow,
    s: &StepRow,
    samples: &Samples,
    plan: &mut Plan,
) -> Option<StepState> {
    let runs = samples
        .probes
        .get(&s.commit_id)
        .cloned()
        .unwrap_or_default();
    if runs.pending > 0 {
        // A kernel that does not build or boot will not on the next run
        // either: drop the runs nobody has started.
        if runs.finished.is_empty()
            && matches!(
                runs.failure.as_deref(),
                Some("build_failed" | "boot_failed")
            )
        {
            plan.cancel_queued.push(s.commit_id);
        }
        return None;
    }
    let probe = metric_values(&runs, &b.metric);
    if probe.is_empty() {
        let why = runs
            .failure
            .as_deref()
            .unwrap_or("no run reported the metric");
        plan.finished.push((
            s.id,
            StepState::Skip,
            None,
            format!("skipped: {why} ({} runs)", runs.failed),
        ));
        return Some(StepState::Skip);
    }
    if samples.good.is_empty() || samples.bad.is_empty() {
        plan.finished.push((
            s.id,
            StepState::Undecided,
            None,
            "an end of the range has no sample of the metric".into(),
        ));
        return Some(StepState::Undecided);
    }
    let cap = u32::try_from(b.runs_cap).unwrap_or(0);
    let cfg = comparisons::stats_config(cap);
    let v = classify(&b.metric, &samples.good, &probe, &samples.bad, &cfg);
    let change = Some(v.vs_good.change);
    let detail = format!(
        "{} runs: vs good {} (p={:.4}), vs bad {} (p={:.4}), position {:.2}",
        probe.len(),
        v.vs_good.kbot.outcome.as_str(),
        v.vs_good.kbot.p_value,
        v.vs_bad.kbot.outcome.as_str(),
        v.vs_bad.kbot.p_value,
        v.position
    );
    match v.class {
        StepClass::Good => {
            plan.finished.push((s.id, StepState::Good, change, detail));
            Some(StepState::Good)
        }
        StepClass::Bad => {
            plan.finished.push((s.id, StepState::Bad, change, detail));
            Some(StepState::Bad)
        }
        StepClass::Unknown if runs.total() < cap => {
            let more = crate::submissions::expand::extra_runs(runs.total(), cap);
            plan.more_runs.push((s.commit_id, more));
            None
        }
        StepClass::Unknown => {
            plan.finished
                .push((s.id, StepState::Undecided, change, detail));
            Some(StepState::Undecided)
        }
    }
}

/// From what is known, what is left of the range: the first bad commit, the
/// next commits to test, or no way to decide.
async fn plan_range(
    state: &AppState,
    b: &BisectionRow,
    steps: &[StepRow],
    decided: &HashMap<i64, StepState>,
    plan: &mut Plan,
) -> Result<()> {
    let repo = repos::repo_by_id(&state.db, b.repo_id).await?;
    let mirror = repos::mirror_for(state, &repo.name);
    let good_end = repos::commit_by_id(state.db.read(), b.good_commit_id).await?;
    let bad_end = repos::commit_by_id(state.db.read(), b.bad_commit_id).await?;
    let sha_of: HashMap<i64, &str> = steps
        .iter()
        .map(|s| (s.commit_id, s.sha.as_str()))
        .collect();
    let with = |wanted: StepState| -> Vec<String> {
        decided
            .iter()
            .filter(|(_, st)| **st == wanted)
            .filter_map(|(id, _)| sha_of.get(id).map(|s| (*s).to_owned()))
            .collect()
    };
    let mut goods = with(StepState::Good);
    goods.push(good_end.sha.clone());
    let mut bads = with(StepState::Bad);
    bads.push(bad_end.sha.clone());
    // The bad commit with the smallest range below it, as `git bisect` keeps
    // only the newest bad mark.
    let mut best: Option<(String, Vec<String>)> = None;
    for bad in bads {
        let candidates = mirror.bisect_candidates(&bad, &goods, true).await?;
        if best
            .as_ref()
            .is_none_or(|(_, c)| candidates.len() < c.len())
        {
            best = Some((bad, candidates));
        }
    }
    let Some((bad, candidates)) = best else {
        return Ok(());
    };
    if candidates.is_empty() {
        plan.found = Some(repos::resolve_commit(state, &repo, &bad).await?);
        return Ok(());
    }
    let in_range: HashSet<&str> = candidates.iter().map(String::as_str).collect();
    let testing: Vec<&StepRow> = steps
        .iter()
        .filter(|s| s.state == StepState::Testing && !decided.contains_key(&s.commit_id))
        .collect();
    for s in &testing {
        if !in_range.contains(s.sha.as_str()) {
            plan.dropped.push((s.id, s.commit_id));
        }
    }
    let tried: HashSet<&str> = steps.iter().map(|s| s.sha.as_str()).collect();
    let open: Vec<&String> = candidates
        .iter()
        .filter(|c| !tried.contains(c.as_str()))
        .collect();
    let busy = testing
        .iter()
        .filter(|s| in_range.contains(s.sha.as_str()))
        .count();
    if open.is_empty() {
        if busy == 0 {
            let mut remaining: Vec<String> = candidates.clone();
            remaining.push(bad.clone());
            plan.conclusion = Some(Conclusion {
                reason: Some(format!(
                    "only skipped or undecided commits are left: the first bad commit is one \
                     of these {} (a build or boot failure, or runs that did not decide)",
                    remaining.len()
                )),
                remaining,
                ..Conclusion::ended(BisectionState::Inconclusive)
            });
        }
        return Ok(());
    }
    let parallel = store::group_agents(&state.db, &b.tbox_group)
        .await?
        .clamp(1, MAX_PARALLEL_PROBES);
    let want = usize::try_from(parallel).unwrap_or(1).saturating_sub(busy);
    if want == 0 {
        return Ok(());
    }
    let picks = spread_picks(&mirror, &bad, &goods, &open, want).await?;
    for sha in picks {
        plan.new_steps
            .push(repos::resolve_commit(state, &repo, &sha).await?);
    }
    Ok(())
}

/// `want` commits to test: `git bisect`'s choice first, then commits spread
/// evenly through the range in topological order (k-ary bisection).
async fn spread_picks(
    mirror: &repos::git::Mirror,
    bad: &str,
    goods: &[String],
    open: &[&String],
    want: usize,
) -> Result<Vec<String>> {
    let mut picks = vec![open[0].clone()];
    if want > 1 && open.len() > 1 {
        let open_set: HashSet<&str> = open.iter().map(|s| s.as_str()).collect();
        let topo: Vec<String> = mirror
            .bisect_candidates(bad, goods, false)
            .await?
            .into_iter()
            .filter(|s| open_set.contains(s.as_str()) && *s != picks[0])
            .collect();
        let extra = (want - 1).min(topo.len());
        for i in 1..=extra {
            let at = i * topo.len() / (extra + 1);
            if let Some(sha) = topo.get(at.min(topo.len() - 1)) {
                if !picks.contains(sha) {
                    picks.push(sha.clone());
                }
            }
        }
    }
    Ok(picks)
}

/// Writes a plan, if the bisection is still as it was read.
async fn apply(state: &AppState, b: &BisectionRow, steps: &[StepRow], plan: Plan) -> Result<()> {
    if plan.is_empty() {
        return Ok(());
    }
    let verify = match &plan.found {
        Some(first_bad) => Some(verification_pair(state, b, first_bad).await?),
        None => None,
    };
    let probe_job = b
        .probe_atomic_job_id
        .ok_or_else(|| anyhow::anyhow!("bisection {} has no probe job", b.id))?;
    // As many runs per probe as the job file asks for; `unknown` adds more.
    let job = store::job_spec(&state.db, probe_job).await?;
    let cap = u32::try_from(b.runs_cap).unwrap_or(1);
    let first_runs = crate::submissions::expand::initial_runs(job.runs, cap);
    let mut tx = state.db.begin().await?;
    if !store::take(&mut tx, b).await? {
        return Ok(());
    }
    for (step_id, st, change, detail) in &plan.finished {
        store::finish_step(&mut tx, *step_id, *st, *change, detail).await?;
    }
    for (step_id, commit_id) in &plan.dropped {
        store::cancel_queued_runs(&mut tx, probe_job, *commit_id).await?;
        store::finish_step(
            &mut tx,
            *step_id,
            StepState::Cancelled,
            None,
            "outside the range left",
        )
        .await?;
    }
    for commit_id in &plan.cancel_queued {
        store::cancel_queued_runs(&mut tx, probe_job, *commit_id).await?;
    }
    for (commit_id, runs) in &plan.more_runs {
        crate::jobs::enqueue_commit_runs(
            &mut tx,
            probe_job,
            *commit_id,
            *runs,
            state.config.max_attempts,
        )
        .await?;
    }
    let first_idx = i64::try_from(steps.len()).unwrap_or(i64::MAX);
    for (idx, commit) in (first_idx..).zip(&plan.new_steps) {
        store::insert_step(&mut tx, b.id, idx, commit.id).await?;
        crate::jobs::enqueue_commit_runs(
            &mut tx,
            probe_job,
            commit.id,
            first_runs,
            state.config.max_attempts,
        )
        .await?;
    }
    if let (Some(first_bad), Some(pair)) = (&plan.found, verify) {
        let verify_id = queue_verification(state, &mut tx, b, first_bad, &pair).await?;
        store::start_verifying(&mut tx, b.id, first_bad.id, verify_id).await?;
        if let Some(probe) = b.probe_submission_id {
            store::close_submission(&mut tx, probe).await?;
        }
        tracing::info!(bisection = b.id, first_bad = %first_bad.sha, verify_submission = verify_id, "first bad commit found; verifying");
    }
    if let Some(c) = &plan.conclusion {
        store::conclude(&mut tx, b, c).await?;
        if let Some(probe) = b.probe_submission_id {
            store::close_submission(&mut tx, probe).await?;
        }
        tracing::info!(bisection = b.id, state = c.state.as_str(), reason = ?c.reason, "bisection ended");
    }
    tx.commit().await?;
    state.wake_lessees();
    Ok(())
}

/// The first bad commit's parent and the job to run on both.
struct VerificationPair {
    parent: StoredCommit,
    job: AtomicJob,
    origin: store::OriginJob,
}

async fn verification_pair(
    state: &AppState,
    b: &BisectionRow,
    first_bad: &StoredCommit,
) -> Result<VerificationPair> {
    let repo = repos::repo_by_id(&state.db, b.repo_id).await?;
    let parent = submissions::parent_of(state, &repo, first_bad).await?;
    let probe_job = b
        .probe_atomic_job_id
        .ok_or_else(|| anyhow::anyhow!("bisection {} has no probe job", b.id))?;
    let job = store::job_spec(&state.db, probe_job).await?;
    let mut conn = state.db.read().acquire().await?;
    let origin = store::origin_job(&mut conn, b.origin_atomic_job_id).await?;
    Ok(VerificationPair {
        parent,
        job,
        origin,
    })
}

/// Queues the fresh A/B of the first bad commit against its parent, pinned
/// to the bisection's tbox group.
async fn queue_verification(
    state: &AppState,
    tx: &mut Tx,
    b: &BisectionRow,
    first_bad: &StoredCommit,
    pair: &VerificationPair,
) -> Result<i64> {
    let jobs = [pair.job.clone()];
    let id = submissions::queue_pair(
        state,
        tx,
        NewPair {
            user_id: pair.origin.user_id,
            repo_id: b.repo_id,
            job_file: &pair.origin.job_file,
            atomic_jobs: &jobs,
            // One atomic job the original submission ran: nothing skipped.
            skipped: &[],
            base: &pair.parent,
            head: first_bad,
            priority: pair.origin.priority,
            max_runs: u32::try_from(b.runs_cap).unwrap_or(1),
            kind: "verify",
            bisect: false,
            watch_id: None,
        },
    )
    .await?;
    sqlx::query(
        "UPDATE atomic_jobs SET tbox_group = $1, preferred_agent_id = $2 WHERE submission_id = $3",
    )
    .bind(&b.tbox_group)
    .bind(pair.origin.preferred_agent_id)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(id)
}

/// Once the verification pair is settled: report, link to an earlier
/// report of the same patch, or say it did not reproduce.
async fn check_verification(state: &AppState, b: &BisectionRow) -> Result<()> {
    let Some(verify_id) = b.verify_submission_id else {
        return Err(anyhow::anyhow!("bisection {} verifies nothing", b.id).into());
    };
    let verify_state = store::submission_state(&state.db, verify_id).await?;
    if verify_state == SubmissionState::Active {
        return Ok(());
    }
    let atomic_job_id = store::atomic_job_of(&state.db, verify_id).await?;
    let compared = comparisons::compare_pair(state, atomic_job_id).await?;
    let confirmed = compared.as_ref().and_then(|pc| {
        pc.comparison
            .metrics
            .iter()
            .find(|m| m.metric == b.metric)
            .filter(|m| m.kbot.outcome == Outcome::Different && m.impact == Impact::Regression)
    });
    let mut conclusion = Conclusion::ended(BisectionState::NotConfirmed);
    let mut report = None;
    match (confirmed, &compared) {
        (Some(m), Some(pc)) => {
            let patch_id = patch_id_of(state, b, &pc.head.sha).await;
            let earlier = match &patch_id {
                Some(p) => {
                    store::reported_with_patch(&state.db, p, &b.job_key, &b.metric, b.id).await?
                }
                None => None,
            };
            conclusion.patch_id = patch_id;
            if let Some(earlier) = earlier {
                conclusion.state = BisectionState::Duplicate;
                conclusion.duplicate_of = Some(earlier);
                conclusion.reason = Some(format!(
                    "the same patch was reported by bisection {earlier}: no new mail"
                ));
            } else {
                conclusion.state = BisectionState::Reported;
                report = Some((pc, m));
            }
        }
        _ => {
            conclusion.state = BisectionState::NotConfirmed;
            conclusion.reason = Some(not_confirmed_reason(
                verify_state,
                compared.as_ref(),
                &b.metric,
            ));
        }
    }
    let mut tx = state.db.begin().await?;
    if !store::take(&mut tx, b).await? {
        return Ok(());
    }
    if let Some((pc, m)) = report {
        let still_on = still_on(state, b, &pc.head).await?;
        let blame = crate::mail::Blame {
            submission_id: verify_id,
            pc,
            kpi: m,
            bisection_id: Some(b.id),
            still_on,
        };
        let mail = &state.config.mail;
        if let Some(report) = crate::mail::enqueue_bisection_report(&mut tx, mail, &blame).await? {
            regressions::link_report(&mut tx, b.id, report).await?;
        }
    }
    if conclusion.state == BisectionState::Duplicate {
        let reason = conclusion.reason.as_deref().unwrap_or_default();
        regressions::mark_by_robot(&mut tx, b.id, regressions::TriageState::Duplicate, reason)
            .await?;
    }
    store::conclude(&mut tx, b, &conclusion).await?;
    tx.commit().await?;
    tracing::info!(
        bisection = b.id,
        state = conclusion.state.as_str(),
        "bisection ended"
    );
    Ok(())
}

/// Why a verification did not confirm the regression.
fn not_confirmed_reason(
    verify_state: SubmissionState,
    pc: Option<&PairComparison>,
    metric: &str,
) -> String {
    match pc.and_then(|pc| pc.comparison.metrics.iter().find(|m| m.metric == metric)) {
        _ if verify_state == SubmissionState::Cancelled => "the verification was cancelled".into(),
        None => {
            "the verification pair has no finished run on a side (build or boot failure)".into()
        }
        Some(m) => format!(
            "the first bad commit against its parent: {} {:+.1}% (not a confirmed regression)",
            m.kbot.outcome.as_str(),
            m.change
        ),
    }
}

async fn patch_id_of(state: &AppState, b: &BisectionRow, sha: &str) -> Option<String> {
    let mirror = repos::mirror_for(state, &b.repo_name);
    match mirror.patch_id(sha).await {
        Ok(id) => id,
        Err(e) => {
            // Without a patch-id the report still goes out; only the
            // cross-tree de-duplication is lost for this commit.
            tracing::warn!(bisection = b.id, %sha, error = %e, "no patch-id");
            None
        }
    }
}

/// `[still regression on repo/branch head]`: the bad end, when it is a later
/// commit than the first bad one.
async fn still_on(
    state: &AppState,
    b: &BisectionRow,
    first_bad: &StoredCommit,
) -> Result<Vec<kbot_core::report::StillOn>> {
    let bad_end = repos::commit_by_id(state.db.read(), b.bad_commit_id).await?;
    if bad_end.id == first_bad.id {
        return Ok(Vec::new());
    }
    let repo = repos::repo_by_id(&state.db, b.repo_id).await?;
    Ok(vec![kbot_core::report::StillOn {
        tree_branch: format!("{}/{}", repo.name, repo.default_branch),
        sha: bad_end.sha,
    }])
}

/// Cancels an open bisection and its queued runs.
pub async fn cancel(state: &AppState, id: i64, by: &str) -> Result<BisectionRow> {
    let b = store::get(&state.db, id).await?;
    if !b.state.is_open() {
        return Err(Error::Conflict(format!(
            "bisection {id} has already ended ({})",
            b.state
        )));
    }
    let mut tx = state.db.begin().await?;
    if !store::take(&mut tx, &b).await? {
        return Err(Error::Conflict(format!(
            "bisection {id} changed meanwhile; try again"
        )));
    }
    let reason = format!("cancelled by {by}");
    for sub in [b.probe_submission_id, b.verify_submission_id]
        .into_iter()
        .flatten()
    {
        crate::jobs::cancel_submission(&mut tx, sub, &reason).await?;
    }
    let conclusion = Conclusion {
        reason: Some(reason),
        ..Conclusion::ended(BisectionState::Cancelled)
    };
    store::conclude(&mut tx, &b, &conclusion).await?;
    tx.commit().await?;
    tracing::info!(bisection = id, by, "bisection cancelled");
    store::get(&state.db, id).await
}
