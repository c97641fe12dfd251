//! One step of a running bisection: classify the tested commits whose runs
//! are in, narrow the range as `git bisect` would, and queue the next
//! commits to test (several at once when the tbox group has several
//! agents), all written in one transaction ([`apply`]).

use std::collections::{HashMap, HashSet};

use kbot_core::stats::bisect::{classify, StepClass};

use super::samples::{metric_values, Samples};
use super::store::{self, BisectionRow, BisectionState, Conclusion, StepRow, StepState};
use super::verify::{queue_verification, verification_pair};
use crate::comparisons;
use crate::error::Result;
use crate::jobs::lifecycle;
use crate::repos::{self, StoredCommit};
use crate::state::AppState;

/// Most commits a bisection tests at once, however many agents the group has.
const MAX_PARALLEL_PROBES: i64 = 7;

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
    /// `runs` more runs of a commit, once per pass however many steps ask.
    fn add_runs(&mut self, commit_id: i64, runs: u32) {
        if runs > 0 && !self.more_runs.iter().any(|(c, _)| *c == commit_id) {
            self.more_runs.push((commit_id, runs));
        }
    }

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

pub(super) async fn step(state: &AppState, b: &BisectionRow) -> Result<()> {
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
    if runs.pending > 0 || samples.ends_pending(b) {
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
        StepClass::Unknown if runs.total() < cap || samples.ends_below(b, cap) => {
            let extra = |queued| crate::submissions::expand::extra_runs(queued, cap);
            plan.add_runs(s.commit_id, extra(runs.total()));
            // An end sampled less than the cap can keep a clear change from
            // deciding (a rank test between 2 and 6 runs never reaches
            // α): it gets runs in the probe job too.
            for end in [b.good_commit_id, b.bad_commit_id] {
                plan.add_runs(end, extra(samples.end_runs(b, end)));
            }
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
        lifecycle::cancel_queued_runs(&mut tx, probe_job, *commit_id).await?;
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
        lifecycle::cancel_queued_runs(&mut tx, probe_job, *commit_id).await?;
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
            lifecycle::close_probes(&mut tx, probe).await?;
        }
        tracing::info!(bisection = b.id, first_bad = %first_bad.sha, verify_submission = verify_id, "first bad commit found; verifying");
    }
    if let Some(c) = &plan.conclusion {
        store::conclude(&mut tx, b, c).await?;
        if let Some(probe) = b.probe_submission_id {
            lifecycle::close_probes(&mut tx, probe).await?;
        }
        tracing::info!(bisection = b.id, state = c.state.as_str(), reason = ?c.reason, "bisection ended");
    }
    tx.commit().await?;
    state.wake_lessees();
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::bisect::store::CommitRuns;

    const KPI: &str = "perf-bench-sched-pipe.ops_per_sec";
    const GOOD: i64 = 1;
    const BAD: i64 = 2;
    const PROBE: i64 = 3;

    fn bisection(cap: i64) -> BisectionRow {
        BisectionRow::for_test(KPI, cap)
    }

    fn step() -> StepRow {
        StepRow {
            id: 10,
            idx: 0,
            commit_id: PROBE,
            sha: "c0ffee".into(),
            subject: "fs/pipe: zero scratch pages".into(),
            state: StepState::Testing,
            change_pct: None,
            detail: String::new(),
            started_at: 0,
            finished_at: None,
        }
    }

    fn runs(values: &[f64]) -> CommitRuns {
        CommitRuns {
            finished: values
                .iter()
                .map(|v| BTreeMap::from([(KPI.to_string(), *v)]))
                .collect(),
            ..CommitRuns::default()
        }
    }

    /// The e2e's case: ends of two identical runs each (an exact clock's
    /// pair decides at once), a culprit whose runs land on two values. No
    /// rank test between 2 and 6 runs reaches α, so at the probe's cap the
    /// ends get runs; with them the culprit is bad.
    #[test]
    fn a_probe_at_its_cap_asks_for_runs_of_ends_too_small_to_decide() {
        let b = bisection(6);
        let two_states = [2829.0, 2835.0, 2829.0, 2835.0, 2829.0, 2835.0];
        let mut samples = Samples {
            good: vec![13550.0; 2],
            bad: vec![2829.0; 2],
            probes: HashMap::from([(PROBE, runs(&two_states))]),
        };
        let mut plan = Plan::default();
        assert_eq!(judge_step(&b, &step(), &samples, &mut plan), None);
        assert!(plan.finished.is_empty(), "{:?}", plan.finished);
        assert_eq!(plan.more_runs, vec![(GOOD, 2), (BAD, 2)]);

        // The ends' runs pending in the probe job: the step waits.
        samples.probes.insert(
            GOOD,
            CommitRuns {
                pending: 2,
                ..CommitRuns::default()
            },
        );
        let mut plan = Plan::default();
        assert_eq!(judge_step(&b, &step(), &samples, &mut plan), None);
        assert!(plan.more_runs.is_empty() && plan.finished.is_empty());

        // Runs of an end that failed count against the cap: not asked again.
        samples.probes.insert(
            GOOD,
            CommitRuns {
                failed: 4,
                ..CommitRuns::default()
            },
        );
        let mut plan = Plan::default();
        assert_eq!(judge_step(&b, &step(), &samples, &mut plan), None);
        assert_eq!(plan.more_runs, vec![(BAD, 2)]);

        // Up to the cap on each end: decided.
        samples.probes.remove(&GOOD);
        samples.good = vec![13550.0; 6];
        samples.bad = vec![2829.0; 6];
        let mut plan = Plan::default();
        assert_eq!(
            judge_step(&b, &step(), &samples, &mut plan),
            Some(StepState::Bad),
            "{:?}",
            plan.finished
        );
    }
}
