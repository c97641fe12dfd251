//! A stored comparison row's statistics (`comparisons.detail`, the JSON of
//! `kbot_core::stats::MetricComparison`) read back for the comparison page,
//! and the sentence that says why the verdict is what it is.
//!
//! The detail is read into a mirror with optional numbers rather than into
//! `MetricComparison` itself: the store writes NaN (an undefined ratio) as
//! JSON null, which `f64` fields refuse.

use serde::Deserialize;

/// The parts of `MetricComparison` the page shows.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StoredComparison {
    pub impact: Option<String>,
    pub kpi: bool,
    pub primary: bool,
    /// The job acts on it (`MetricComparison::acts`); absent in rows
    /// stored before the KPI family, where only the primary acted.
    pub acts: Option<bool>,
    pub family_alpha: Option<f64>,
    pub change_is_absolute: bool,
    pub kbot: StoredVerdict,
    pub zero_day: StoredZeroDay,
}

/// `kbot_core::stats::KbotVerdict`, numbers optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StoredVerdict {
    pub outcome: String,
    pub alpha: Option<f64>,
    pub p_value: Option<f64>,
    pub p_mann_whitney: Option<f64>,
    pub p_kolmogorov_smirnov: Option<f64>,
    pub p_welch: Option<f64>,
    pub same_margin: Option<f64>,
    pub equivalence_ci: Option<(Option<f64>, Option<f64>)>,
    pub median_ratio: Option<f64>,
    pub median_ratio_ci: Option<(Option<f64>, Option<f64>)>,
    pub cliffs_delta: Option<f64>,
    pub above_floor: bool,
    pub base_bimodal: bool,
    pub head_bimodal: bool,
    pub deterministic: bool,
    pub estimator: Option<String>,
}

/// `kbot_core::stats::ZeroDayVerdict`'s call and reason.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StoredZeroDay {
    pub changed: bool,
    pub reason: String,
}

impl StoredComparison {
    /// The stored detail; an unreadable one shows as a verdict without evidence.
    pub fn from_json(detail: &serde_json::Value) -> StoredComparison {
        serde_json::from_value(detail.clone()).unwrap_or_default()
    }

    /// The verdict's reason, and for a KPI whose `different` the job does
    /// not act on, why: its p did not beat its share of the job's one
    /// false-alarm budget.
    pub fn reason(&self, min_runs: usize, runs: usize) -> String {
        let reason = self.kbot.reason(min_runs, runs);
        let held_back = self.kpi && self.kbot.outcome == "different" && self.acts == Some(false);
        match (held_back, self.family_alpha) {
            (true, Some(level)) => format!(
                "{reason} Not acted on: the job's KPIs share one false-alarm budget, and \
                 this KPI's share of it asked for p < {level:.2e} at this look."
            ),
            (true, None) => format!(
                "{reason} Not acted on: the job's KPIs share one false-alarm budget, and \
                 this KPI's share of it was not beaten."
            ),
            (false, _) => reason,
        }
    }
}

impl StoredVerdict {
    /// What the change figure is, after the deciding test.
    pub fn estimator_name(&self) -> &'static str {
        match self.estimator.as_deref() {
            Some("log_means") => "geometric means",
            Some("means") => "means",
            Some("hodges_lehmann") => "Hodges-Lehmann",
            Some("values") => "exact values",
            _ => "means",
        }
    }

    pub fn ratio_ci(&self) -> Option<(f64, f64)> {
        match self.median_ratio_ci {
            Some((Some(a), Some(b))) => Some((a, b)),
            _ => None,
        }
    }

    fn equivalence(&self) -> Option<(f64, f64)> {
        match self.equivalence_ci {
            Some((Some(a), Some(b))) => Some((a, b)),
            _ => None,
        }
    }

    /// Which test's p decided: Welch's t on the logs, or the rank tests.
    fn deciding_test(&self) -> &'static str {
        match (self.p_welch, self.p_value) {
            (Some(w), Some(p)) if w == p => "Welch's t on the logs",
            _ => "the rank tests (Mann-Whitney U, Kolmogorov-Smirnov)",
        }
    }

    /// Why the outcome is what it is, in one or two sentences.
    pub fn reason(&self, min_runs: usize, runs: usize) -> String {
        let p = fmt_p(self.p_value);
        let alpha = fmt_p(self.alpha);
        let margin = self.same_margin.map(|m| format!("{:.1}%", m * 100.0));
        let equivalence = self.equivalence();
        match self.outcome.as_str() {
            _ if self.deterministic => String::from(
                "Every run of each side read one value (an instruction-counted guest): \
                 the values decide without a test.",
            ),
            "different" => format!(
                "p = {p} from {} is below this look's α = {alpha}, and the change (the \
                 test's own estimate) clears the metric's floor.",
                self.deciding_test()
            ),
            "same" => match (equivalence, margin) {
                (Some((lo, hi)), Some(m)) => format!(
                    "Equivalence: the ratio's interval {lo:.3}–{hi:.3} lies inside 1 ± {m}, \
                     so no change beyond {m} is left (at 95% over all the looks).{}",
                    if self.p_value.zip(self.alpha).is_some_and(|(p, a)| p < a) {
                        format!(
                            " p = {p} is below α = {alpha}, but the change is below the \
                             metric's floor (0-day's 1% for perf metrics, 5% for others)."
                        )
                    } else {
                        String::new()
                    }
                ),
                _ => String::from("The equivalence test rules out a change beyond the margin."),
            },
            "unknown" if self.alpha.is_some_and(|a| a <= 0.0) => format!(
                "Unknown: {runs} runs on the smaller side; no verdict is drawn before \
                 {min_runs} runs per side, and more runs are queued."
            ),
            "unknown" => unknown_reason(&p, &alpha, equivalence, margin.as_deref()),
            other => format!("Verdict {other}."),
        }
    }
}

fn unknown_reason(p: &str, alpha: &str, eq: Option<(f64, f64)>, margin: Option<&str>) -> String {
    let not_significant = format!("p = {p} is not below this look's α = {alpha}");
    match (eq, margin) {
        (Some((lo, hi)), Some(m)) => format!(
            "Unknown: {not_significant}, and the ratio's interval {lo:.3}–{hi:.3} reaches \
             beyond 1 ± {m}, so a change that large is not ruled out either. More runs \
             narrow it, up to the submission's cap."
        ),
        _ => format!(
            "Unknown: {not_significant}, and there is no equivalence interval (values not \
             all positive, or too few runs) to rule a change out."
        ),
    }
}

/// A p-value or level: 3 significant digits, scientific below 0.001.
pub fn fmt_p(p: Option<f64>) -> String {
    match p {
        Some(p) if p.is_finite() && p != 0.0 && p < 1e-3 => format!("{p:.2e}"),
        Some(p) if p.is_finite() => format!("{p:.4}"),
        _ => String::from("–"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(json: serde_json::Value) -> StoredComparison {
        StoredComparison::from_json(&json)
    }

    #[test]
    fn null_ratios_read_as_none() {
        let c = stored(serde_json::json!({
            "impact": "regression",
            "kbot": {"outcome": "different", "alpha": 0.004, "p_value": 0.0001,
                     "p_welch": 0.0001, "median_ratio": null, "median_ratio_ci": null},
            "zero_day": {"changed": true, "reason": "changed"}
        }));
        assert_eq!(c.kbot.median_ratio, None);
        assert_eq!(c.kbot.ratio_ci(), None);
        let why = c.kbot.reason(4, 5);
        assert!(why.contains("Welch") && why.contains("1.00e-4"), "{why}");
    }

    #[test]
    fn unknown_says_why() {
        let early = stored(serde_json::json!({"kbot": {"outcome": "unknown", "alpha": 0.0}}));
        assert!(early.kbot.reason(4, 3).contains("before 4 runs"));
        let wide = stored(serde_json::json!({"kbot": {
            "outcome": "unknown", "alpha": 0.002, "p_value": 0.2,
            "same_margin": 0.03, "equivalence_ci": [0.95, 1.04]}}));
        let why = wide.kbot.reason(4, 6);
        assert!(
            why.contains("0.950–1.040") && why.contains("1 ± 3.0%"),
            "{why}"
        );
        let same = stored(serde_json::json!({"kbot": {
            "outcome": "same", "alpha": 0.002, "p_value": 0.6,
            "same_margin": 0.03, "equivalence_ci": [0.99, 1.01]}}));
        assert!(same.kbot.reason(4, 6).contains("Equivalence"));
    }
}
