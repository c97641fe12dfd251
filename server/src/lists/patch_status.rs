//! A posted series' patches as patchwork shows them: a status per patch,
//! from the bisections its pair started (a probe's verdict on the patch's
//! commit, the first bad commit), and how far each bisection is.

use crate::bisect::{BisectionRow, BisectionState, StepRow};

/// A patch's status: its CSS state class and its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchStatus {
    pub class: &'static str,
    pub text: String,
}

/// A bisection as the series page lists it.
pub struct Bisected<'a> {
    pub row: &'a BisectionRow,
    pub steps: &'a [StepRow],
    /// The first bad commit's sha, once found.
    pub first_bad: Option<&'a str>,
}

/// The status of the patch whose commit is `commit` (`None`: the cover
/// letter, or a patch that did not apply).
pub fn status(commit: Option<&str>, bisections: &[Bisected<'_>]) -> PatchStatus {
    let Some(commit) = commit else {
        return PatchStatus {
            class: "unknown",
            text: String::new(),
        };
    };
    for b in bisections {
        if b.first_bad == Some(commit) {
            return PatchStatus {
                class: "bad",
                text: format!("first bad commit ({})", b.row.metric),
            };
        }
    }
    for b in bisections {
        if let Some(step) = b.steps.iter().find(|s| s.sha == commit) {
            let state = step.state.as_str();
            let change = step
                .change_pct
                .filter(|c| c.is_finite())
                .map(|c| format!(" {}", crate::comparisons::kpi_result::signed_pct(c)))
                .unwrap_or_default();
            return PatchStatus {
                class: state,
                text: format!("{state}{change}"),
            };
        }
    }
    PatchStatus {
        class: "unknown",
        text: String::new(),
    }
}

/// `bisecting lmbench3.PIPE.bandwidth.MB/sec: 1 commit tested, about 1 step
/// left`, or where it ended. `commits` are the series' commits in order
/// (the base's child first, the tip last); the tip is the bad end.
pub fn progress(b: &Bisected<'_>, commits: &[&str]) -> String {
    let tested = b.steps.len();
    let plural = |n: usize, one: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {one}s")
        }
    };
    match b.row.state {
        BisectionState::Running => {
            let left = steps_left(b.steps, commits)
                .map(|n| format!(", about {} left", plural(n, "step")))
                .unwrap_or_default();
            format!(
                "bisecting {}: {} tested{left}",
                b.row.metric,
                plural(tested, "commit")
            )
        }
        BisectionState::Verifying => format!(
            "verifying the first bad commit on {} against its parent",
            b.row.metric
        ),
        other => format!(
            "bisection {} on {} ({} tested)",
            other.as_str().replace('_', " "),
            b.row.metric,
            plural(tested, "commit")
        ),
    }
}

/// Probes still needed to halve the commits between the last good and the
/// first bad commit down to one; `None` when no step is on the series.
fn steps_left(steps: &[StepRow], commits: &[&str]) -> Option<usize> {
    if commits.is_empty() {
        return None;
    }
    let index = |state: &str| {
        steps
            .iter()
            .filter(|s| s.state.as_str() == state)
            .filter_map(|s| commits.iter().position(|c| *c == s.sha))
            .collect::<Vec<_>>()
    };
    // The base (before the first commit) is good, the tip bad.
    let good = index("good").into_iter().max().map_or(0, |i| i + 1);
    let bad = index("bad").into_iter().min().unwrap_or(commits.len() - 1);
    let span = (bad + 1).saturating_sub(good);
    Some(match span {
        0 | 1 => 0,
        n => (usize::BITS - (n - 1).leading_zeros()) as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::BisectionState;

    fn row(state: BisectionState) -> BisectionRow {
        BisectionRow {
            state,
            ..BisectionRow::for_test("lmbench3.PIPE.bandwidth.MB/sec", 8)
        }
    }

    fn step(sha: &str, state: &str, change: f64) -> StepRow {
        StepRow {
            id: 1,
            idx: 0,
            commit_id: 1,
            sha: sha.into(),
            subject: String::new(),
            state: state.to_owned().try_into().expect("a step state"),
            change_pct: Some(change),
            detail: String::new(),
            started_at: 0,
            finished_at: None,
        }
    }

    #[test]
    fn patches_show_their_probe_and_the_culprit() {
        let commits = ["c1", "c2", "c3", "c4", "c5"];
        let row = row(BisectionState::Running);
        let steps = [step("c2", "good", -0.1)];
        let b = Bisected {
            row: &row,
            steps: &steps,
            first_bad: None,
        };
        assert_eq!(
            status(Some("c2"), std::slice::from_ref(&b)).text,
            "good −0.1%"
        );
        assert_eq!(status(Some("c3"), std::slice::from_ref(&b)).text, "");
        // c3..c5 are left: two more probes.
        assert_eq!(
            progress(&b, &commits),
            "bisecting lmbench3.PIPE.bandwidth.MB/sec: 1 commit tested, about 2 steps left"
        );
        let steps = [step("c2", "good", -0.1), step("c4", "bad", -14.8)];
        let b = Bisected { steps: &steps, ..b };
        assert!(progress(&b, &commits).ends_with("about 1 step left"));
        let done = Bisected {
            first_bad: Some("c3"),
            ..b
        };
        let s = status(Some("c3"), std::slice::from_ref(&done));
        assert_eq!(
            (s.class, s.text.as_str()),
            ("bad", "first bad commit (lmbench3.PIPE.bandwidth.MB/sec)")
        );
        assert_eq!(status(None, std::slice::from_ref(&done)).text, "");
    }
}
