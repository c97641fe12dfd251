//! Every KPI of a job, one false-alarm budget.
//!
//! A job acts (a report, a bisection) when one of its KPIs is `different`;
//! its false-alarm budget α (1%) is for the job, whatever number of KPIs it
//! has. The KPIs are one family of hypotheses, tested with a graphical
//! procedure (Bretz, Maurer, Brannath & Posch, *Statistics in Medicine*
//! 28, 2009, algorithm 1): each KPI holds a share of α, a KPI whose test
//! rejects at its share passes that share on to the KPIs not yet rejected,
//! and the rest are tested again at their larger shares, until none
//! rejects. The procedure is a shortcut of a closed test with weighted
//! Bonferroni tests, so it keeps the job's family-wise rate at α for any
//! correlation between the KPIs and any of them truly changed.
//!
//! # The graph kbot uses
//!
//! The primary KPI (the job's headline figure) starts with
//! [`PRIMARY_SHARE`] of α; the other KPIs share the rest evenly; a rejected
//! KPI passes its share on evenly to every KPI still open. So a regression
//! of the primary is found almost as well as when it alone spent α, a
//! secondary KPI that moves on its own is still found (lmbench3's PIPE
//! latency up 20% with the bandwidth unchanged), and once the primary is
//! `different` its share opens the others.
//!
//! The share was chosen with the calibration (`core/examples/calibrate.rs
//! --only-jobs --kpi-procedure ...`, 2000 jobs a cell, seed 1, normal noise
//! at 2% CV; the false regressions are the worst of the 16 rows of
//! BENCHMARKS.md's "Jobs of several KPIs": 1, 3 and 10 KPIs, independent
//! and correlated, unchanged, the primary +5% and −5%, one secondary +10%):
//!
//! | procedure | job false regressions, worst row | primary −5%, 10 KPIs, cap 8: acted on (independent / correlated) | one secondary +10%, 10 KPIs, cap 8: acted on |
//! |---|---|---|---|
//! | Holm (every KPI α/10 at first) | 0.65% | 73.30% / 73.20% | 100.00% / 100.00% |
//! | primary 0.5, the rest shared | 0.70% | 91.30% / 91.70% | 99.85% / 100.00% |
//! | **primary 0.7**, the rest shared | 0.65% | 93.80% / 94.25% | 99.50% / 99.55% |
//! | primary 0.8, the rest shared | 0.65% | 94.35% / 94.90% | 77.65% / 76.85% |
//! | the rule before (the primary at α, the others at α beside a `different` primary) | 1.85% | 95.70% / 95.90% | 0.80% / 0.80% |
//!
//! Every graph keeps the budget; they differ in where the power goes.
//! Holm costs the primary most (α/10 first at 10 KPIs). 0.8 starves the
//! secondaries of a 10-KPI job: each holds 0.2/9 of α, whose level at the
//! 8-run look (1.42·10⁻⁴) is below the smallest p the rank tests can give
//! at 8 runs a side (2/C(16,8) = 1.55·10⁻⁴), so a secondary that fails
//! Welch's gate (a quarter of normal samples at 8 runs, the bimodality and
//! outlier checks) can never be acted on. 0.7 is the largest share in
//! tenths that keeps every secondary of a 10-KPI job above that floor
//! (0.3/9 of α: 2.15·10⁻⁴ at the 8-run look) and keeps the primary within
//! two points of spending α alone.
//!
//! # With the adaptive looks
//!
//! Runs come in batches and the verdict looks again after each
//! ([`super::sequential`]). A KPI's share `w` gets the group-sequential
//! levels of the spending function `w·α·t^ρ` ([`StatsConfig::look_alpha_share`]),
//! and at each look the graph is run on that look's p-values (Maurer &
//! Bretz, *Statistics in Biopharmaceutical Research* 5, 2013: a share
//! passed on is spent along the same looks, earlier ones included, and the
//! levels of a larger share are larger at every look). A KPI the job acts
//! on at its last look crossed its boundary at that look, so the rate stays
//! within what the design spends. A KPI decided by exact values
//! ([`super::KbotVerdict::deterministic`]) has no p-value: its `different`
//! rejects at any share, its error is the identical-values rule's.

use super::StatsConfig;

/// The primary KPI's share of α before anything is rejected; see the
/// module doc for why 0.7.
pub const PRIMARY_SHARE: f64 = 0.7;

/// A graph of `m` hypotheses: initial shares of α (summing to at most 1)
/// and the transition matrix (`g[j][k]`: the part of `j`'s share that goes
/// to `k` when `j` is rejected; each row sums to at most 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    weights: Vec<f64>,
    transitions: Vec<Vec<f64>>,
}

/// What the procedure made of one hypothesis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub rejected: bool,
    /// The share of α it was last tested at (the one it was rejected at,
    /// or its share when nothing more rejected).
    pub share: f64,
}

impl Graph {
    /// Holm's procedure: every hypothesis α/m, a rejected one's share
    /// spread evenly over the rest.
    pub fn holm(m: usize) -> Graph {
        Graph::primary_first(m, 1.0 / m.max(1) as f64)
    }

    /// Hypothesis 0 (the primary) starts with `primary_share`, the others
    /// share the rest evenly; a rejected one's share goes evenly to the
    /// rest. One hypothesis holds all of α.
    pub fn primary_first(m: usize, primary_share: f64) -> Graph {
        let weights = match m {
            0 => Vec::new(),
            1 => vec![1.0],
            _ => {
                let p = primary_share.clamp(0.0, 1.0);
                let rest = (1.0 - p) / (m - 1) as f64;
                std::iter::once(p)
                    .chain(std::iter::repeat_n(rest, m - 1))
                    .collect()
            }
        };
        let even = if m > 1 { 1.0 / (m - 1) as f64 } else { 0.0 };
        let transitions = (0..m)
            .map(|j| (0..m).map(|k| if j == k { 0.0 } else { even }).collect())
            .collect();
        Graph {
            weights,
            transitions,
        }
    }

    /// The graph `cfg` names for a family of `m` KPIs, the primary first.
    pub fn for_config(cfg: &StatsConfig, m: usize) -> Graph {
        match cfg.kpi_procedure {
            KpiProcedure::Holm => Graph::holm(m),
            KpiProcedure::PrimaryFirst { primary_share } => Graph::primary_first(m, primary_share),
        }
    }

    /// Runs the procedure: `rejects(i, share)` says whether hypothesis `i`
    /// rejects when tested at `share` of α. Rejects while some open
    /// hypothesis rejects at its current share, passing shares on (the
    /// result does not depend on the order, Bretz et al. 2009, thm. 1).
    pub fn run(&self, mut rejects: impl FnMut(usize, f64) -> bool) -> Vec<Decision> {
        let m = self.weights.len();
        let mut w = self.weights.clone();
        let mut g = self.transitions.clone();
        let mut open = vec![true; m];
        let mut out: Vec<Decision> = w
            .iter()
            .map(|&share| Decision {
                rejected: false,
                share,
            })
            .collect();
        while let Some(j) = (0..m).find(|&j| open[j] && w[j] > 0.0 && rejects(j, w[j])) {
            out[j] = Decision {
                rejected: true,
                share: w[j],
            };
            open[j] = false;
            pass_on(&mut w, &mut g, &open, j);
            for (k, d) in out.iter_mut().enumerate() {
                if open[k] {
                    d.share = w[k];
                }
            }
        }
        out
    }
}

/// Algorithm 1's update when `j` is rejected: its share goes along its
/// edges, and the edges through `j` are joined.
fn pass_on(w: &mut [f64], g: &mut [Vec<f64>], open: &[bool], j: usize) {
    let m = w.len();
    let old = g.to_vec();
    for l in (0..m).filter(|&l| open[l]) {
        w[l] += w[j] * old[j][l];
        for k in (0..m).filter(|&k| open[k] && k != l) {
            let loop_back = old[l][j] * old[j][l];
            g[l][k] = if loop_back < 1.0 {
                (old[l][k] + old[l][j] * old[j][k]) / (1.0 - loop_back)
            } else {
                0.0
            };
        }
        g[l][j] = 0.0;
    }
    w[j] = 0.0;
    g[j].iter_mut().for_each(|x| *x = 0.0);
}

/// Which multiple-testing graph spreads α over a job's KPIs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KpiProcedure {
    /// Every KPI α/m at first ([`Graph::holm`]).
    Holm,
    /// The primary KPI `primary_share` of α, the others the rest
    /// ([`Graph::primary_first`]).
    PrimaryFirst { primary_share: f64 },
}

impl Default for KpiProcedure {
    fn default() -> Self {
        KpiProcedure::PrimaryFirst {
            primary_share: PRIMARY_SHARE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn holm_steps_down_in_order_and_stops() {
        // p-values against α = 0.05 over four hypotheses: Holm compares the
        // smallest with α/4, the next with α/3, ... and stops at the first
        // that fails, whatever the ones after it would do.
        let alpha = 0.05;
        let p = [0.04, 0.011, 0.02, 0.012];
        let d = Graph::holm(4).run(|i, share| p[i] <= share * alpha);
        let rejected: Vec<bool> = d.iter().map(|d| d.rejected).collect();
        // 0.011 ≤ 0.0125, 0.012 ≤ 0.01667, 0.02 ≤ 0.025, 0.04 ≤ 0.05.
        assert_eq!(rejected, [true, true, true, true]);
        let p = [0.04, 0.011, 0.03, 0.012];
        let d = Graph::holm(4).run(|i, share| p[i] <= share * alpha);
        let rejected: Vec<bool> = d.iter().map(|d| d.rejected).collect();
        // 0.03 > α/2 stops it: 0.04 is not tested at α although 0.04 ≤ α.
        assert_eq!(rejected, [false, true, false, true]);
        assert!(close(d[0].share, 0.5) && close(d[2].share, 0.5), "{d:?}");
        assert!(close(d[1].share, 0.25) && close(d[3].share, 1.0 / 3.0));
    }

    #[test]
    fn nothing_rejects_when_the_smallest_fails_its_share() {
        let p = [0.02, 0.03, 0.04];
        let d = Graph::holm(3).run(|i, share| p[i] <= share * 0.05);
        assert!(d.iter().all(|d| !d.rejected && close(d.share, 1.0 / 3.0)));
    }

    #[test]
    fn the_primary_passes_its_share_on() {
        // Primary 0.8, two secondaries 0.1 each. A secondary at p = 0.003
        // fails 0.1·α = 0.001 alone, and passes once the primary's 0.8 is
        // split between the two (0.5·α = 0.005).
        let alpha = 0.01;
        let graph = Graph::primary_first(3, 0.8);
        let p = [0.0001, 0.003, 0.5];
        let d = graph.run(|i, share| p[i] <= share * alpha);
        assert!(d[0].rejected && d[1].rejected && !d[2].rejected, "{d:?}");
        assert!(close(d[0].share, 0.8));
        assert!(close(d[1].share, 0.5), "{d:?}");
        // After both, the last holds everything.
        assert!(close(d[2].share, 1.0), "{d:?}");
        // Without the primary's rejection the secondary stays at 0.1.
        let p = [0.5, 0.003, 0.5];
        let d = graph.run(|i, share| p[i] <= share * alpha);
        assert!(d.iter().all(|d| !d.rejected));
        assert!(close(d[1].share, 0.1));
    }

    #[test]
    fn a_secondary_passes_its_share_to_the_primary() {
        // A secondary far outside the noise rejects first; its 0.1 goes
        // half to the primary (0.85·α), which then rejects at p = 0.0082.
        let alpha = 0.01;
        let p = [0.0082, 1e-9, 0.5];
        let d = Graph::primary_first(3, 0.8).run(|i, share| p[i] <= share * alpha);
        assert!(d[0].rejected && d[1].rejected && !d[2].rejected, "{d:?}");
        assert!(close(d[0].share, 0.85), "{d:?}");
    }

    #[test]
    fn shares_never_exceed_alpha() {
        for m in 1..=12 {
            let graph = Graph::primary_first(m, 0.8);
            let total: f64 = graph.weights.iter().sum();
            assert!(close(total, 1.0), "{m}: {total}");
            // Reject everything: each share at rejection is at most 1, and
            // the last one holds all of α.
            let d = graph.run(|_, _| true);
            assert!(d.iter().all(|d| d.rejected && d.share <= 1.0 + 1e-12));
            assert!(d.iter().any(|d| close(d.share, 1.0)));
        }
        assert_eq!(Graph::holm(1).weights, [1.0]);
        assert!(Graph::holm(0).run(|_, _| true).is_empty());
    }
}
