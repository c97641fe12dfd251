//! `GET /trends`: one metric over the commits of a branch the robot
//! measures (a watched branch, or the base of a list's series) on one
//! tbox group. x is the commits in the order the robot tested them, y each
//! commit's runs with their median and range; change points from
//! `kbot_core::stats::changepoint` are marked, and commits with a
//! regression report or bisection link to it.
//!
//! Everything is chosen in the URL: `repo`, `branch`, `group`, `job`,
//! `metric`, and the zoom `from`/`to` (sha prefixes of the first and last
//! commit shown; the newest `DEFAULT_WINDOW` by default).

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use kbot_core::stats::changepoint::{self, ChangePointConfig};
use kbot_core::stats::describe::median_sorted;
use serde::Deserialize;

use super::trends_data::{self as data, TrendCommit};
use crate::access::Reader;
use crate::state::AppState;
use crate::web::paging::{filter, link};
use crate::web::plots::axis::label;
use crate::web::plots::trend::{self, TrendPlot, TrendPoint, TrendStep};
use crate::web::{render, short_sha, PageResult, SHORT_SHA};

/// Commits shown when the URL names no range.
const DEFAULT_WINDOW: usize = 60;
/// Most commits one view loads and draws.
const MAX_WINDOW: usize = 300;

#[derive(Debug, Default, Deserialize)]
pub struct TrendQuery {
    pub repo: Option<String>,
    pub branch: Option<String>,
    pub group: Option<String>,
    pub job: Option<String>,
    pub metric: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
}

#[derive(Template)]
#[template(path = "trends.html")]
struct TrendsPage {
    repos: Vec<String>,
    repo: String,
    branches: Vec<String>,
    branch: String,
    groups: Vec<String>,
    group: String,
    jobs: Vec<String>,
    job: String,
    metrics: Vec<String>,
    metric: String,
    /// Commits of the branch in all, and the shown window's first/last index (1-based).
    total: usize,
    first: usize,
    last: usize,
    zoom: Vec<(&'static str, String)>,
    plot: Option<String>,
    rows: Vec<CommitRow>,
    steps: usize,
}

struct CommitRow {
    sha: String,
    subject: String,
    runs: usize,
    median: String,
    range: String,
    step: String,
    links: Vec<(String, String)>,
}

pub async fn page(
    State(state): State<AppState>,
    reader: Reader,
    Query(q): Query<TrendQuery>,
) -> PageResult {
    let db = &state.db;
    let watched = data::branches(db).await?;
    let pick =
        |wanted: Option<&str>, first: Option<&str>| wanted.or(first).unwrap_or_default().to_owned();
    let repo = pick(filter(&q.repo), watched.first().map(|w| w.repo.as_str()));
    let branch = pick(
        filter(&q.branch),
        watched.first().map(|w| w.branch.as_str()),
    );
    let groups = data::groups(db, &repo, &branch).await?;
    let group = pick(filter(&q.group), groups.first().map(String::as_str));
    let commits = data::commits(db, &repo, &branch, &group).await?;
    let (lo, hi) = window(&commits, filter(&q.from), filter(&q.to));
    let shown = commits.get(lo..hi).unwrap_or_default();
    let line = (repo.as_str(), branch.as_str(), group.as_str());
    let jobs = data::jobs(db, line, shown).await?;
    let job = pick(filter(&q.job), jobs.first().map(String::as_str));
    let metrics = data::metrics(db, line, &job, shown).await?;
    let metric = pick(filter(&q.metric), metrics.first().map(String::as_str));
    let values = data::values(db, line, (&job, &metric), shown).await?;
    let links = data::links(db, (&repo, &branch, &group, &metric), reader).await?;
    let series = Series::new(shown, values, &links);
    let base = [
        ("repo", repo.clone()),
        ("branch", branch.clone()),
        ("group", group.clone()),
        ("job", job.clone()),
        ("metric", metric.clone()),
    ];
    render(&TrendsPage {
        repos: dedup(watched.iter().map(|w| w.repo.clone())),
        branches: dedup(
            watched
                .iter()
                .filter(|w| w.repo == repo)
                .map(|w| w.branch.clone()),
        ),
        zoom: zoom_links(&commits, lo, hi, &base),
        total: commits.len(),
        first: lo + 1,
        last: hi,
        plot: (!series.points.is_empty()).then(|| series.plot(&metric)),
        steps: series.steps.len(),
        rows: series.rows(),
        repo,
        branch,
        groups,
        group,
        jobs,
        job,
        metrics,
        metric,
    })
}

/// The window `[lo, hi)` of `commits` the URL's `from`/`to` sha prefixes
/// name; the newest [`DEFAULT_WINDOW`] when they name none, at most
/// [`MAX_WINDOW`] (cut from the old end).
fn window(commits: &[TrendCommit], from: Option<&str>, to: Option<&str>) -> (usize, usize) {
    let find = |prefix: &str| commits.iter().position(|c| c.sha.starts_with(prefix));
    let hi = to.and_then(find).map_or(commits.len(), |i| i + 1);
    let lo = match from.and_then(find) {
        Some(i) if i < hi => i,
        _ => hi.saturating_sub(DEFAULT_WINDOW),
    };
    (lo.max(hi.saturating_sub(MAX_WINDOW)), hi)
}

/// Links to older, newer, all-recent and zoomed-in views of the branch.
fn zoom_links(
    commits: &[TrendCommit],
    lo: usize,
    hi: usize,
    base: &[(&str, String)],
) -> Vec<(&'static str, String)> {
    let span = (hi - lo).max(1);
    let to_link = |from: usize, to: usize| {
        let mut params = base.to_vec();
        let sha = |i: usize| commits.get(i).map(|c| short(&c.sha)).unwrap_or_default();
        params.push(("from", sha(from)));
        params.push(("to", sha(to.saturating_sub(1))));
        link("/trends", &params)
    };
    let mut out = Vec::new();
    if lo > 0 {
        out.push(("older", to_link(lo.saturating_sub(span), lo)));
    }
    if hi < commits.len() {
        out.push(("newer", to_link(hi, (hi + span).min(commits.len()))));
    }
    if span > 10 {
        out.push(("zoom in (newest half)", to_link(hi - span / 2, hi)));
    }
    if span < commits.len() {
        let wide = (span * 2).min(MAX_WINDOW);
        out.push(("zoom out", to_link(hi.saturating_sub(wide), hi)));
    }
    out
}

/// The plotted series: the window's commits that have the metric.
struct Series<'a> {
    points: Vec<(&'a TrendCommit, Vec<f64>, f64)>,
    steps: Vec<TrendStep>,
    links: HashMap<i64, Vec<(String, String)>>,
}

impl<'a> Series<'a> {
    /// `values`: per commit id, its runs' values in ascending order.
    fn new(
        shown: &'a [TrendCommit],
        mut values: HashMap<i64, Vec<f64>>,
        links: &[(i64, String, String)],
    ) -> Series<'a> {
        let points: Vec<(&TrendCommit, Vec<f64>, f64)> = shown
            .iter()
            .filter_map(|c| {
                let values = values.remove(&c.id)?;
                let median = median_sorted(&values);
                Some((c, values, median))
            })
            .collect();
        let medians: Vec<f64> = points.iter().map(|p| p.2).collect();
        // Too short a series, or a config error, finds no change point.
        let steps = changepoint::detect(&medians, &ChangePointConfig::default())
            .unwrap_or_default()
            .into_iter()
            .map(|c| TrendStep {
                index: c.index,
                change_pct: c.change_pct,
                p_value: c.p_value,
            })
            .collect();
        let mut by_id: HashMap<i64, Vec<(String, String)>> = HashMap::new();
        for (commit, href, what) in links {
            by_id
                .entry(*commit)
                .or_default()
                .push((href.clone(), what.clone()));
        }
        Series {
            points,
            steps,
            links: by_id,
        }
    }

    fn plot(&self, metric: &str) -> String {
        let labels: Vec<String> = self.points.iter().map(|p| short(&p.0.sha)).collect();
        let points: Vec<TrendPoint> = self
            .points
            .iter()
            .zip(&labels)
            .map(|((c, values, median), l)| TrendPoint {
                label: l,
                subject: &c.subject,
                values,
                median: *median,
                link: self.links.get(&c.id).and_then(|l| l.first().cloned()),
            })
            .collect();
        trend::render(&TrendPlot {
            id: "trend-plot",
            metric,
            unit: kbot_core::metrics::unit(metric),
            points: &points,
            steps: &self.steps,
        })
    }

    /// The table under the plot, newest first.
    fn rows(&self) -> Vec<CommitRow> {
        let mut rows: Vec<CommitRow> = self
            .points
            .iter()
            .enumerate()
            .map(|(i, (c, values, median))| {
                let (lo, hi) = values
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                        (a.min(*v), b.max(*v))
                    });
                CommitRow {
                    sha: short(&c.sha),
                    subject: c.subject.clone(),
                    runs: values.len(),
                    median: label(*median),
                    range: format!("{}–{}", label(lo), label(hi)),
                    step: self
                        .steps
                        .iter()
                        .find(|s| s.index == i)
                        .map(|s| format!("▲ {:+.1}% (p = {:.1e})", s.change_pct, s.p_value))
                        .unwrap_or_default(),
                    links: self.links.get(&c.id).cloned().unwrap_or_default(),
                }
            })
            .collect();
        rows.reverse();
        rows
    }
}

fn dedup(names: impl Iterator<Item = String>) -> Vec<String> {
    let set: std::collections::BTreeSet<String> = names.collect();
    set.into_iter().collect()
}

fn short(sha: &str) -> String {
    short_sha(sha, SHORT_SHA)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commits(n: usize) -> Vec<TrendCommit> {
        (0..n)
            .map(|i| TrendCommit {
                id: i as i64,
                // Distinct from the first character on, as real shas are.
                sha: format!("{:x}{i:039x}", i % 16),
                subject: String::new(),
            })
            .collect()
    }

    #[test]
    fn windows_follow_the_url() {
        let c = commits(100);
        assert_eq!(window(&c, None, None), (40, 100));
        let to = c[49].sha.clone();
        assert_eq!(window(&c, None, Some(&to)), (0, 50));
        let from = c[10].sha.clone();
        assert_eq!(window(&c, Some(&from), Some(&to)), (10, 50));
        // A from after the to, or an unknown sha, falls back to the default.
        assert_eq!(window(&c, Some(&to), Some(&from)), (0, 11));
        assert_eq!(window(&c, Some("zzz"), None), (40, 100));
        assert_eq!(window(&commits(0), None, None), (0, 0));
        let many = commits(1000);
        assert_eq!(window(&many, Some(&many[0].sha), None), (700, 1000));
    }

    #[test]
    fn zoom_links_move_the_window() {
        let c = commits(100);
        let links = zoom_links(&c, 40, 100, &[("repo", "linux".into())]);
        let names: Vec<&str> = links.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["older", "zoom in (newest half)", "zoom out"]);
        assert!(
            links[0].1.starts_with("/trends?repo=linux&from="),
            "{links:?}"
        );
    }
}
