//! Versions of a series, linked by b4's `change-id:` (the same on every
//! version, whatever its title becomes). When a version is tested, its
//! primary KPI is set beside the earlier versions' and, only when the
//! verdict changed since the previous version kbot tested, the thread of
//! the new version hears the table: `v1 -18.5% regression, v2 -4.1%
//! regression, v3 +0.0% same`. An unchanged verdict says nothing new: a
//! regression is answered by its bisection's report, a clean series by
//! silence.

use std::fmt::Write as _;

use kbot_core::metrics::Impact;
use kbot_core::stats::{MetricComparison, Outcome};

use super::store::{ListRow, SeriesRow, SeriesState};
use crate::db::Tx;
use crate::error::Result;
use crate::mail::thread::{self, Answer};
use crate::state::AppState;

/// One tested version's primary KPI.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionResult {
    pub version: i64,
    pub metric: String,
    pub change: f64,
    pub verdict: Verdict,
}

/// What a version's pair said of its primary KPI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Regression,
    Improvement,
    Same,
    Undecided,
}

impl Verdict {
    fn of(m: &MetricComparison) -> Verdict {
        match (m.kbot.outcome, m.impact) {
            (Outcome::Different, Impact::Regression) => Verdict::Regression,
            (Outcome::Different, Impact::Improvement) => Verdict::Improvement,
            (Outcome::Same, _) => Verdict::Same,
            _ => Verdict::Undecided,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::Improvement => "improvement",
            Verdict::Same => "same",
            Verdict::Undecided => "undecided",
        }
    }
}

/// The primary KPI of the pair `submission_id` (its first atomic job).
async fn primary_of(tx: &mut Tx, submission_id: i64) -> Result<Option<MetricComparison>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT detail FROM comparisons WHERE submission_id = $1 \
         AND atomic_job_id = (SELECT MIN(atomic_job_id) FROM comparisons WHERE submission_id = $1)",
    )
    .bind(submission_id)
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows
        .iter()
        .filter_map(|(d,)| serde_json::from_str::<MetricComparison>(d).ok())
        .find(|m| m.primary))
}

/// What a tested series' pair said of its primary KPI, for its state's
/// detail: `bw_pipe.bandwidth.MB/sec -14.8%, regression (bisected inside
/// the series, answered in the patch's thread)`.
pub async fn verdict_line(tx: &mut Tx, submission_id: i64) -> Result<String> {
    let Some(m) = primary_of(tx, submission_id).await? else {
        return Ok("no KPI was compared".into());
    };
    let verdict = Verdict::of(&m);
    let then = match verdict {
        Verdict::Regression => " (bisected inside the series, answered in the patch's thread)",
        Verdict::Improvement | Verdict::Same | Verdict::Undecided => "",
    };
    Ok(format!(
        "{} {:+.1}%, {}{then}",
        m.metric,
        m.change,
        verdict.as_str()
    ))
}

/// Every tested version of `s`'s series (its `change_id`, by its author:
/// a stranger's posting under the same change-id is no version of it) on
/// the list, up to and including `s`'s version, oldest first.
async fn results(tx: &mut Tx, s: &SeriesRow, change_id: &str) -> Result<Vec<VersionResult>> {
    let tested: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT version, MAX(submission_id) FROM series WHERE list_id = $1 AND change_id = $2 \
         AND author_address = $3 AND version <= $4 AND submission_id IS NOT NULL AND state = $5 \
         GROUP BY version ORDER BY version",
    )
    .bind(s.list_id)
    .bind(change_id)
    .bind(&s.author_address)
    .bind(s.version)
    .bind(SeriesState::Tested.as_str())
    .fetch_all(&mut **tx)
    .await?;
    let mut out = Vec::new();
    for (version, submission) in tested {
        if let Some(m) = primary_of(tx, submission).await? {
            out.push(VersionResult {
                version,
                metric: m.metric.clone(),
                change: m.change,
                verdict: Verdict::of(&m),
            });
        }
    }
    Ok(out)
}

/// The table, when the newest version's verdict differs from the one
/// before it (same metric); `None` otherwise.
pub fn changed_table(results: &[VersionResult]) -> Option<String> {
    let [.., before, newest] = results else {
        return None;
    };
    if before.metric != newest.metric || before.verdict == newest.verdict {
        return None;
    }
    let mut table = format!("    version  {}\n", newest.metric);
    for r in results.iter().filter(|r| r.metric == newest.metric) {
        let _ = writeln!(
            table,
            "    v{:<7} {:+.1}%  {}",
            r.version,
            r.change,
            r.verdict.as_str()
        );
    }
    let _ = write!(
        table,
        "\nThe verdict changed since v{}: {} -> {}.",
        before.version,
        before.verdict.as_str(),
        newest.verdict.as_str()
    );
    Some(table)
}

/// Answers the newly tested series `s` with the versions' table when its
/// verdict changed, in the caller's transaction.
pub async fn answer_if_changed(
    state: &AppState,
    tx: &mut Tx,
    l: &ListRow,
    s: &SeriesRow,
) -> Result<()> {
    let Some(change_id) = s.change_id.as_deref() else {
        return Ok(());
    };
    let all = results(tx, s, change_id).await?;
    if all.last().map(|r| r.version) != Some(s.version) {
        return Ok(());
    }
    let Some(table) = changed_table(&all) else {
        return Ok(());
    };
    let config = &state.config.mail;
    let place = super::answers::series_place(state, l, s).await?;
    let body = format!(
        "Hi,\n\n{} tested v{} of this series. Its primary KPI in each version kbot tested \
         (change-id: {change_id}):\n\n{table}\n{}",
        config.report.robot_name,
        s.version,
        thread::signature(config)
    );
    let answer = Answer {
        place: &place,
        identity_key: format!("versions/{}/{}", l.id, s.id),
        body,
        submission_id: s.submission_id,
    };
    thread::enqueue_answer(tx, config, &answer).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(version: i64, change: f64, verdict: Verdict) -> VersionResult {
        VersionResult {
            version,
            metric: "bw_pipe.bandwidth.MB/sec".into(),
            change,
            verdict,
        }
    }

    #[test]
    fn only_a_changed_verdict_is_told() {
        let one = [v(1, -18.5, Verdict::Regression)];
        assert_eq!(changed_table(&one), None);
        let still = [
            v(1, -18.5, Verdict::Regression),
            v(2, -4.1, Verdict::Regression),
        ];
        assert_eq!(changed_table(&still), None);
        let fixed = [
            v(1, -18.5, Verdict::Regression),
            v(2, -4.1, Verdict::Regression),
            v(3, 0.0, Verdict::Same),
        ];
        let table = changed_table(&fixed).expect("a table");
        assert!(table.contains("v1       -18.5%  regression"), "{table}");
        assert!(table.contains("v3       +0.0%  same"), "{table}");
        assert!(table.ends_with("since v2: regression -> same."), "{table}");
    }
}
