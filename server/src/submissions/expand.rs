//! How many runs a submission gets: a first batch of [`FIRST_BATCH`] runs
//! per side (enough when both sides are exact, as under an
//! instruction-counted guest clock), then up to the job file's `runs`, then
//! more while the verdict stays `unknown`, up to a cap per side.
//!
//! The rows themselves are inserted by [`crate::jobs::enqueue_pair`] and
//! [`crate::jobs::enqueue_more_runs`], which order them base, head, base, head.

/// Default cap on runs per side, raised by `unknown` verdicts: the statistics
/// issue fixes 10 per side as the default budget.
pub const DEFAULT_MAX_RUNS: u32 = 10;

/// Hard ceiling on `max_runs`, so one submission cannot monopolise the fleet.
pub const MAX_RUNS_LIMIT: u32 = 100;

/// How many extra runs per side an `unknown` verdict asks for at a time:
/// small enough that a clear answer stops early, big enough that each round
/// can move the p-value (the statistics issue asks for "a few at a time").
pub const EXTRA_RUNS_STEP: u32 = 2;

/// Runs per side of a pair's (or a bisection probe's) first batch: 2 runs
/// a side that read the same value to the last digit decide the pair
/// (`kbot_core::stats::Comparison::exact`), so an exact pair never needs
/// more; a noisy one is topped up to the job's `runs` and the statistics'
/// first look in the next batch, which costs no run and no extra round
/// over starting at 3, since the first look (4 runs) needed a second batch
/// anyway.
pub const FIRST_BATCH: u32 = 2;

/// The number of runs per side to start with: the first batch, or fewer
/// when the job file asks for fewer; at least one, never above the cap.
pub fn initial_runs(requested: u32, max_runs: u32) -> u32 {
    requested.min(FIRST_BATCH).clamp(1, max_runs.max(1))
}

/// How many more runs per side an `unknown` verdict gets, given the runs
/// already queued per side; 0 once the cap is reached.
pub fn extra_runs(queued: u32, max_runs: u32) -> u32 {
    max_runs.saturating_sub(queued).min(EXTRA_RUNS_STEP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_start_within_the_cap() {
        assert_eq!(initial_runs(0, 10), 1);
        assert_eq!(initial_runs(1, 10), 1);
        assert_eq!(initial_runs(5, 10), 2);
        assert_eq!(initial_runs(50, 1), 1);
        assert_eq!(initial_runs(3, 0), 1);
    }

    #[test]
    fn extra_runs_stop_at_the_cap() {
        assert_eq!(extra_runs(5, 10), 2);
        assert_eq!(extra_runs(9, 10), 1);
        assert_eq!(extra_runs(10, 10), 0);
        assert_eq!(extra_runs(12, 10), 0);
    }
}
