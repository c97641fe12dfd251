//! Job files in LKP's own format (`tests/lkp-jobs/jobs/*.yaml`, with
//! includes from `jobs/common/` and `include/`) planned against that tree as
//! an LKP include root, each compared with the plan written next to it
//! (`*.plan`): the atomic jobs queued (their result paths and hardware needs), the monitors the
//! agent runs, and every skipped job, monitor and key with its reason; or
//! the error that refuses the file.

use std::path::{Path, PathBuf};

use kbot_core::job::{plan_job_file, JobPlan};
use kbot_core::lkp::IncludeDir;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lkp-jobs")
}

fn render(plan: &JobPlan) -> String {
    let mut out = String::new();
    for job in &plan.jobs {
        let needs = if job.needs.is_empty() {
            String::new()
        } else {
            format!(" needs: {}", job.needs.describe())
        };
        out.push_str(&format!(
            "job {} runs={}{needs}\n",
            job.result_path("COMMIT"),
            job.runs
        ));
    }
    for m in &plan.monitors {
        out.push_str(&format!("monitor {m}\n"));
    }
    for s in &plan.skipped {
        out.push_str(&format!(
            "skip {} {}: {}\n",
            s.kind.as_str(),
            s.name,
            s.reason
        ));
    }
    out
}

fn plan_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("readable");
    match plan_job_file(&text, &IncludeDir::new(root())) {
        Ok(plan) => render(&plan),
        // The root is where the checkout is; the plan names it ROOT.
        Err(e) => format!("error: {e}\n").replace(&root().display().to_string(), "ROOT"),
    }
}

#[test]
fn every_corpus_job_file_plans_as_written() {
    let mut checked = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(root().join("jobs"))
        .expect("corpus exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("yaml"))
        .collect();
    entries.sort();
    for path in entries {
        let expected_path = path.with_extension("plan");
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|e| panic!("{}: no expected plan: {e}", expected_path.display()));
        let got = plan_text(&path);
        assert_eq!(got, expected, "{}", path.display());
        checked.push(path);
    }
    assert!(
        checked.len() >= 10,
        "the corpus has {} files",
        checked.len()
    );
}

#[test]
fn includes_cannot_leave_the_root() {
    for bad in [
        "<< : /etc/passwd\npipen:\n",
        "<< : ../../../../etc/passwd\npipen:\n",
    ] {
        let err = plan_job_file(bad, &IncludeDir::new(root())).expect_err("refused");
        assert!(err.to_string().contains("passwd"), "{err}");
    }
}
