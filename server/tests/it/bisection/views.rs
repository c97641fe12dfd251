//! The bisection, step, report and watch views against their contract:
//! every documented key present, and the samples agreeing with the counts.

use super::*;

const BISECTION_KEYS: &[&str] = &[
    "id",
    "repo",
    "state",
    "good",
    "bad",
    "metric",
    "tbox_group",
    "job_name",
    "origin_submission",
    "verify_submission",
    "first_bad",
    "report_id",
    "duplicate_of",
    "reason",
    "remaining",
    "steps",
    "builds",
    "runs",
    "wall_secs",
    "created_at",
    "finished_at",
];
const STEP_KEYS: &[&str] = &[
    "index",
    "sha",
    "subject",
    "state",
    "runs",
    "failed_runs",
    "failure",
    "change_percent",
    "samples",
    "started_at",
    "finished_at",
];
const REPORT_KEYS: &[&str] = &[
    "id",
    "kind",
    "subject",
    "state",
    "bisection_id",
    "submission_id",
    "recipients",
    "created_at",
    "sent_at",
];
const WATCH_KEYS: &[&str] = &[
    "id",
    "repo",
    "branch",
    "job_name",
    "tbox_group",
    "interval_secs",
    "state",
    "last_seen",
    "last_tested",
    "last_good",
    "current_submission",
    "last_error",
    "checked_at",
    "created_at",
];

const DETAIL_KEYS: &[&str] = &["bisection", "good_samples", "bad_samples", "steps"];

/// The samples the detail gives agree with its counts and with the planted
/// slowdown: every finished run has its value, the ends are apart by the
/// slowdown, and each decided step sits with the end its verdict names.
fn sample_problems(problems: &mut Vec<String>, d: &Value, first_bad: &str) {
    let values = |v: &Value| -> Vec<f64> {
        v.as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (good, bad) = (values(&d["good_samples"]), values(&d["bad_samples"]));
    if good.is_empty() || bad.is_empty() || mean(&bad) > mean(&good) * 0.9 {
        problems.push(format!("ends' samples: good {good:?}, bad {bad:?}"));
        return;
    }
    let middle = (mean(&good) + mean(&bad)) / 2.0;
    for s in steps(d) {
        let at = values(&s["samples"]);
        if at.len() as u64 != s["runs"].as_u64().unwrap_or(u64::MAX) {
            problems.push(format!("step samples {at:?} for {} runs", s["runs"]));
        }
        let near_bad = mean(&at) < middle;
        let verdict = str_of(&s["state"]);
        if matches!(verdict, "good" | "bad") && near_bad != (verdict == "bad") {
            problems.push(format!(
                "a {verdict} step's samples {at:?} sit by the other end"
            ));
        }
        if s["sha"] == first_bad && verdict != "bad" {
            problems.push(format!("the planted commit's step is {verdict}"));
        }
    }
}

/// The fields of `keys` that `v` lacks, as one line of `problems`.
fn check_keys(problems: &mut Vec<String>, what: &str, v: &Value, keys: &[&str]) {
    let missing: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| v.get(k).is_none())
        .collect();
    if !missing.is_empty() {
        problems.push(format!("{what} lacks {missing:?}: {v}"));
    }
}

/// The JSON of bisections, steps, reports, submissions and watches has the
/// fields /tmp/robot-contract.md gives them, and the links between them
/// hold. Every deviation is listed in the one failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_views_follow_the_contract() {
    let world = World::new();
    let shas = world.range("contract", 4);
    world.model.plant(&world.repo, &shas[2], SLOWER);
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let fleet = Fleet::enroll(&sim, 1).await;
        let d = sim.bisect(&fleet, &world.repo.base, &shas[3]).await;
        let mut problems = Vec::new();
        let b = bisection(&d);
        check_keys(&mut problems, "BisectionView", b, BISECTION_KEYS);
        check_keys(&mut problems, "BisectionDetail", &d, DETAIL_KEYS);
        for s in steps(&d) {
            check_keys(&mut problems, "StepView", s, STEP_KEYS);
        }
        sample_problems(&mut problems, &d, &shas[2]);
        for (field, kind) in [
            ("origin_submission", "user"),
            ("verify_submission", "verify"),
        ] {
            let sub = b[field].as_i64().unwrap_or_else(|| panic!("{field}: {b}"));
            assert_eq!(str_of(&sim.submission(sub).await["kind"]), kind, "{field}");
        }
        let reports = sim.reports().await;
        let report = expect_reported(&reports, &d, &shas[2]);
        check_keys(&mut problems, "report", report, REPORT_KEYS);
        if b["report_id"] != report["id"] {
            let ids = (&b["report_id"], &report["id"]);
            problems.push(format!(
                "report_id {} is not the report's id {}",
                ids.0, ids.1
            ));
        }
        let path = format!("/api/v1/reports/{}", report["id"]);
        let (status, full) = sim.fetch(&path).await;
        if status != 200 || full["id"] != report["id"] || !full["message"].is_string() {
            problems.push(format!("GET {path}: {status} {full}"));
        }

        // The dashboard's page of the bisection: its path through the range.
        let page = sim.t.http.get(sim.t.url(&format!("/bisections/{}", id(b))));
        let page = page
            .send()
            .await
            .expect("GET page")
            .text()
            .await
            .expect("page");
        let first_bad: String = shas[2].chars().take(12).collect();
        let probe_link = format!("href=\"/submissions/{}\"", b["probe_submission"]);
        let wanted = [
            "<table id=\"steps\">",
            "state-bad",
            first_bad.as_str(),
            "id=\"path-plot\"",
            "good median",
            "bad median",
            probe_link.as_str(),
        ];
        for want in wanted {
            if !page.contains(want) {
                problems.push(format!("/bisections/{}: no {want:?}", id(b)));
            }
        }
        sim.keep_page(&format!("/bisections/{}", id(b)), &page);
        // The path plot is XML with one mark per sample the API gives and a
        // row per step between the ends.
        let plot = svgs(&page)
            .into_iter()
            .find(|s| s.contains("id=\"path-plot\""));
        let plot = plot.unwrap_or_default();
        match roxmltree::Document::parse(&plot) {
            Ok(doc) => {
                let marks = doc
                    .descendants()
                    .filter(|n| n.attribute("class").is_some_and(|c| c.starts_with("run ")))
                    .count();
                let samples = |v: &Value| v.as_array().map_or(0, Vec::len);
                let in_api = samples(&d["good_samples"])
                    + samples(&d["bad_samples"])
                    + steps(&d)
                        .iter()
                        .map(|s| samples(&s["samples"]))
                        .sum::<usize>();
                if marks != in_api {
                    problems.push(format!("the plot has {marks} marks for {in_api} samples"));
                }
                for s in steps(&d) {
                    let row = format!("step {}", s["index"]);
                    if !plot.contains(&row) {
                        problems.push(format!("the plot has no row {row:?}"));
                    }
                }
            }
            Err(e) => problems.push(format!("the path plot is not XML ({e}): {plot}")),
        }

        let body = json!({"repo": REPO, "branch": "main", "job_file": sim::JOB});
        let watch = sim.post("/api/v1/watches", body, 201).await;
        check_keys(&mut problems, "WatchView", &watch, WATCH_KEYS);
        assert_eq!(watch["interval_secs"], 600, "{watch}");
        let detail = sim.get(&format!("/api/v1/watches/{}", id(&watch))).await;
        check_keys(&mut problems, "watch detail", &detail, &["watch", "events"]);
        let all = list(sim.get("/api/v1/watches").await);
        assert!(all.iter().any(|w| w["id"] == watch["id"]), "{all:#?}");
        sim.stop().await;
        assert!(problems.is_empty(), "{backend:?}:\n{}", problems.join("\n"));
    }
}
