//! `GET /submissions/{id}/compare`: the comparison of a submission's pairs,
//! one card per metric: the plot of every base and head run with medians,
//! spread and the bootstrap CI of the median ratio, and kbot's verdict with
//! its p-values, effect size and the reason. Filtered by job, metric and
//! verdict from the URL, paged.

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::{Path, Query, State};
use serde::Deserialize;

use super::verdicts::{fmt_p, StoredComparison};
use super::views::SubmissionSummary;
use crate::comparisons::kpi_result::kpi_results;
use crate::comparisons::{finished_runs, stats_config};
use crate::db::Db;
use crate::error::{Error, Result};
use crate::jobs::job_label;
use crate::state::AppState;
use crate::submissions;
use crate::web::paging::{filter, link, Pager, Paging};
use crate::web::plots::samples::{self, SamplesPlot};
use crate::web::{render, PageResult};
use kbot_api::submissions::{ComparisonView, MeasuredBy, Verdict};

/// Metric cards per page: each carries a plot.
const PER_PAGE: u32 = 12;

#[derive(Debug, Default, Deserialize)]
pub struct CompareQuery {
    /// The atomic job's position in the submission.
    pub job: Option<String>,
    /// A substring of the metric name.
    pub metric: Option<String>,
    /// `different`, `same` or `unknown`.
    pub verdict: Option<String>,
    pub page: Option<u32>,
}

#[derive(Template)]
#[template(path = "compare.html")]
struct ComparePage {
    s: SubmissionSummary,
    jobs: Vec<(i64, String)>,
    counts: Vec<(String, usize, String)>,
    job: String,
    metric: String,
    verdict: String,
    total: usize,
    cards: Vec<MetricCard>,
    pager: Pager,
}

/// One metric of one atomic job.
struct MetricCard {
    anchor: String,
    job: String,
    metric: String,
    verdict: String,
    impact: String,
    change: String,
    reason: String,
    /// (test, p) rows, the deciding level first.
    p_values: Vec<(&'static str, String)>,
    effect: Vec<(&'static str, String)>,
    zero_day: String,
    /// Runs plotted against runs the stored verdict saw, when they differ.
    runs_note: Option<String>,
    boot_note: Option<String>,
    /// The mode the runs were measured in, and what it cannot see.
    measured_by: Option<MeasuredBy>,
    /// A `same` in a mode that cannot see contention between CPUs: below
    /// its sight, not "no change" for a change that costs only so.
    blind_same: bool,
    plot: String,
}

/// An atomic job of the submission: id, position, label.
struct JobRef {
    id: i64,
    position: i64,
    label: String,
}

pub async fn page(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    Query(q): Query<CompareQuery>,
) -> PageResult {
    let view = submissions::view(&state.db, id).await?;
    let jobs = atomic_jobs(&state.db, id).await?;
    let all = submissions::comparisons(&state.db, id).await?;
    let kpis = kpi_results(&state.db, &[id]).await?;
    let job_filter = filter(&q.job).and_then(|j| j.parse::<u32>().ok());
    let metric_filter = filter(&q.metric);
    let verdict_filter = filter(&q.verdict);
    let mut chosen: Vec<&ComparisonView> = all
        .iter()
        .filter(|c| job_filter.is_none_or(|j| c.job_index == j))
        .filter(|c| metric_filter.is_none_or(|m| c.metric.contains(m)))
        .filter(|c| verdict_filter.is_none_or(|v| c.verdict.as_str() == v))
        .collect();
    // The KPIs first, then what changed, biggest first; the rest by name.
    chosen.sort_by(|x, y| {
        let key = |c: &ComparisonView| {
            let rank = kbot_core::metrics::report_rank(&c.metric);
            (c.job_index, rank.min(1), c.verdict != Verdict::Different)
        };
        let size = |c: &ComparisonView| {
            c.change_percent
                .filter(|v| v.is_finite())
                .map_or(0.0, f64::abs)
        };
        key(x)
            .cmp(&key(y))
            .then(size(y).total_cmp(&size(x)))
            .then(x.metric.cmp(&y.metric))
    });
    let paging = Paging::new(q.page, PER_PAGE);
    let shown = paging.slice(&chosen);
    let cards = cards(&state.db, &jobs, shown, view.max_runs).await?;
    let filters = [
        ("job", q.job.clone().unwrap_or_default()),
        ("metric", q.metric.clone().unwrap_or_default()),
        ("verdict", q.verdict.clone().unwrap_or_default()),
    ];
    let path = format!("/submissions/{id}/compare");
    let has_next = paging.offset() + i64::from(PER_PAGE) < chosen.len() as i64;
    render(&ComparePage {
        s: SubmissionSummary::new(&view, kpis.get(&id)),
        jobs: jobs.iter().map(|j| (j.position, j.label.clone())).collect(),
        counts: verdict_counts(&all, &path, &filters),
        job: q.job.clone().unwrap_or_default(),
        metric: q.metric.clone().unwrap_or_default(),
        verdict: q.verdict.clone().unwrap_or_default(),
        total: chosen.len(),
        pager: Pager::new(&path, &filters, paging, has_next),
        cards,
    })
}

/// (verdict, how many, link to the list filtered by it).
fn verdict_counts(
    all: &[ComparisonView],
    path: &str,
    filters: &[(&str, String)],
) -> Vec<(String, usize, String)> {
    ["different", "unknown", "same"]
        .iter()
        .map(|v| {
            let mut params: Vec<(&str, String)> = filters
                .iter()
                .filter(|(k, _)| *k != "verdict")
                .cloned()
                .collect();
            params.push(("verdict", (*v).to_owned()));
            let n = all.iter().filter(|c| c.verdict.as_str() == *v).count();
            ((*v).to_owned(), n, link(path, &params))
        })
        .collect()
}

async fn atomic_jobs(db: &Db, submission_id: i64) -> Result<Vec<JobRef>> {
    let rows: Vec<(i64, i64, String)> = sqlx::query_as(
        "SELECT id, position, spec FROM atomic_jobs WHERE submission_id = $1 ORDER BY position",
    )
    .bind(submission_id)
    .fetch_all(db.read())
    .await?;
    rows.into_iter()
        .map(|(id, position, spec)| {
            let job = crate::jobs::parse_spec(id, &spec)?;
            Ok(JobRef {
                id,
                position,
                label: job_label(Some(&job)),
            })
        })
        .collect::<Result<Vec<_>, Error>>()
}

/// Per side, one value per finished run that has the metric.
type Samples = (Vec<f64>, Vec<f64>);

/// The cards of `shown`, loading each atomic job's runs once.
async fn cards(
    db: &Db,
    jobs: &[JobRef],
    shown: &[&ComparisonView],
    runs_cap: u32,
) -> Result<Vec<MetricCard>> {
    let mut runs = BTreeMap::new();
    let mut out = Vec::with_capacity(shown.len());
    for (i, c) in shown.iter().enumerate() {
        let Some(job) = jobs.iter().find(|j| j.position == i64::from(c.job_index)) else {
            continue;
        };
        if let std::collections::btree_map::Entry::Vacant(e) = runs.entry(job.id) {
            e.insert(finished_runs(db, job.id).await?);
        }
        let side = |maps: &[BTreeMap<String, f64>]| -> Vec<f64> {
            maps.iter()
                .filter_map(|m| m.get(&c.metric).copied())
                .collect()
        };
        let samples: Samples = runs
            .get(&job.id)
            .map(|r| (side(&r.base), side(&r.head)))
            .unwrap_or_default();
        out.push(card(i, &job.label, c, &samples, runs_cap));
    }
    Ok(out)
}

fn card(i: usize, job: &str, c: &ComparisonView, samples: &Samples, runs_cap: u32) -> MetricCard {
    let stored = StoredComparison::from_json(&c.detail);
    let v = &stored.kbot;
    let cfg = stats_config(runs_cap);
    let anchor = format!("m{i}");
    let unit = kbot_core::metrics::unit(&c.metric);
    let plot = samples::render(&SamplesPlot {
        id: &format!("plot-{anchor}"),
        metric: &c.metric,
        unit,
        base: &samples.0,
        head: &samples.1,
        ratio: v.median_ratio.or(Some(f64::NAN)),
        ratio_ci: v.ratio_ci(),
        ci_level: cfg.ci_level,
    });
    let plotted = (samples.0.len() as u32, samples.1.len() as u32);
    MetricCard {
        job: job.to_owned(),
        metric: c.metric.clone(),
        verdict: c.verdict.to_string(),
        impact: stored.impact.clone().unwrap_or_default(),
        change: change_text(c, stored.change_is_absolute, unit, v.estimator_name()),
        reason: stored.reason(cfg.min_runs, c.base_runs.min(c.head_runs) as usize),
        p_values: vec![
            ("deciding p", fmt_p(v.p_value)),
            ("α at this look", fmt_p(v.alpha)),
            ("Welch t (logs)", fmt_p(v.p_welch)),
            ("Mann-Whitney U", fmt_p(v.p_mann_whitney)),
            ("Kolmogorov-Smirnov", fmt_p(v.p_kolmogorov_smirnov)),
        ],
        effect: effect_rows(&stored, cfg.ci_level),
        zero_day: zero_day_text(&stored),
        runs_note: (plotted != (c.base_runs, c.head_runs)).then(|| {
            format!(
                "The plot shows {}/{} runs; the verdict was drawn on {}/{}.",
                plotted.0, plotted.1, c.base_runs, c.head_runs
            )
        }),
        boot_note: c.boot_note.clone(),
        blind_same: c.blind_same(),
        measured_by: c.measured_by.clone(),
        plot,
        anchor,
    }
}

fn change_text(c: &ComparisonView, absolute: bool, unit: Option<&str>, by: &str) -> String {
    match c.change_percent {
        Some(x) if absolute => match unit {
            Some(unit) => format!("{x:+.2} {unit} ({by})"),
            None => format!("{x:+.2} ({by})"),
        },
        Some(x) => format!("{x:+.1}% ({by})"),
        None => String::from("undefined (base mean 0)"),
    }
}

fn effect_rows(stored: &StoredComparison, level: f64) -> Vec<(&'static str, String)> {
    let v = &stored.kbot;
    let ratio = v
        .median_ratio
        .map_or_else(|| String::from("undefined"), |r| format!("{r:.3}"));
    let ci = v.ratio_ci().map_or_else(
        || String::from("–"),
        |(a, b)| format!("{a:.3}–{b:.3} ({:.0}% bootstrap)", level * 100.0),
    );
    let bimodal = match (v.base_bimodal, v.head_bimodal) {
        (false, false) => "neither side",
        (true, false) => "base",
        (false, true) => "head",
        (true, true) => "both sides",
    };
    vec![
        ("median ratio head/base", ratio),
        ("ratio CI", ci),
        (
            "Cliff's δ",
            v.cliffs_delta
                .map_or_else(|| "–".into(), |d| format!("{d:+.2}")),
        ),
        ("bimodal", bimodal.to_owned()),
    ]
}

fn zero_day_text(stored: &StoredComparison) -> String {
    let call = if stored.zero_day.changed {
        "changed"
    } else {
        "not changed"
    };
    let reason = stored.zero_day.reason.replace('_', " ");
    if reason.is_empty() {
        call.to_owned()
    } else {
        format!("{call} ({reason})")
    }
}
