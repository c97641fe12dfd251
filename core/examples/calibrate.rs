//! Calibration of the verdicts on simulated data, with fixed seeds.
//!
//! ```text
//! cargo run --release -p kbot-core --example calibrate -- [--trials 10000] [--seed 1]
//! ```
//!
//! Prints Markdown tables (the "Statistics" section of BENCHMARKS.md):
//! A/A false-positive rates of kbot's adaptive procedure and of 0-day's rule
//! per noise model and CV, power for a 5% shift at 2% CV, and change-point
//! detection on simulated histories.

use std::collections::BTreeMap;

use kbot_core::stats::changepoint::{detect, ChangePointConfig};
use kbot_core::stats::{compare_metric, zeroday, Comparison, Outcome, StatsConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Normal, StudentT};

/// A KPI with 0-day's 1% floor, higher is better.
const METRIC: &str = "pipen.MB/sec";

#[derive(Clone, Copy, Debug)]
enum Noise {
    Normal,
    LogNormal,
    /// Student t with 3 degrees of freedom: frequent outliers.
    HeavyTailed,
    /// 70/30 mixture of two narrow modes 2.08σ apart.
    Bimodal,
}

impl Noise {
    const ALL: [Noise; 4] = [
        Noise::Normal,
        Noise::LogNormal,
        Noise::HeavyTailed,
        Noise::Bimodal,
    ];

    fn name(self) -> &'static str {
        match self {
            Noise::Normal => "normal",
            Noise::LogNormal => "log-normal",
            Noise::HeavyTailed => "heavy-tailed (t3)",
            Noise::Bimodal => "bimodal (70/30)",
        }
    }

    /// One run's value around `mean` with coefficient of variation `cv`.
    fn draw(self, rng: &mut StdRng, mean: f64, cv: f64) -> f64 {
        let std_normal = Normal::new(0.0, 1.0).expect("valid normal");
        let z = match self {
            Noise::Normal => std_normal.sample(rng),
            Noise::LogNormal => {
                let s = (1.0 + cv * cv).ln().sqrt();
                let ln = LogNormal::new(-s * s / 2.0, s).expect("valid log-normal");
                return mean * ln.sample(rng);
            }
            // Var(t3) = 3, so divide by √3 for unit variance.
            Noise::HeavyTailed => StudentT::new(3.0).expect("valid t").sample(rng) / 3f64.sqrt(),
            Noise::Bimodal => {
                // Modes at -0.3·D and 0.7·D (mean 0) with within-mode σ 0.3;
                // D = √(0.91/0.21) makes the total variance 1.
                let d = (0.91f64 / 0.21).sqrt();
                let centre = if rng.gen_bool(0.7) { -0.3 * d } else { 0.7 * d };
                centre + 0.3 * std_normal.sample(rng)
            }
        };
        mean * (1.0 + cv * z)
    }
}

/// What one simulated A/B experiment ended with.
struct Trial {
    outcome: Outcome,
    runs_per_side: usize,
    zero_day_at_min: bool,
    zero_day_at_max: bool,
    fixed_at_min: Outcome,
}

/// `different` reached with at most this many runs per side counts for power.
const POWER_RUN_BUDGET: usize = 8;

/// Run kbot's adaptive procedure exactly as the server would: compare, ask
/// `runs_wanted`, add runs, until no more are wanted.
fn trial(rng: &mut StdRng, noise: Noise, cv: f64, shift: f64, cfg: &StatsConfig) -> Trial {
    let base: Vec<f64> = (0..cfg.max_runs)
        .map(|_| noise.draw(rng, 1000.0, cv))
        .collect();
    let head: Vec<f64> = (0..cfg.max_runs)
        .map(|_| noise.draw(rng, 1000.0 * (1.0 + shift), cv))
        .collect();
    let (mut nb, mut nh) = (cfg.min_runs, cfg.min_runs);
    let mut first = None;
    loop {
        let m = compare_metric(METRIC, &base[..nb], &head[..nh], cfg, 0);
        first.get_or_insert(m.kbot.outcome);
        let cmp = Comparison {
            base_runs: nb,
            head_runs: nh,
            metrics: vec![m],
        };
        let want = cmp.runs_wanted(cfg);
        if want.none() {
            let min = cfg.min_runs;
            return Trial {
                outcome: cmp.metrics[0].kbot.outcome,
                runs_per_side: nb.max(nh),
                zero_day_at_min: zeroday::verdict(METRIC, &base[..min], &head[..min], 5.0).changed,
                zero_day_at_max: zeroday::verdict(METRIC, &base, &head, 5.0).changed,
                fixed_at_min: first.unwrap_or(Outcome::Unknown),
            };
        }
        nb += want.base;
        nh += want.head;
    }
}

#[derive(Default)]
struct Tally {
    n: usize,
    different: usize,
    same: usize,
    unknown: usize,
    runs: usize,
    zd_min: usize,
    zd_max: usize,
    fixed_different: usize,
    different_within_budget: usize,
}

impl Tally {
    fn add(&mut self, t: &Trial) {
        self.n += 1;
        match t.outcome {
            Outcome::Different => self.different += 1,
            Outcome::Same => self.same += 1,
            Outcome::Unknown => self.unknown += 1,
        }
        self.runs += t.runs_per_side;
        self.zd_min += usize::from(t.zero_day_at_min);
        self.zd_max += usize::from(t.zero_day_at_max);
        self.fixed_different += usize::from(t.fixed_at_min == Outcome::Different);
        self.different_within_budget +=
            usize::from(t.outcome == Outcome::Different && t.runs_per_side <= POWER_RUN_BUDGET);
    }

    fn pct(&self, k: usize) -> String {
        format!("{:.2}%", 100.0 * k as f64 / self.n as f64)
    }

    fn mean_runs(&self) -> String {
        format!("{:.2}", self.runs as f64 / self.n as f64)
    }
}

fn run(trials: usize, seed: u64, noise: Noise, cv: f64, shift: f64, cfg: &StatsConfig) -> Tally {
    // One stream per cell, so cells are reproducible independently.
    let cell = seed ^ ((cv * 1e4) as u64) << 16 ^ ((shift * 1e4).abs() as u64) << 32 ^ noise as u64;
    let mut rng = StdRng::seed_from_u64(cell);
    let mut tally = Tally::default();
    for _ in 0..trials {
        tally.add(&trial(&mut rng, noise, cv, shift, cfg));
    }
    tally
}

fn args() -> (usize, u64, usize, usize) {
    let a: Vec<String> = std::env::args().collect();
    let get = |flag: &str, default: u64| {
        a.iter()
            .position(|x| x == flag)
            .and_then(|i| a.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let d = StatsConfig::default();
    (
        get("--trials", 10_000) as usize,
        get("--seed", 1),
        get("--min-runs", d.min_runs as u64) as usize,
        get("--batch", d.batch_runs as u64) as usize,
    )
}

fn main() {
    let (trials, seed, min_runs, batch_runs) = args();
    // The bootstrap CI does not enter the verdict; skipping it keeps the
    // 120,000-comparison run in minutes on a shared 2-core machine.
    let cfg = StatsConfig {
        bootstrap_resamples: 0,
        min_runs,
        batch_runs,
        ..StatsConfig::default()
    };
    println!("trials per cell: {trials}, seed: {seed}, metric: {METRIC}");
    println!(
        "kbot: alpha {} over {} looks ({:.4} per look), min_runs {}, batch {}, cap {}\n",
        cfg.alpha,
        cfg.looks(),
        cfg.look_alpha(),
        cfg.min_runs,
        cfg.batch_runs,
        cfg.max_runs
    );

    println!("### A/A (no change): false-positive rate\n");
    println!("| noise | CV | kbot `different` (adaptive) | kbot `same` | kbot `unknown` | mean runs/side | kbot first look ({} runs) | 0-day at {} runs | 0-day at {} runs |", cfg.min_runs, cfg.min_runs, cfg.max_runs);
    println!("|---|---|---|---|---|---|---|---|---|");
    for noise in Noise::ALL {
        for cv in [0.01, 0.02, 0.05] {
            let t = run(trials, seed, noise, cv, 0.0, &cfg);
            println!(
                "| {} | {:.0}% | {} | {} | {} | {} | {} | {} | {} |",
                noise.name(),
                cv * 100.0,
                t.pct(t.different),
                t.pct(t.same),
                t.pct(t.unknown),
                t.mean_runs(),
                t.pct(t.fixed_different),
                t.pct(t.zd_min),
                t.pct(t.zd_max)
            );
        }
    }

    println!("\n### Power: 5% drop at 2% CV\n");
    println!("| noise | cap/side | kbot `different` | of which within {POWER_RUN_BUDGET} runs/side | mean runs/side | kbot first look ({} runs) | 0-day at {} runs | 0-day at cap |", cfg.min_runs, cfg.min_runs);
    println!("|---|---|---|---|---|---|---|---|");
    for cap in [8, 10] {
        let capped = StatsConfig {
            max_runs: cap,
            ..cfg.clone()
        };
        for noise in Noise::ALL {
            let t = run(trials, seed, noise, 0.02, -0.05, &capped);
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                noise.name(),
                cap,
                t.pct(t.different),
                t.pct(t.different_within_budget),
                t.mean_runs(),
                t.pct(t.fixed_different),
                t.pct(t.zd_min),
                t.pct(t.zd_max)
            );
        }
    }

    changepoints(seed, trials / 20);
}

/// Change-point detection on histories of 200 points at 2% normal noise:
/// flat (any detection is false) and with a 5% step at point 120.
fn changepoints(seed: u64, series: usize) {
    let cfg = ChangePointConfig::default();
    let mut rng = StdRng::seed_from_u64(seed ^ 0xc0ffee);
    let (mut false_series, mut found, mut exact, mut within2) = (0usize, 0usize, 0usize, 0usize);
    let mut extra: BTreeMap<usize, usize> = BTreeMap::new();
    for _ in 0..series {
        let flat: Vec<f64> = (0..200)
            .map(|_| Noise::Normal.draw(&mut rng, 1000.0, 0.02))
            .collect();
        false_series += usize::from(!detect(&flat, &cfg).expect("finite").is_empty());
        let step: Vec<f64> = (0..200)
            .map(|i| Noise::Normal.draw(&mut rng, if i < 120 { 1000.0 } else { 950.0 }, 0.02))
            .collect();
        let cps = detect(&step, &cfg).expect("finite");
        if let Some(best) = cps.iter().min_by_key(|c| c.index.abs_diff(120)) {
            found += 1;
            exact += usize::from(best.index == 120);
            within2 += usize::from(best.index.abs_diff(120) <= 2);
        }
        *extra.entry(cps.len().saturating_sub(1)).or_default() += 1;
    }
    let pct = |k: usize| format!("{:.1}%", 100.0 * k as f64 / series as f64);
    println!("\n### Change points (E-divisive + t-test, p 0.001, window 50), 200-point histories, 2% normal noise\n");
    println!("| series | flat: series with any change point | 5% step: found | at the exact commit | within ±2 | extra points (0/1/2+) |");
    println!("|---|---|---|---|---|---|");
    let two_plus: usize = extra.range(2..).map(|(_, v)| v).sum();
    println!(
        "| {series} | {} | {} | {} | {} | {}/{}/{} |",
        pct(false_series),
        pct(found),
        pct(exact),
        pct(within2),
        extra.get(&0).copied().unwrap_or(0),
        extra.get(&1).copied().unwrap_or(0),
        two_plus
    );
}
