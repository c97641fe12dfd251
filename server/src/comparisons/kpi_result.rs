//! A pair's result in one line, for every page that lists pairs: the KPI
//! the job acts on, which way it moved and by how much (`regression:
//! lmbench3.PIPE.bandwidth.MB/sec −14.8% (210.4 → 179.2)`), read from the
//! stored comparison rows. A maintainer sees the verdict where the pair is
//! listed, not three clicks down on the comparison page.

use std::collections::HashMap;

use kbot_core::metrics::{self, Impact};
use kbot_core::table::number;

use crate::db::{self, Db};
use crate::error::Result;
use kbot_api::submissions::{SubmissionStatus, SubmissionView, Verdict};

/// What a pair's KPIs say, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Call {
    /// A KPI the job acts on is worse beyond doubt.
    Regression,
    /// One is better beyond doubt, none worse.
    Improvement,
    /// A KPI is `different` but the job does not act on it (its share of
    /// the false-alarm budget was not beaten), or has no direction.
    Changed,
    /// Not decided yet: more runs were asked for, or are running.
    Undecided,
    /// The primary KPI is within its `same` margin.
    NoChange,
}

impl Call {
    /// The word shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Call::Regression => "regression",
            Call::Improvement => "improvement",
            Call::Changed => "changed",
            Call::Undecided => "undecided",
            Call::NoChange => "no change",
        }
    }

    /// The page's CSS state class (`state-regression`, `state-same`, ...).
    pub fn class(self) -> &'static str {
        match self {
            Call::NoChange => "same",
            other => other.as_str(),
        }
    }
}

/// The KPI row that decides a pair's line.
#[derive(Debug, Clone, PartialEq)]
pub struct KpiResult {
    pub call: Call,
    pub metric: String,
    pub change_pct: Option<f64>,
    pub base_mean: Option<f64>,
    pub head_mean: Option<f64>,
    /// Other KPIs with the same call (`and 2 more`).
    pub more: usize,
}

impl KpiResult {
    /// `regression: lmbench3.PIPE.bandwidth.MB/sec −14.8% (210.4 → 179.2)`.
    pub fn text(&self) -> String {
        let change = match self.change_pct {
            Some(c) if c.is_finite() => format!(" {}", signed_pct(c)),
            _ => String::new(),
        };
        let values = match (self.base_mean, self.head_mean) {
            (Some(b), Some(h)) => format!(" ({} → {})", number(b), number(h)),
            _ => String::new(),
        };
        let more = match self.more {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        format!(
            "{}: {}{change}{values}{more}",
            self.call.as_str(),
            self.metric
        )
    }
}

/// `−14.8%`, `+5.1%`, `±0%` (a typographic minus, as the reports print).
pub fn signed_pct(c: f64) -> String {
    if c.abs() < 0.05 {
        "±0%".to_owned()
    } else if c < 0.0 {
        format!("−{:.1}%", -c)
    } else {
        format!("+{c:.1}%")
    }
}

/// A pair's line as a page shows it: its CSS state class and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultLine {
    pub class: &'static str,
    pub text: String,
}

impl ResultLine {
    /// The line of a pair in `state` with `finished` of `total` runs in:
    /// its KPI result once there is one (marked partial while runs are
    /// still out), else where its runs are.
    pub fn of(
        state: SubmissionStatus,
        finished: u32,
        total: u32,
        kpi: Option<&KpiResult>,
    ) -> ResultLine {
        let runs = format!("{finished}/{total} runs in");
        match (state, kpi) {
            (SubmissionStatus::Cancelled, _) => {
                ResultLine::plain("cancelled", format!("cancelled: {runs}"))
            }
            (SubmissionStatus::Failed, _) => ResultLine::plain("failed", format!("failed: {runs}")),
            (SubmissionStatus::Done, Some(k)) => ResultLine::plain(k.call.class(), k.text()),
            (SubmissionStatus::Done, None) => {
                ResultLine::plain("unknown", format!("no comparison: {runs}"))
            }
            (SubmissionStatus::Queued | SubmissionStatus::Running, Some(k)) => {
                ResultLine::plain(k.call.class(), format!("{} (partial: {runs})", k.text()))
            }
            (state @ (SubmissionStatus::Queued | SubmissionStatus::Running), None) => {
                ResultLine::plain(state.as_str(), format!("{state}: {runs}"))
            }
        }
    }

    /// The line of submission `s`.
    pub fn of_submission(s: &SubmissionView, kpi: Option<&KpiResult>) -> ResultLine {
        ResultLine::of(s.state, s.jobs.finished, s.jobs.total, kpi)
    }

    fn plain(class: &'static str, text: String) -> ResultLine {
        ResultLine { class, text }
    }
}

#[derive(sqlx::FromRow)]
struct Row {
    submission_id: i64,
    atomic_job_id: i64,
    metric: String,
    #[sqlx(try_from = "String")]
    verdict: Verdict,
    change_pct: Option<f64>,
    base_mean: Option<f64>,
    head_mean: Option<f64>,
    /// The stored statistics, of `different` rows only (the rest are not
    /// read: a pair has hundreds of rows).
    detail: String,
}

/// The KPI result of each of `submissions` that has comparison rows.
pub async fn kpi_results(db: &Db, submissions: &[i64]) -> Result<HashMap<i64, KpiResult>> {
    if submissions.is_empty() {
        return Ok(HashMap::new());
    }
    let sql = format!(
        "SELECT submission_id, atomic_job_id, metric, verdict, change_pct, base_mean, head_mean, \
             CASE WHEN verdict = 'different' THEN detail ELSE '' END AS detail \
         FROM comparisons WHERE submission_id IN ({}) ORDER BY submission_id, atomic_job_id, metric",
        db::placeholders(1, submissions.len())
    );
    let mut query = sqlx::query_as::<_, Row>(&sql);
    for id in submissions {
        query = query.bind(id);
    }
    let rows = query.fetch_all(db.read()).await?;
    let mut by_submission: HashMap<i64, Vec<Row>> = HashMap::new();
    for row in rows.into_iter().filter(|r| metrics::is_kpi(&r.metric)) {
        by_submission
            .entry(row.submission_id)
            .or_default()
            .push(row);
    }
    Ok(by_submission
        .into_iter()
        .filter_map(|(id, rows)| decide(&rows).map(|r| (id, r)))
        .collect())
}

/// The call of one KPI row.
fn call_of(row: &Row) -> Call {
    match row.verdict {
        Verdict::Same => Call::NoChange,
        Verdict::Different => {
            let detail: serde_json::Value = serde_json::from_str(&row.detail).unwrap_or_default();
            let flag = |k: &str| detail.get(k).and_then(serde_json::Value::as_bool);
            // Rows stored before the KPI family have no `acts`: only the
            // primary acted then.
            let acts = flag("acts").or(flag("primary")).unwrap_or(true);
            let impact = detail
                .get("impact")
                .and_then(|v| serde_json::from_value::<Impact>(v.clone()).ok());
            match (acts, impact) {
                (true, Some(Impact::Regression)) => Call::Regression,
                (true, Some(Impact::Improvement)) => Call::Improvement,
                _ => Call::Changed,
            }
        }
        Verdict::Unknown => Call::Undecided,
    }
}

/// The worst call among a pair's KPI rows; among rows of that call the
/// biggest change; for `no change`, the primary KPI of the first job.
fn decide(rows: &[Row]) -> Option<KpiResult> {
    let calls: Vec<Call> = rows.iter().map(call_of).collect();
    let worst = *calls.iter().min()?;
    let of_worst = || rows.iter().zip(&calls).filter(|(_, c)| **c == worst);
    let pick = if worst == Call::NoChange {
        let first_job = rows.first()?.atomic_job_id;
        let names = rows
            .iter()
            .filter(|r| r.atomic_job_id == first_job)
            .map(|r| r.metric.as_str());
        let primary = metrics::primary_kpi(names)?;
        rows.iter()
            .find(|r| r.atomic_job_id == first_job && r.metric == primary)?
    } else {
        of_worst()
            .map(|(r, _)| r)
            .max_by(|a, b| magnitude(a).total_cmp(&magnitude(b)))?
    };
    Some(KpiResult {
        call: worst,
        metric: pick.metric.clone(),
        change_pct: pick.change_pct,
        base_mean: pick.base_mean,
        head_mean: pick.head_mean,
        more: if worst == Call::NoChange {
            0
        } else {
            of_worst().count() - 1
        },
    })
}

fn magnitude(r: &Row) -> f64 {
    r.change_pct
        .map_or(0.0, |c| if c.is_finite() { c.abs() } else { 0.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(job: i64, metric: &str, verdict: &str, change: f64, detail: &str) -> Row {
        Row {
            submission_id: 1,
            atomic_job_id: job,
            metric: metric.into(),
            verdict: Verdict::parse(verdict).expect("a verdict"),
            change_pct: Some(change),
            base_mean: Some(210.4),
            head_mean: Some(210.4 * (1.0 + change / 100.0)),
            detail: detail.into(),
        }
    }

    const BW: &str = "lmbench3.PIPE.bandwidth.MB/sec";
    const LAT: &str = "lmbench3.PIPE.latency.us";

    #[test]
    fn the_worst_acting_kpi_decides() {
        let regression = r#"{"impact":"regression","acts":true}"#;
        let held_back = r#"{"impact":"regression","acts":false}"#;
        let rows = [
            row(1, BW, "different", -14.8, regression),
            row(1, LAT, "different", 30.0, held_back),
            row(2, BW, "same", 0.1, ""),
        ];
        let r = decide(&rows).expect("a result");
        assert_eq!(r.call, Call::Regression);
        assert_eq!(r.metric, BW);
        assert_eq!(
            r.text(),
            "regression: lmbench3.PIPE.bandwidth.MB/sec −14.8% (210.40 → 179.26)"
        );
    }

    #[test]
    fn a_held_back_kpi_is_changed_not_a_regression() {
        let rows = [
            row(1, BW, "same", 0.02, ""),
            row(
                1,
                LAT,
                "different",
                30.0,
                r#"{"impact":"regression","acts":false}"#,
            ),
        ];
        assert_eq!(decide(&rows).expect("a result").call, Call::Changed);
    }

    #[test]
    fn no_change_names_the_primary_kpi() {
        let rows = [row(1, LAT, "same", 0.3, ""), row(1, BW, "same", 0.02, "")];
        let r = decide(&rows).expect("a result");
        assert_eq!(r.call, Call::NoChange);
        assert_eq!(r.metric, BW);
        assert!(r
            .text()
            .starts_with("no change: lmbench3.PIPE.bandwidth.MB/sec ±0% ("));
    }

    #[test]
    fn a_line_says_where_a_pair_is() {
        let kpi = decide(&[row(1, BW, "different", -14.8, r#"{"impact":"regression"}"#)]);
        let line = |state, kpi| ResultLine::of(state, 3, 8, kpi);
        assert_eq!(
            line(SubmissionStatus::Queued, None).text,
            "queued: 3/8 runs in"
        );
        assert_eq!(line(SubmissionStatus::Running, None).class, "running");
        assert_eq!(
            line(SubmissionStatus::Done, None).text,
            "no comparison: 3/8 runs in"
        );
        let partial = line(SubmissionStatus::Running, kpi.as_ref());
        assert_eq!(partial.class, "regression");
        assert!(
            partial.text.ends_with("(partial: 3/8 runs in)"),
            "{partial:?}"
        );
        assert!(!line(SubmissionStatus::Done, kpi.as_ref())
            .text
            .contains("partial"));
        assert_eq!(
            line(SubmissionStatus::Cancelled, kpi.as_ref()).class,
            "cancelled"
        );
    }

    #[test]
    fn pending_runs_are_undecided_and_improvements_count() {
        let rows = [
            row(1, BW, "unknown", -1.0, ""),
            row(
                2,
                BW,
                "different",
                9.0,
                r#"{"impact":"improvement","primary":true}"#,
            ),
            row(
                3,
                BW,
                "different",
                5.0,
                r#"{"impact":"improvement","primary":true}"#,
            ),
        ];
        let r = decide(&rows).expect("a result");
        assert_eq!((r.call, r.more), (Call::Improvement, 1));
        assert!(r
            .text()
            .starts_with("improvement: lmbench3.PIPE.bandwidth.MB/sec +9.0%"));
        assert!(r.text().ends_with(" and 1 more"));
    }
}
