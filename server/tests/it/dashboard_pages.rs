//! The dashboard's reading pages on real data: a watched branch run by
//! simulated agents through the agent API (one commit with a planted
//! regression, reported), and a hand-played agent in a second tbox group
//! that fails a build with a hostile log, completes a pair whose runs carry
//! a hostile metric name, and holds a running job. Then the overview,
//! machines, job log, comparison and trend pages are read as a person
//! would: the facts they must show, every hostile string escaped, and the
//! SVG plots parsed as XML with one mark per run and per commit.

use crate::sim;

use std::collections::BTreeMap;

use crate::sim::fleet::{Fleet, GROUP};
use crate::sim::{id, svgs, Sim, World, KPI, REPO};
use kbot_api::agent::{BootBackend, ResultUpload};
use kbot_testkit::agent::TestAgent;
use kbot_testkit::backends;
use serde_json::{json, Value};

const HOSTILE_SUBJECT: &str = "<script>alert(\"subject\")</script> pipe: & 'quoted'";
const HOSTILE_LOG: &str = "CC fs/pipe.o\n<script>evil()</script>\nerror: boom & <b>bust</b>";
const HOSTILE_METRIC: &str = "bw_pipe.<svg onload=alert(1)>.MB/sec";
const MANUAL_GROUP: &str = "manual-group";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reading_pages_show_what_a_reader_needs() {
    for backend in backends() {
        let world = World::new();
        let sim = Sim::start(backend, &world).await;
        let manual = Manual::play(&sim).await;
        let commits = watch_a_branch(&sim, &world).await;

        overview(&sim, &manual).await;
        machines(&sim, &manual).await;
        progress(&sim, &manual).await;
        comparison(&sim, &manual).await;
        trends(&sim, &commits).await;
        sim.stop().await;
    }
}

/// What the hand-played agent did.
struct Manual {
    pair: i64,
    /// The second pair, one job running, the others queued.
    second: i64,
    failed_job: i64,
    running_job: i64,
    base_runs: usize,
    head_runs: usize,
}

impl Manual {
    /// A user pair on `manual-group`: the first run fails its build with a
    /// hostile log, the others upload the KPI and a hostile metric; then a
    /// second pair whose first job stays `running`.
    async fn play(sim: &Sim<'_>) -> Manual {
        let e = sim
            .t
            .enroll_as("manual-1", MANUAL_GROUP, BootBackend::Qemu)
            .await;
        let agent = TestAgent {
            t: &sim.t,
            token: e.agent_token,
            id: e.agent_id,
        };
        let base = sim.world.repo.base.clone();
        let head = sim.world.repo.commit("pipe: manual head");
        let pair = sim.submit(&base, &head).await;
        let first = agent.lease().await.expect("a job");
        let building = json!({"state": "building", "detail": "make -j2"});
        assert_eq!(agent.event(first.job_id, building).await.status(), 204);
        let failed = json!({"state": "failed", "failure": "build_failed", "detail": HOSTILE_LOG});
        assert_eq!(agent.event(first.job_id, failed).await.status(), 204);
        // Serve the pair until it settles: an undecided verdict queues
        // more runs after an upload.
        let (mut base_runs, mut head_runs) = (0, 0);
        let mut i = 0.0;
        let deadline = std::time::Instant::now() + sim::DEADLINE;
        loop {
            if let Some(job) = agent.lease().await {
                i += 1.0;
                upload(&agent, job.job_id, 1000.0 + i).await;
                if job.commit == head {
                    head_runs += 1;
                } else {
                    base_runs += 1;
                }
            } else if sim.submission(pair).await["state"] == "done" {
                break;
            } else {
                assert!(
                    std::time::Instant::now() < deadline,
                    "pair {pair} never settled"
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        let second = sim.submit(&base, &head).await;
        let running = agent.lease().await.expect("a job of the second pair");
        assert_eq!(running.submission_id, second);
        for state in ["building", "booting", "running"] {
            let body = json!({"state": state, "detail": format!("{state} now")});
            assert_eq!(agent.event(running.job_id, body).await.status(), 204);
        }
        Manual {
            pair,
            second,
            failed_job: first.job_id,
            running_job: running.job_id,
            base_runs,
            head_runs,
        }
    }
}

async fn upload(agent: &TestAgent<'_>, job_id: i64, value: f64) {
    let upload = ResultUpload {
        metrics: BTreeMap::from([(KPI.to_owned(), value), (HOSTILE_METRIC.to_owned(), value)]),
        raw_output: "ok\n".into(),
        console: Some("console <script>tail()</script>\n".into()),
        kconfig: None,
        kernel_release: "6.1.0".into(),
        tuning: BTreeMap::new(),
        started_at: 1,
        finished_at: 2,
        profile: None,
    };
    let response = agent
        .t
        .http
        .put(agent.t.url(&format!("/api/v1/jobs/{job_id}/result")))
        .bearer_auth(&agent.token)
        .json(&upload)
        .send()
        .await
        .expect("upload");
    assert_eq!(response.status(), 200, "upload");
}

/// A watch on main; eight heads one at a time, from the fifth on 20%
/// slower (a report of an adjacent pair, then a new level), the second with
/// a hostile subject.
/// Returns the branch's tested commits, oldest first.
async fn watch_a_branch(sim: &Sim<'_>, world: &World) -> Vec<String> {
    let fleet = Fleet::enroll(sim, 2).await;
    let mut tested = vec![world.repo.git(&["rev-parse", "HEAD"]).trim().to_owned()];
    // The branch's parent of the first head is its base (the manual head).
    let first = world.repo.commit("pipe: watched 1");
    let body = json!({"repo": REPO, "branch": "main", "job_file": sim::JOB, "interval_secs": 1});
    let watch = id(&sim.post("/api/v1/watches", body, 201).await);
    let good_is = |sha: String| move |w: &Value| w["watch"]["last_good"] == sha;
    fleet
        .run_until(sim.watch_when(watch, good_is(first.clone())))
        .await;
    tested.push(first);
    for i in 2..=8 {
        let subject = match i {
            2 => HOSTILE_SUBJECT.to_owned(),
            _ => format!("pipe: watched {i}"),
        };
        let sha = world.repo.commit(&subject);
        // The fifth head and every one after it run 20% slower: a new level.
        if i >= 5 {
            world.model.plant(&world.repo, &sha, 0.8);
        }
        fleet
            .run_until(sim.watch_when(watch, good_is(sha.clone())))
            .await;
        tested.push(sha);
    }
    tested
}

pub(crate) async fn page(sim: &Sim<'_>, path: &str) -> String {
    let response = sim.t.http.get(sim.t.url(path)).send().await.expect("page");
    assert_eq!(response.status(), 200, "{path}");
    let html = response.text().await.expect("html");
    assert_escaped(&html, path);
    sim.keep_page(path, &html);
    // askama writes numeric character references, the SVG writer named
    // ones: one spelling for the assertions.
    html.replace("&#60;", "&lt;")
        .replace("&#62;", "&gt;")
        .replace("&#38;", "&amp;")
        .replace("&#34;", "&quot;")
}

/// No hostile string reaches a page unescaped.
fn assert_escaped(html: &str, path: &str) {
    for raw in [
        "<script>alert",
        "<script>evil",
        "<svg onload",
        "<b>bust",
        "<script>tail",
    ] {
        assert!(!html.contains(raw), "{path} carries {raw:?} unescaped");
    }
}

async fn overview(sim: &Sim<'_>, manual: &Manual) {
    let html = page(sim, "/").await;
    assert!(
        html.contains(GROUP) && html.contains(MANUAL_GROUP),
        "groups: {html}"
    );
    // The held job, in the phase its agent last posted.
    let running = section(&html, "id=\"running\"");
    assert!(
        running.contains(&format!("<td class=\"num\">{}</td>", manual.running_job)),
        "{running}"
    );
    assert!(running.contains("state-running\">running"), "{running}");
    assert!(running.contains("manual-1"), "{running}");
    // The second pair's other runs wait for the manual group.
    let queue = section(&html, "id=\"queue\"");
    assert!(queue.contains(MANUAL_GROUP), "{queue}");
    // The regression of the fifth head was reported.
    let reports = section(&html, "id=\"recent-reports\"");
    assert!(reports.contains("regression"), "{reports}");
    let one_group = page(sim, &format!("/?group={MANUAL_GROUP}")).await;
    assert!(
        !section(&one_group, "id=\"groups\"").contains(GROUP),
        "{one_group}"
    );
}

/// A pair under way says where it is in the queue and when it may be
/// done, at the pace the lab kept over the last hour.
async fn progress(sim: &Sim<'_>, manual: &Manual) {
    let html = page(sim, &format!("/submissions/{}", manual.second)).await;
    assert!(html.contains("<td id=\"queue\">"), "{html}");
    let eta = section(&html, "id=\"eta\"");
    assert!(
        eta.contains("runs to go at the") && eta.contains("the lab finished in the last hour"),
        "{eta}"
    );
    assert!(html.contains("http-equiv=\"refresh\""), "{html}");
    let done = page(sim, &format!("/submissions/{}", manual.pair)).await;
    assert!(!done.contains("id=\"eta\""), "{done}");
}

async fn machines(sim: &Sim<'_>, manual: &Manual) {
    let html = page(sim, "/machines").await;
    let table = section(&html, "id=\"machines\"");
    assert!(
        table.contains("manual-1") && table.contains("sim-0"),
        "{table}"
    );
    for fact in [
        "16 threads (2 sockets × 8 cores)",
        "NUMA nodes",
        "64G",
        "4K",
        "6.1.0-test",
        "x86_64",
    ] {
        assert!(table.contains(fact), "fingerprint lacks {fact}: {table}");
    }
    let failures = section(&html, "id=\"failures\"");
    assert!(failures.contains("build_failed"), "{failures}");
    let log_link = format!("/jobs/{}/log", manual.failed_job);
    assert!(failures.contains(&log_link), "{failures}");
    assert!(
        failures.contains("error: boom &amp; &lt;b&gt;bust&lt;/b&gt;"),
        "{failures}"
    );

    let log = page(sim, &log_link).await;
    assert!(log.contains("&lt;script&gt;evil()&lt;/script&gt;"), "{log}");
    assert!(
        log.contains("build_failed") && log.contains("make -j2"),
        "{log}"
    );

    let busy = page(sim, "/machines?status=busy").await;
    assert!(
        section(&busy, "id=\"machines\"").contains("manual-1"),
        "{busy}"
    );
    assert!(!busy.contains("sim-0"), "{busy}");
    let offline = page(sim, "/machines?status=offline").await;
    assert!(offline.contains("No agent matches"), "{offline}");
    let boot = page(sim, "/machines?kind=boot_failed").await;
    assert!(boot.contains("No failure of kind boot_failed"), "{boot}");
}

async fn comparison(sim: &Sim<'_>, manual: &Manual) {
    let path = format!("/submissions/{}/compare", manual.pair);
    let html = page(sim, &path).await;
    assert!(
        html.contains("&lt;svg onload=alert(1)&gt;"),
        "hostile metric shown escaped"
    );
    for svg in svgs(&html) {
        let doc = roxmltree::Document::parse(&svg).expect("the plot is XML");
        assert_eq!(count(&doc, "run base"), manual.base_runs, "{svg}");
        assert_eq!(count(&doc, "run head"), manual.head_runs, "{svg}");
        assert_eq!(count(&doc, "median"), 2, "{svg}");
        assert_eq!(count(&doc, "ratio"), 1, "{svg}");
    }
    assert_eq!(svgs(&html).len(), 2, "one plot per metric");
    assert!(html.contains("value per run (MB/s)"), "unit on the axis");
    assert!(
        html.contains("Why same:")
            || html.contains("Why unknown:")
            || html.contains("Why different:")
    );
    assert!(
        html.contains("Mann-Whitney U") && html.contains("Cliff"),
        "evidence"
    );
    let kpi_only = page(sim, &format!("{path}?metric=bandwidth")).await;
    assert_eq!(svgs(&kpi_only).len(), 1, "filtered by metric");
    let none = page(sim, &format!("{path}?verdict=different")).await;
    assert!(none.contains("No metric matches"), "{none}");
}

async fn trends(sim: &Sim<'_>, commits: &[String]) {
    let html = page(
        sim,
        &format!("/trends?repo={REPO}&branch=main&metric={KPI}"),
    )
    .await;
    let svg = svgs(&html).into_iter().next().expect("a trend plot");
    let doc = roxmltree::Document::parse(&svg).expect("the trend plot is XML");
    // Every tested commit is one point; the base of the first watch pair too.
    let points = count(&doc, "median");
    assert!(
        points == commits.len() || points == commits.len() + 1,
        "{points} points for {} commits",
        commits.len()
    );
    assert!(count(&doc, "run") >= 4 * points, "runs drawn");
    assert!(
        count(&doc, "changepoint") >= 1,
        "the 20% step is a change point: {svg}"
    );
    assert!(
        count(&doc, "linked") >= 1,
        "the report is linked from its commit"
    );
    assert!(svg.contains("href=\"/reports/"), "{svg}");
    let table = section(&html, "id=\"trend-table\"");
    assert!(
        table.contains("&lt;script&gt;alert"),
        "hostile subject escaped: {table}"
    );
    assert!(table.contains("▲"), "{table}");
    assert!(table.contains(&commits[commits.len() - 1][..10]), "{table}");
    // Zoom from the URL: the newest three commits.
    let from = &commits[commits.len() - 3][..10];
    let zoomed = page(
        sim,
        &format!("/trends?repo={REPO}&branch=main&metric={KPI}&from={from}"),
    )
    .await;
    let svg = svgs(&zoomed).into_iter().next().expect("a zoomed plot");
    let doc = roxmltree::Document::parse(&svg).expect("XML");
    assert_eq!(count(&doc, "median"), 3, "{svg}");
    let nothing = page(sim, "/trends?metric=no.such.metric").await;
    assert!(nothing.contains("No finished run"), "{nothing}");
    // The summaries the uploads kept (jobs::summaries::add_run) are what
    // the backfill computes from the stored results: the same page.
    let url = format!("/trends?repo={REPO}&branch=main&metric={KPI}");
    let kept = page(sim, &url).await;
    kbot_server::jobs::summaries::rebuild(sim.t.db())
        .await
        .expect("rebuild the summaries");
    assert_eq!(page(sim, &url).await, kept);
}

/// Elements whose class is exactly `class`.
fn count(doc: &roxmltree::Document, class: &str) -> usize {
    doc.descendants()
        .filter(|n| n.attribute("class") == Some(class))
        .count()
}

/// The page from `marker` to the end of its table or section.
fn section<'a>(html: &'a str, marker: &str) -> &'a str {
    let start = html
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} on the page: {html}"));
    let rest = &html[start..];
    let end = rest.find("</table>").unwrap_or(rest.len());
    &rest[..end]
}
