//! Calibration of the verdicts on simulated data, with fixed seeds.
//!
//! ```text
//! cargo run --release -p kbot-core --example calibrate -- [--trials 10000] [--seed 1]
//!     [--initial-runs 3] [--min-runs N] [--batch N] [--max-runs N]
//!     [--alpha A] [--rho R] [--margin M] [--same-alpha B] [--same-rho R]
//! ```
//!
//! The optional flags override `StatsConfig` defaults (and the job's first
//! run count) to compare designs; the documented tables use none of them.
//!
//! Prints Markdown tables (the "Statistics" section of BENCHMARKS.md):
//! A/A false-positive rates and runs spent by kbot's adaptive procedure, and
//! 0-day's rule, per noise model and CV; power for a 5% shift at 2% CV; change-point
//! detection on simulated histories.

use std::collections::BTreeMap;

use kbot_core::job::DEFAULT_RUNS;
use kbot_core::metrics::Impact;
use kbot_core::stats::changepoint::{detect, ChangePointConfig};
use kbot_core::stats::rng::SplitMix64;
use kbot_core::stats::{
    compare_metric, compare_runs, zeroday, Comparison, MetricComparison, Outcome, StatsConfig,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Normal, StudentT};

/// A KPI with 0-day's 1% ratio floor and no absolute floor (a perf metric of
/// an upstream test, lkp-tests' `lib/perf_metrics.rb`), higher is better.
/// Only the floors a name selects enter the verdicts.
const METRIC: &str = "lmbench3.PIPE.bandwidth.MB/sec";

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
}

/// `different` reached with at most this many runs per side counts for power.
const POWER_RUN_BUDGET: usize = 8;
/// The first 0-day column applies 0-day's rule to the job's first runs, at
/// least this many (0-day's own minimum).
const ZERO_DAY_MIN_RUNS: usize = 3;

/// Run kbot's adaptive procedure exactly as the server would: the job's
/// `initial` runs per side, compare, ask `runs_wanted`, add runs, until no
/// more are wanted.
fn trial(
    rng: &mut StdRng,
    noise: Noise,
    cv: f64,
    shift: f64,
    cfg: &StatsConfig,
    initial: usize,
) -> Trial {
    trial_at(rng, noise, cv, shift, cfg, initial, 1000.0, false)
}

/// [`trial`] around `mean`, the values rounded to integers when `round`
/// (a tool that prints whole numbers).
#[allow(clippy::too_many_arguments)]
fn trial_at(
    rng: &mut StdRng,
    noise: Noise,
    cv: f64,
    shift: f64,
    cfg: &StatsConfig,
    initial: usize,
    mean: f64,
    round: bool,
) -> Trial {
    let mut draw = |m: f64| {
        let v = noise.draw(rng, m, cv);
        if round {
            v.round()
        } else {
            v
        }
    };
    let base: Vec<f64> = (0..cfg.max_runs).map(|_| draw(mean)).collect();
    let head: Vec<f64> = (0..cfg.max_runs)
        .map(|_| draw(mean * (1.0 + shift)))
        .collect();
    let start = initial.clamp(1, cfg.max_runs);
    let (mut nb, mut nh) = (start, start);
    loop {
        let m = compare_metric(METRIC, &base[..nb], &head[..nh], cfg, 0);
        let cmp = Comparison {
            base_runs: nb,
            head_runs: nh,
            metrics: vec![m],
            one_sided: Vec::new(),
        };
        let want = cmp.runs_wanted(cfg);
        if want.none() {
            let min = start.max(ZERO_DAY_MIN_RUNS);
            return Trial {
                outcome: cmp.metrics[0].kbot.outcome,
                runs_per_side: nb.max(nh),
                zero_day_at_min: zeroday::verdict(METRIC, &base[..min], &head[..min], None).changed,
                zero_day_at_max: zeroday::verdict(METRIC, &base, &head, None).changed,
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
    different_within_budget: usize,
    same_within_6: usize,
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
        self.same_within_6 += usize::from(t.outcome == Outcome::Same && t.runs_per_side <= 6);
        self.different_within_budget +=
            usize::from(t.outcome == Outcome::Different && t.runs_per_side <= POWER_RUN_BUDGET);
    }

    fn pct(&self, k: usize) -> String {
        format!("{:.2}%", 100.0 * k as f64 / self.n as f64)
    }

    /// `different | same | unknown | mean runs` as table cells.
    fn outcome_cells(&self) -> String {
        format!(
            "{} | {} | {} | {}",
            self.pct(self.different),
            self.pct(self.same),
            self.pct(self.unknown),
            self.mean_runs()
        )
    }

    fn mean_runs(&self) -> String {
        format!("{:.2}", self.runs as f64 / self.n as f64)
    }
}

/// One stream per cell, independent across `--seed` values and cells: the
/// cell's coordinates and the seed are mixed by SplitMix64's finaliser, so
/// no two (seed, cell) pairs share a stream (XOR-ing small fields into the
/// seed, as before, made seeds 0-3 permutations of one another's cells).
fn cell_seed(seed: u64, noise: Noise, cv: f64, shift: f64) -> u64 {
    let parts = [
        seed,
        noise as u64,
        (cv * 1e6).round() as u64,
        (shift * 1e6).round() as i64 as u64,
    ];
    parts.iter().fold(0x6b62_6f74_u64, |h, &p| {
        SplitMix64::new(h ^ SplitMix64::new(p).next_u64()).next_u64()
    })
}

struct Cell {
    trials: usize,
    seed: u64,
    initial: usize,
}

fn run(cell: &Cell, noise: Noise, cv: f64, shift: f64, cfg: &StatsConfig) -> Tally {
    let mut rng = StdRng::seed_from_u64(cell_seed(cell.seed, noise, cv, shift));
    let mut tally = Tally::default();
    for _ in 0..cell.trials {
        tally.add(&trial(&mut rng, noise, cv, shift, cfg, cell.initial));
    }
    tally
}

struct Args {
    trials: usize,
    seed: u64,
    initial: usize,
    cfg: StatsConfig,
}

fn args() -> Args {
    let a: Vec<String> = std::env::args().collect();
    let get = |flag: &str| -> Option<f64> {
        a.iter()
            .position(|x| x == flag)
            .and_then(|i| a.get(i + 1))
            .and_then(|v| v.parse().ok())
    };
    let d = StatsConfig::default();
    let int = |flag: &str, default: usize| get(flag).map_or(default, |v| v as usize);
    // The bootstrap CI does not enter the verdict; skipping it keeps the
    // run in minutes on a shared 2-core machine.
    let cfg = StatsConfig {
        bootstrap_resamples: 0,
        min_runs: int("--min-runs", d.min_runs),
        batch_runs: int("--batch", d.batch_runs),
        max_runs: int("--max-runs", d.max_runs),
        alpha: get("--alpha").unwrap_or(d.alpha),
        spending_rho: get("--rho").unwrap_or(d.spending_rho),
        same_margin: get("--margin").unwrap_or(d.same_margin),
        same_alpha: get("--same-alpha").unwrap_or(d.same_alpha),
        same_spending_rho: get("--same-rho").unwrap_or(d.same_spending_rho),
        ..d
    };
    Args {
        trials: int("--trials", 10_000),
        seed: get("--seed").map_or(1, |v| v as u64),
        initial: int("--initial-runs", DEFAULT_RUNS as usize),
        cfg,
    }
}

fn main() {
    let Args {
        trials,
        seed,
        initial,
        cfg,
    } = args();
    if let Err(e) = cfg.validate() {
        eprintln!("calibrate: {e}");
        std::process::exit(2);
    }
    let cell = Cell {
        trials,
        seed,
        initial,
    };
    println!("trials per cell: {trials}, seed: {seed}, metric: {METRIC}");
    let levels: Vec<String> = cfg
        .look_schedule()
        .iter()
        .map(|&n| format!("{n}: {:.4}", cfg.look_alpha(n)))
        .collect();
    let betas: Vec<String> = cfg
        .look_schedule()
        .iter()
        .map(|&n| format!("{n}: {:.4}", cfg.look_same_beta(n)))
        .collect();
    println!(
        "kbot: alpha {} spent as alpha·t^{} over looks at {} runs/side; job's runs {initial}; \
         same: margin {:.1}% (or the metric's floor), TOST at {} spent as β·t^{} (one-sided \
         levels {})\n",
        cfg.alpha,
        cfg.spending_rho,
        levels.join(", "),
        100.0 * cfg.same_margin,
        cfg.same_alpha,
        cfg.same_spending_rho,
        betas.join(", "),
    );
    let only = |name: &str| std::env::args().any(|a| a == format!("--only-{name}"));
    let any_only = std::env::args().any(|a| a.starts_with("--only-"));
    let want = |name: &str| !any_only || only(name);
    if want("aa") {
        aa_table(&cell, &cfg);
    }
    if want("power") {
        power_table(&cell, &cfg);
    }
    if want("same") {
        same_table(&cell, &cfg);
    }
    if want("jobs") {
        job_table(&cell, &cfg);
    }
    if want("rounded") {
        rounded_table(&cell, &cfg);
    }
    if want("changepoints") {
        changepoints(seed, trials / 20);
    }
}

fn aa_table(cell: &Cell, cfg: &StatsConfig) {
    let zd_min = cell.initial.max(ZERO_DAY_MIN_RUNS);
    println!("### A/A (no change): false alarms and runs spent\n");
    println!("| noise | CV | kbot `different` | kbot `same` | kbot `unknown` | mean runs/side | `same` within 6 runs | 0-day at {zd_min} runs | 0-day at {} runs |", cfg.max_runs);
    println!("|---|---|---|---|---|---|---|---|---|");
    for noise in Noise::ALL {
        for cv in [0.01, 0.02, 0.05, 0.10] {
            let t = run(cell, noise, cv, 0.0, cfg);
            println!(
                "| {} | {:.0}% | {} | {} | {} | {} |",
                noise.name(),
                cv * 100.0,
                t.outcome_cells(),
                t.pct(t.same_within_6),
                t.pct(t.zd_min),
                t.pct(t.zd_max)
            );
        }
    }
}

fn power_table(cell: &Cell, cfg: &StatsConfig) {
    let zd_min = cell.initial.max(ZERO_DAY_MIN_RUNS);
    println!("\n### Power: 5% drop at 2% CV\n");
    println!("| noise | cap/side | kbot `different` | of which within {POWER_RUN_BUDGET} runs/side | kbot `same` (wrong) | mean runs/side | 0-day at {zd_min} runs | 0-day at cap |");
    println!("|---|---|---|---|---|---|---|---|");
    for cap in [8, 10] {
        let capped = StatsConfig {
            max_runs: cap,
            ..cfg.clone()
        };
        for noise in Noise::ALL {
            let t = run(cell, noise, 0.02, -0.05, &capped);
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                noise.name(),
                cap,
                t.pct(t.different),
                t.pct(t.different_within_budget),
                t.pct(t.same),
                t.mean_runs(),
                t.pct(t.zd_min),
                t.pct(t.zd_max)
            );
        }
    }
}

/// How often a real change ends `same`, by size, at 2% CV: `same` must
/// rule out changes beyond its margin (3%), so a true 3% change may end
/// `same` in at most `same_alpha` of pairs.
fn same_table(cell: &Cell, cfg: &StatsConfig) {
    println!(
        "\n### Real changes at 2% CV: how they end (default cap {})\n",
        cfg.max_runs
    );
    println!(
        "| noise | change | kbot `different` | kbot `same` | kbot `unknown` | mean runs/side |"
    );
    println!("|---|---|---|---|---|---|");
    for noise in Noise::ALL {
        for shift in [-0.02, -0.03, -0.05] {
            let t = run(cell, noise, 0.02, shift, cfg);
            println!(
                "| {} | {:.0}% | {} |",
                noise.name(),
                shift * 100.0,
                t.outcome_cells()
            );
        }
    }
}

/// Integer-rounded values (a tool that prints whole numbers) of unchanged
/// pairs: runs of one side can agree by chance, which the exact-clock rule
/// must not take for an exact clock.
fn rounded_table(cell: &Cell, cfg: &StatsConfig) {
    println!("\n### A/A on integer-rounded values (normal noise)\n");
    println!("| mean | CV | kbot `different` | kbot `same` | kbot `unknown` | mean runs/side |");
    println!("|---|---|---|---|---|---|");
    for (mean, cv) in [(20.0, 0.02), (50.0, 0.01), (50.0, 0.02), (200.0, 0.005)] {
        let mut rng = StdRng::seed_from_u64(cell_seed(cell.seed, Noise::Normal, cv, mean));
        let mut t = Tally::default();
        for _ in 0..cell.trials {
            t.add(&trial_at(
                &mut rng,
                Noise::Normal,
                cv,
                0.0,
                cfg,
                cell.initial,
                mean,
                true,
            ));
        }
        println!("| {mean} | {:.1}% | {} |", cv * 100.0, t.outcome_cells());
    }
}

/// Jobs of several KPIs (normal noise, 2% CV), through `compare_runs` and
/// the job-level rule (`Comparison::acting`), against the per-metric rule
/// (any KPI `different` in the bad direction acts). Correlated KPIs share
/// a common factor with correlation 0.5.
fn job_table(cell: &Cell, cfg: &StatsConfig) {
    println!("\n### Jobs of several KPIs at 2% CV: false regressions per job, and power\n");
    println!("| KPIs | correlation | change of the primary | job acts: regression | per-metric rule: some KPI regression | mean runs/side |");
    println!("|---|---|---|---|---|---|");
    for (kpis, rho, shift, cap) in [
        (1, 0.0, 0.0, cfg.max_runs),
        (3, 0.0, 0.0, cfg.max_runs),
        (3, 0.5, 0.0, cfg.max_runs),
        (10, 0.0, 0.0, cfg.max_runs),
        (10, 0.5, 0.0, cfg.max_runs),
        (3, 0.0, -0.05, 8),
        (10, 0.5, -0.05, 8),
    ] {
        let capped = StatsConfig {
            max_runs: cap,
            ..cfg.clone()
        };
        let seed = cell_seed(cell.seed, Noise::Normal, rho + kpis as f64, shift);
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut acts, mut any, mut runs) = (0usize, 0usize, 0usize);
        for _ in 0..cell.trials {
            let (a, b, n) = job_trial(&mut rng, kpis, rho, shift, &capped, cell.initial);
            acts += usize::from(a);
            any += usize::from(b);
            runs += n;
        }
        let pct = |k: usize| format!("{:.2}%", 100.0 * k as f64 / cell.trials as f64);
        let cap_note = if cap == cfg.max_runs {
            String::new()
        } else {
            format!(" (cap {cap})")
        };
        println!(
            "| {kpis} | {rho} | {:.0}%{cap_note} | {} | {} | {:.2} |",
            shift * 100.0,
            pct(acts),
            pct(any),
            runs as f64 / cell.trials as f64
        );
    }
}

/// One job: `kpis` KPIs named `hackbench.kpiN.throughput` (the first is the
/// primary), the primary shifted by `shift`. Returns whether the job-level
/// rule acts on a regression, whether the per-metric rule would, and the
/// runs per side spent.
fn job_trial(
    rng: &mut StdRng,
    kpis: usize,
    rho: f64,
    shift: f64,
    cfg: &StatsConfig,
    initial: usize,
) -> (bool, bool, usize) {
    let normal = Normal::new(0.0, 1.0).expect("valid normal");
    let names: Vec<String> = (0..kpis)
        .map(|k| format!("hackbench.kpi{k}.throughput"))
        .collect();
    let mut draw_run = |shift: f64| -> BTreeMap<String, f64> {
        let common: f64 = normal.sample(rng);
        names
            .iter()
            .enumerate()
            .map(|(k, name)| {
                let own: f64 = normal.sample(rng);
                let z = rho.sqrt() * common + (1.0 - rho).sqrt() * own;
                let s = if k == 0 { shift } else { 0.0 };
                (name.clone(), 1000.0 * (1.0 + s) * (1.0 + 0.02 * z))
            })
            .collect()
    };
    let base: Vec<_> = (0..cfg.max_runs).map(|_| draw_run(0.0)).collect();
    let head: Vec<_> = (0..cfg.max_runs).map(|_| draw_run(shift)).collect();
    let start = initial.clamp(1, cfg.max_runs);
    let (mut nb, mut nh) = (start, start);
    loop {
        let c = compare_runs(&base[..nb], &head[..nh], cfg).expect("finite");
        let want = c.runs_wanted(cfg);
        if want.none() {
            let regressed = |m: &&MetricComparison| {
                m.kbot.outcome == Outcome::Different && m.impact == Impact::Regression
            };
            let acts = c.acting().any(|m| regressed(&m));
            let any = c.metrics.iter().filter(|m| m.kpi).any(|m| regressed(&m));
            return (acts, any, nb.max(nh));
        }
        nb += want.base;
        nh += want.head;
    }
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
