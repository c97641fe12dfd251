//! Calibration of the verdicts on simulated data, with fixed seeds.
//!
//! ```text
//! cargo run --release -p kbot-core --example calibrate -- [--trials 10000] [--seed 1]
//!     [--initial-runs 3] [--min-runs N] [--batch N] [--max-runs N]
//!     [--alpha A] [--rho R] [--margin M] [--same-alpha B] [--same-rho R]
//!     [--kpi-procedure holm|primary:W]
//! ```
//!
//! The optional flags override `StatsConfig` defaults (and the job's first
//! run count) to compare designs; the documented tables use none of them.
//!
//! Prints Markdown tables (the "Statistics" section of BENCHMARKS.md):
//! A/A false-positive rates and runs spent by kbot's adaptive procedure, and
//! 0-day's rule, per noise model and CV; power for a 5% shift at 2% CV; jobs
//! of 1, 3 and 10 KPIs under the job's one false-alarm budget; rounded
//! values and a rounded clock; change-point detection on simulated
//! histories.

use std::collections::BTreeMap;

use kbot_core::job::DEFAULT_RUNS;
use kbot_core::metrics::Impact;
use kbot_core::stats::changepoint::{detect, ChangePointConfig};
use kbot_core::stats::rng::SplitMix64;
use kbot_core::stats::{
    compare_metric, compare_metric_with, compare_runs, zeroday, Comparison, KpiProcedure,
    MetricComparison, Outcome, StatsConfig, Step,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Normal, StudentT};

/// A KPI with 0-day's 1% ratio floor and no absolute floor (a perf metric of
/// an upstream test, lkp-tests' `lib/perf_metrics.rb`), higher is better.
/// Only the floors a name selects enter the verdicts.
const METRIC: &str = "lmbench3.PIPE.bandwidth.MB/sec";
/// A KPI of an upstream test whose printing the metric table does not know
/// (will-it-scale's per-task figure, which its parser truncates to whole
/// numbers), for the integer-rounded values: lmbench's MB/sec is printed
/// at 0.01, so rounding it to integers would not be lmbench.
const ROUNDED_METRIC: &str = "will-it-scale.per_process_ops";

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

/// Runs per side a pair starts with on the server (`submissions::expand`'s
/// first batch), before the job's own `runs`.
const FIRST_BATCH: usize = 2;

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
/// (a tool that prints whole numbers: then named [`ROUNDED_METRIC`]).
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
    let metric = if round { ROUNDED_METRIC } else { METRIC };
    let start = initial.clamp(1, cfg.max_runs);
    let (mut nb, mut nh) = (start, start);
    loop {
        let m = compare_metric(metric, &base[..nb], &head[..nh], cfg, 0);
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
                zero_day_at_min: zeroday::verdict(metric, &base[..min], &head[..min], None).changed,
                zero_day_at_max: zeroday::verdict(metric, &base, &head, None).changed,
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
        kpi_procedure: kpi_procedure(&a).unwrap_or(d.kpi_procedure),
        ..d
    };
    Args {
        trials: int("--trials", 10_000),
        seed: get("--seed").map_or(1, |v| v as u64),
        initial: int("--initial-runs", DEFAULT_RUNS as usize),
        cfg,
    }
}

/// `--kpi-procedure holm` or `--kpi-procedure primary:W` (the primary's
/// share W of α).
fn kpi_procedure(a: &[String]) -> Option<KpiProcedure> {
    let i = a.iter().position(|x| x == "--kpi-procedure")?;
    let v = a.get(i + 1)?;
    if v == "holm" {
        return Some(KpiProcedure::Holm);
    }
    let share = v.strip_prefix("primary:")?.parse().ok()?;
    Some(KpiProcedure::PrimaryFirst {
        primary_share: share,
    })
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
         levels {}); KPIs: {:?}\n",
        cfg.alpha,
        cfg.spending_rho,
        levels.join(", "),
        100.0 * cfg.same_margin,
        cfg.same_alpha,
        cfg.same_spending_rho,
        betas.join(", "),
        cfg.kpi_procedure,
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
    if want("clock") {
        clock_table(&cell, &cfg);
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
    println!("\n### A/A on integer-rounded values (normal noise, `{ROUNDED_METRIC}`)\n");
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

/// What changes in a simulated job: nothing, the primary KPI, or one
/// secondary KPI alone.
#[derive(Clone, Copy)]
enum JobChange {
    None,
    Primary(f64),
    Secondary(f64),
}

impl JobChange {
    /// The shift of KPI `k`.
    fn shift(self, k: usize) -> f64 {
        match self {
            JobChange::Primary(s) if k == 0 => s,
            JobChange::Secondary(s) if k == 1 => s,
            _ => 0.0,
        }
    }

    fn changed(self, k: usize) -> bool {
        self.shift(k) != 0.0
    }

    fn label(self) -> String {
        match self {
            JobChange::None => "none".to_string(),
            JobChange::Primary(s) => format!("primary {:+.0}%", 100.0 * s),
            JobChange::Secondary(s) => format!("one secondary {:+.0}%", 100.0 * s),
        }
    }
}

/// What one simulated job ended with, under the job's procedure
/// (`Comparison::acting`) and under the rule before it (the primary at the
/// full α, the other KPIs beside a `different` primary, each at α).
#[derive(Default)]
struct JobTally {
    n: usize,
    /// The job acts on a regression of a KPI that did not change.
    false_regression: usize,
    /// The job acts on the changed KPI.
    found: usize,
    before_false: usize,
    before_found: usize,
    runs: usize,
}

/// Jobs of several KPIs (normal noise, 2% CV), through `compare_runs` and
/// the job-level rule (`Comparison::acting`). Correlated KPIs share a
/// common factor with correlation 0.5.
fn job_table(cell: &Cell, cfg: &StatsConfig) {
    use JobChange::*;
    println!("\n### Jobs of several KPIs at 2% CV: false regressions per job, and power\n");
    println!("| KPIs | correlation | what changed | cap | job acts on a regression of an unchanged KPI | job acts on the changed KPI | the rule before: false regression | the rule before: acts on the changed KPI | mean runs/side |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let rows: &[(usize, f64, JobChange, usize)] = &[
        (1, 0.0, None, cfg.max_runs),
        (3, 0.0, None, cfg.max_runs),
        (3, 0.5, None, cfg.max_runs),
        (10, 0.0, None, cfg.max_runs),
        (10, 0.5, None, cfg.max_runs),
        (1, 0.0, Primary(0.05), cfg.max_runs),
        (3, 0.0, Primary(0.05), cfg.max_runs),
        (10, 0.0, Primary(0.05), cfg.max_runs),
        (10, 0.5, Primary(0.05), cfg.max_runs),
        (1, 0.0, Primary(-0.05), 8),
        (3, 0.0, Primary(-0.05), 8),
        (10, 0.0, Primary(-0.05), 8),
        (10, 0.5, Primary(-0.05), 8),
        (3, 0.0, Secondary(0.10), 8),
        (10, 0.0, Secondary(0.10), 8),
        (10, 0.5, Secondary(0.10), 8),
    ];
    for &(kpis, rho, change, cap) in rows {
        let capped = StatsConfig {
            max_runs: cap,
            ..cfg.clone()
        };
        let salt = match change {
            None => 0.0,
            Primary(s) => s,
            Secondary(s) => 1.0 + s,
        };
        let seed = cell_seed(cell.seed, Noise::Normal, rho + kpis as f64, salt);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut t = JobTally::default();
        for _ in 0..cell.trials {
            job_trial(&mut rng, kpis, rho, change, &capped, cell.initial, &mut t);
        }
        let pct = |k: usize| format!("{:.2}%", 100.0 * k as f64 / t.n as f64);
        let found = |k: usize| match change {
            None => "-".to_string(),
            _ => pct(k),
        };
        println!(
            "| {kpis} | {rho} | {} | {cap} | {} | {} | {} | {} | {:.2} |",
            change.label(),
            pct(t.false_regression),
            found(t.found),
            pct(t.before_false),
            found(t.before_found),
            t.runs as f64 / t.n as f64
        );
    }
}

/// One job: `kpis` KPIs named `hackbench.kpiN.throughput` (the first is the
/// primary), `change` applied to the head. Adds what the job acted on to
/// `tally`.
fn job_trial(
    rng: &mut StdRng,
    kpis: usize,
    rho: f64,
    change: JobChange,
    cfg: &StatsConfig,
    initial: usize,
    tally: &mut JobTally,
) {
    let normal = Normal::new(0.0, 1.0).expect("valid normal");
    let names: Vec<String> = (0..kpis)
        .map(|k| format!("hackbench.kpi{k}.throughput"))
        .collect();
    let mut draw_run = |head: bool| -> BTreeMap<String, f64> {
        let common: f64 = normal.sample(rng);
        names
            .iter()
            .enumerate()
            .map(|(k, name)| {
                let own: f64 = normal.sample(rng);
                let z = rho.sqrt() * common + (1.0 - rho).sqrt() * own;
                let s = if head { change.shift(k) } else { 0.0 };
                (name.clone(), 1000.0 * (1.0 + s) * (1.0 + 0.02 * z))
            })
            .collect()
    };
    let base: Vec<_> = (0..cfg.max_runs).map(|_| draw_run(false)).collect();
    let head: Vec<_> = (0..cfg.max_runs).map(|_| draw_run(true)).collect();
    let start = initial.clamp(1, cfg.max_runs);
    let (mut nb, mut nh) = (start, start);
    loop {
        let c = compare_runs(&base[..nb], &head[..nh], cfg).expect("finite");
        let want = c.runs_wanted(cfg);
        if want.none() {
            let index = |m: &MetricComparison| names.iter().position(|n| *n == m.metric);
            let changed = |m: &MetricComparison| index(m).is_some_and(|k| change.changed(k));
            let false_regression = |m: &MetricComparison| {
                m.kbot.outcome == Outcome::Different
                    && m.impact == Impact::Regression
                    && !changed(m)
            };
            let found = |m: &MetricComparison| m.kbot.outcome == Outcome::Different && changed(m);
            tally.n += 1;
            tally.false_regression += usize::from(c.acting().any(false_regression));
            tally.found += usize::from(c.acting().any(found));
            let before: Vec<&MetricComparison> = acting_before(&c).collect();
            tally.before_false += usize::from(before.iter().any(|m| false_regression(m)));
            tally.before_found += usize::from(before.iter().any(|m| found(m)));
            tally.runs += nb.max(nh);
            return;
        }
        nb += want.base;
        nh += want.head;
    }
}

/// The rule before the KPI family, on the same verdicts: the primary
/// `different` at the full α, and every other KPI `different` at α when
/// the primary is.
fn acting_before(c: &Comparison) -> impl Iterator<Item = &MetricComparison> {
    let open = c
        .primary()
        .is_some_and(|p| p.kbot.outcome == Outcome::Different);
    c.metrics
        .iter()
        .filter(move |m| m.kbot.outcome == Outcome::Different && (m.primary || (open && m.kpi)))
}

/// hackbench's throughput, `kb / Time:` with `Time:` printed in
/// milliseconds, in unchanged pairs of 0.1 s and 1 s iterations (normal
/// noise on the time): identical runs of a side happen by rounding, and
/// only the clock's step tells them from an exact clock. The rule before
/// judged the throughput's own decimal tail (`Step::Inferred`). Pairs start
/// as the server starts them, with [`FIRST_BATCH`] runs a side: that is
/// where identical runs decide at once.
fn clock_table(cell: &Cell, cfg: &StatsConfig) {
    println!("\n### A/A on a rounded clock: hackbench throughput from a time printed in ms\n");
    println!("| iteration | CV of the time | kbot `different` | kbot `same` | kbot `unknown` | mean runs/side | the rule before: `different` |");
    println!("|---|---|---|---|---|---|---|");
    for (secs, cv) in [(0.1, 0.002), (0.1, 0.005), (0.1, 0.01), (1.0, 0.001)] {
        let mut rng = StdRng::seed_from_u64(cell_seed(cell.seed, Noise::Normal, cv, secs + 7.0));
        let (mut now, mut before) = (Tally::default(), Tally::default());
        for _ in 0..cell.trials {
            let draw = |rng: &mut StdRng| -> f64 {
                let t = Noise::Normal.draw(rng, secs, cv);
                (t * 1000.0).round().max(1.0) / 1000.0
            };
            let base: Vec<f64> = (0..cfg.max_runs).map(|_| draw(&mut rng)).collect();
            let head: Vec<f64> = (0..cfg.max_runs).map(|_| draw(&mut rng)).collect();
            now.add(&clock_trial(&base, &head, cfg, FIRST_BATCH, true));
            before.add(&clock_trial(&base, &head, cfg, FIRST_BATCH, false));
        }
        println!(
            "| {secs} s | {:.1}% | {} | {} |",
            cv * 100.0,
            now.outcome_cells(),
            before.pct(before.different)
        );
    }
}

/// One pair of hackbench runs with these times: the server's loop on
/// `compare_runs` (the throughput and the time, as the parser writes them)
/// when `now`, else the throughput alone with the step of its own values.
fn clock_trial(base: &[f64], head: &[f64], cfg: &StatsConfig, initial: usize, now: bool) -> Trial {
    const KB: f64 = 3906.0;
    const THROUGHPUT: &str = "hackbench.throughput";
    let run = |t: f64| -> BTreeMap<String, f64> {
        BTreeMap::from([
            (THROUGHPUT.to_string(), KB / t),
            ("hackbench.time_sec".to_string(), t),
        ])
    };
    let start = initial.clamp(1, cfg.max_runs);
    let (mut nb, mut nh) = (start, start);
    loop {
        let c = if now {
            let b: Vec<_> = base[..nb].iter().map(|&t| run(t)).collect();
            let h: Vec<_> = head[..nh].iter().map(|&t| run(t)).collect();
            compare_runs(&b, &h, cfg).expect("finite")
        } else {
            let tp = |v: &[f64]| -> Vec<f64> { v.iter().map(|t| KB / t).collect() };
            let m = compare_metric_with(
                THROUGHPUT,
                &tp(&base[..nb]),
                &tp(&head[..nh]),
                Step::Inferred,
                cfg,
                0,
            );
            Comparison {
                base_runs: nb,
                head_runs: nh,
                metrics: vec![m],
                one_sided: Vec::new(),
            }
        };
        let want = c.runs_wanted(cfg);
        if want.none() {
            let m = c
                .metrics
                .iter()
                .find(|m| m.metric == THROUGHPUT)
                .expect("the throughput is compared");
            return Trial {
                outcome: m.kbot.outcome,
                runs_per_side: nb.max(nh),
                zero_day_at_min: false,
                zero_day_at_max: false,
            };
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
