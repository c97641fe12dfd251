//! The report body in the layout of the kernel test robot's (0-day's) reports
//! on the kernel lists; `core/tests/fixtures/seed_001_report.txt` is one.

use std::fmt::Write;

use super::impact::render_impact_table;
use super::machine::describe_machine;
use super::subject::short_sha;
use super::{ChangeKind, MessageId, ReportConfig, ReportData};

const FIX_TAGS_INTRO: &str = "If you fix the issue in a separate patch/commit (i.e. not just a new version of the same patch/commit), kindly add following tags";
const IMPACT_INTRO: &str =
    "In addition to that, the commit also has significant impact on the following tests:";
const DETAILS_RULE: &str =
    "-------------------------------------------------------------------------------------------------->";
const OTHER_TEST_RULE: &str =
    "***************************************************************************************************";

/// The whole body, from the optional preface to the signature, `\n` line ends.
pub fn render_body(data: &ReportData, config: &ReportConfig, id: &MessageId) -> String {
    let mut out = String::new();
    if let Some(preface) = data.preface.as_deref().filter(|p| !p.trim().is_empty()) {
        let _ = write!(out, "{}\n\n", preface.trim_end());
    }
    opening(&mut out, data, config);
    test_description(&mut out, data);
    if !data.other_impacts.is_empty() {
        let _ = write!(
            out,
            "{IMPACT_INTRO}\n\n{}\n\n",
            render_impact_table(&data.other_impacts)
        );
    }
    // Improvements need no fix, so 0-day sends them without the tags to add.
    if data.kind == ChangeKind::Regression {
        let _ = write!(
            out,
            "{FIX_TAGS_INTRO}\n| Reported-by: {}\n| Closes: {}\n\n",
            config.identity(),
            config.closes_url(id.as_str())
        );
    }
    details(&mut out, data, config, id);
    let _ = write!(
        out,
        "\n\nDisclaimer:\n{}\n\n\n-- \n{}\n",
        config.disclaimer.trim_end(),
        config.signature.trim_end()
    );
    out
}

fn opening(out: &mut String, data: &ReportData, config: &ReportConfig) {
    let _ = write!(
        out,
        "Hello,\n\n{} noticed a {:.1}% {} of {} on:\n\n\n",
        config.robot_name,
        data.change_percent.abs(),
        data.kind.as_str(),
        data.metric
    );
    let _ = writeln!(
        out,
        "commit: {} (\"{}\") {} {}",
        data.commit.sha, data.commit.subject, data.repo_url, data.branch
    );
    if let Some(posted) = &data.posted {
        let _ = write!(
            out,
            "url: {}\nbase: {}\npatch link: {}\npatch subject: {}\n",
            posted.url, posted.base, posted.patch_link, posted.patch_subject
        );
    }
    if !data.still_on.is_empty() {
        out.push('\n');
        for still in &data.still_on {
            let _ = writeln!(
                out,
                "[still {} on {} {}]",
                data.kind.as_str(),
                still.tree_branch,
                still.sha
            );
        }
    }
    out.push('\n');
}

fn test_description(out: &mut String, data: &ReportData) {
    let _ = write!(
        out,
        "testcase: {}\nconfig: {}\ncompiler: {}\ntest machine: {}\n",
        data.testcase,
        data.kconfig,
        data.compiler,
        describe_machine(&data.machine)
    );
    if let Some(mode) = &data.measured_by {
        let _ = writeln!(out, "measured on: {mode}");
    }
    out.push_str("parameters:\n\n");
    for (k, v) in &data.parameters {
        let _ = writeln!(out, "\t{k}: {v}");
    }
    out.push('\n');
}

fn details(out: &mut String, data: &ReportData, config: &ReportConfig, id: &MessageId) {
    let materials = join_url(&join_url(&config.materials_url, id.day()), id.as_str());
    let _ = write!(
        out,
        "Details are as below:\n{DETAILS_RULE}\n\n\
         The kernel config and materials to reproduce are available at:\n{materials}\n\n{}\n",
        data.compare_table.trim_end()
    );
    for other in &data.other_impacts {
        if let Some(cmp) = &other.compare_table {
            let _ = write!(
                out,
                "\n{OTHER_TEST_RULE}\n{}: {}\n{}\n",
                cmp.tbox_group,
                other.machine,
                cmp.table.trim_end()
            );
        }
    }
}

/// `base` + `/` + `tail`, with exactly one slash between them.
pub(crate) fn join_url(base: &str, tail: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), tail)
}

/// `short_sha ("subject")`, the way the compare block's `commit:` lines name commits.
pub fn commit_label(sha: &str, subject: &str) -> String {
    format!("{} (\"{}\")", short_sha(sha), subject)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_join_has_one_slash() {
        assert_eq!(join_url("http://a/b/", "c"), "http://a/b/c");
        assert_eq!(join_url("http://a/b", "c"), "http://a/b/c");
    }

    #[test]
    fn commit_label_is_short() {
        assert_eq!(
            commit_label("c610d2d0787961cd00", "fs: x"),
            "c610d2d078 (\"fs: x\")"
        );
    }
}
