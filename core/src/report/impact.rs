//! The "In addition to that, the commit also has significant impact on the
//! following tests:" ASCII table.

use super::OtherImpact;

const LABEL_WIDTH: usize = "testcase: change".len();

/// One block per test, closed by `+---+---+` rules, second column as wide as
/// its widest cell (0-day's layout):
///
/// ```text
/// +------------------+------------------------------------------------------+
/// | testcase: change | unixbench: unixbench.throughput 2.1% improvement     |
/// | test machine     | 16 threads 1 sockets Intel(R) Xeon(R) ... memory     |
/// | test parameters  | cpufreq_governor=performance                         |
/// |                  | nr_task=100%                                         |
/// +------------------+------------------------------------------------------+
/// ```
pub fn render_impact_table(impacts: &[OtherImpact]) -> String {
    let blocks: Vec<Vec<(&str, String)>> = impacts.iter().map(rows).collect();
    let width = blocks
        .iter()
        .flatten()
        .map(|(_, v)| v.chars().count())
        .max()
        .unwrap_or(0);
    let rule = format!(
        "+{}+{}+\n",
        "-".repeat(LABEL_WIDTH + 2),
        "-".repeat(width + 2)
    );
    let mut out = rule.clone();
    for block in &blocks {
        for (label, value) in block {
            let pad = width - value.chars().count();
            out.push_str(&format!(
                "| {label:<LABEL_WIDTH$} | {value}{} |\n",
                " ".repeat(pad)
            ));
        }
        out.push_str(&rule);
    }
    out
}

fn rows(impact: &OtherImpact) -> Vec<(&'static str, String)> {
    let mut rows = vec![
        (
            "testcase: change",
            format!(
                "{}: {} {:.1}% {}",
                impact.testcase,
                impact.metric,
                impact.change_percent.abs(),
                impact.kind.as_str()
            ),
        ),
        ("test machine", impact.machine.clone()),
    ];
    for (i, (k, v)) in impact.parameters.iter().enumerate() {
        let label = if i == 0 { "test parameters" } else { "" };
        rows.push((label, format!("{k}={v}")));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ChangeKind;

    #[test]
    fn blocks_are_aligned_and_closed() {
        let impacts = vec![
            OtherImpact {
                testcase: "will-it-scale".into(),
                metric: "will-it-scale.per_process_ops".into(),
                change_percent: -3.3,
                kind: ChangeKind::Regression,
                machine: "104 threads 2 sockets (Skylake) with 192G memory".into(),
                parameters: vec![
                    ("cpufreq_governor".into(), "performance".into()),
                    ("mode".into(), "process".into()),
                ],
                compare_table: None,
            },
            OtherImpact {
                testcase: "unixbench".into(),
                metric: "unixbench.throughput".into(),
                change_percent: 2.1,
                kind: ChangeKind::Improvement,
                machine: "16 threads 1 socket with 32G memory".into(),
                parameters: vec![],
                compare_table: None,
            },
        ];
        let table = render_impact_table(&impacts);
        let lines: Vec<&str> = table.lines().collect();
        // Every line has the same width, and every block ends with a rule.
        let w = lines[0].len();
        assert!(lines.iter().all(|l| l.chars().count() == w), "{table}");
        assert_eq!(lines.len(), 1 + 4 + 1 + 2 + 1, "{table}");
        assert_eq!(lines[5], lines[0]);
        assert_eq!(lines[8], lines[0]);
        assert_eq!(
            lines[1],
            "| testcase: change | will-it-scale: will-it-scale.per_process_ops 3.3% regression |"
        );
        assert_eq!(
            lines[4].trim_end_matches([' ', '|']),
            "|                  | mode=process"
        );
        assert_eq!(
            lines[6].trim_end_matches([' ', '|']),
            "| testcase: change | unixbench: unixbench.throughput 2.1% improvement"
        );
    }
}
