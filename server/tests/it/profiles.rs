//! Kernel profiles uploaded with results, on SQLite and PostgreSQL: stored
//! in the upload's transaction and once, a malformed one refused with
//! nothing stored; a pair's profile page names the symbol that grew as its
//! top mover and draws it in a differential flame graph (SVG); a pair
//! without profiles says so, and its SVG is a 404 page; a bisection step's
//! page compares the good end with the tested commit.

use kbot_api::agent::{FoldedProfile, LeasedJob, ResultUpload, UploadResponse};
use kbot_load::seed;
use kbot_testkit::agent::{error_code, TestAgent};
use kbot_testkit::{backends, TestServer};
use std::collections::BTreeMap;

/// One atomic job.
pub(crate) const JOB_FILE: &str = "testcase: bw_pipe\nbw_pipe:\n  size: 64k\n";

/// The symbol the head makes grow.
const GROWN: &str = "pipe_read";

/// `seed::submission`'s head commit.
fn head_sha() -> String {
    format!("{:040x}", 0xb1)
}

/// Folded stacks of a pipe workload; at the head, `pipe_read` takes six
/// times the samples of the base for its own code.
fn profile(head: bool) -> FoldedProfile {
    let own = if head { 60 } else { 10 };
    let folded = format!(
        "entry_SYSCALL_64;do_syscall_64;ksys_read;vfs_read;{GROWN} {own}\n\
         entry_SYSCALL_64;do_syscall_64;ksys_read;vfs_read;{GROWN};copy_page_to_iter 50\n\
         entry_SYSCALL_64;do_syscall_64;ksys_write;vfs_write;pipe_write 40\n\
         \n\
         worker_thread;schedule 30\n"
    );
    FoldedProfile {
        event: "cpu-clock".into(),
        folded,
    }
}

/// A result with `profile`.
pub(crate) fn upload(profile: Option<FoldedProfile>) -> ResultUpload {
    ResultUpload {
        metrics: BTreeMap::from([("bw_pipe.bandwidth.MB/sec".to_owned(), 1000.0)]),
        raw_output: "ok\n".into(),
        console: None,
        kconfig: None,
        kernel_release: "6.1.0".into(),
        tuning: BTreeMap::new(),
        started_at: 1,
        finished_at: 2,
        profile,
    }
}

struct Page {
    status: u16,
    content_type: String,
    body: String,
}

async fn get(t: &TestServer, path: &str) -> Page {
    let response = t.http.get(t.url(path)).send().await.expect("GET");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.text().await.expect("body");
    Page {
        status,
        content_type,
        body,
    }
}

/// The symbols of the table `id`, in its order.
fn table_symbols(html: &str, id: &str) -> Vec<String> {
    let start = html
        .find(&format!("<table id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no table {id}: {html}"));
    let table = &html[start..];
    let table = &table[..table.find("</table>").expect("table end")];
    table
        .split("<tr><td><code>")
        .skip(1)
        .map(|row| row[..row.find("</code>").expect("code end")].to_owned())
        .collect()
}

/// The position of submission `sub`'s one atomic job.
pub(crate) async fn position(t: &TestServer, sub: i64) -> i64 {
    sqlx::query_scalar("SELECT position FROM atomic_jobs WHERE submission_id = $1")
        .bind(sub)
        .fetch_one(t.db().read())
        .await
        .expect("position")
}

async fn count(t: &TestServer, sql: &str, id: i64) -> i64 {
    sqlx::query_scalar(sql)
        .bind(id)
        .fetch_one(t.db().read())
        .await
        .expect("count")
}

async fn stored(agent: &TestAgent<'_>, job: &LeasedJob, body: &ResultUpload) -> UploadResponse {
    let response = agent.put_result(job.job_id, body).await;
    assert_eq!(response.status(), 200, "upload of job {}", job.job_id);
    response.json().await.expect("upload body")
}

#[tokio::test]
async fn profiles_are_stored_once_and_compared_base_against_head() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let seeded = seed::submission(t.db(), "linux", "alice", JOB_FILE, 2, 0)
            .await
            .expect("seed");
        let sub = seeded.submission_id;
        let position = position(&t, sub).await;
        let page_path = format!("/submissions/{sub}/jobs/{position}/profile");
        let svg_path = format!("{page_path}.svg");

        // Before any run: the page says the runs are not in yet, the graph
        // is a 404 page.
        let none = get(&t, &page_path).await;
        assert_eq!(none.status, 200, "{backend:?}: {}", none.body);
        assert!(
            none.body
                .contains("No profile yet: 4 runs of this pair are still queued or under way."),
            "{backend:?}: {}",
            none.body
        );
        let missing = get(&t, &svg_path).await;
        assert_eq!(missing.status, 404, "{backend:?}");
        assert!(missing.content_type.starts_with("text/html"), "{backend:?}");
        assert!(
            missing.body.contains("no profile was taken"),
            "{}",
            missing.body
        );

        let agent = TestAgent::enroll(&t, "box-1", "lkp-test").await;
        let first = agent.lease().await.expect("a job");

        // A malformed profile is refused, and nothing of the result stored.
        let mut bad = profile(first.commit == head_sha());
        bad.folded.push_str("entry_SYSCALL_64;oops many\n");
        let refused = agent.put_result(first.job_id, &upload(Some(bad))).await;
        let (status, code) = error_code(refused).await;
        assert_eq!((status, code.as_str()), (400, "bad_request"), "{backend:?}");
        let results = "SELECT COUNT(*) FROM results WHERE job_id = $1";
        assert_eq!(count(&t, results, first.job_id).await, 0, "{backend:?}");
        let profiles = "SELECT COUNT(*) FROM result_profiles p \
                        JOIN results r ON r.id = p.result_id WHERE r.job_id = $1";
        assert_eq!(count(&t, profiles, first.job_id).await, 0, "{backend:?}");

        // Stored, then the same upload again: one result, one profile.
        let body = upload(Some(profile(first.commit == head_sha())));
        let once = stored(&agent, &first, &body).await;
        assert!(once.stored, "{backend:?}");
        let again = stored(&agent, &first, &body).await;
        assert!(!again.stored, "{backend:?}");
        assert_eq!(again.result_id, once.result_id);
        assert_eq!(count(&t, profiles, first.job_id).await, 1, "{backend:?}");
        // ... and downloaded as it was sent.
        let path = format!("/api/v1/jobs/{}/profile", first.job_id);
        let response = t.http.get(t.url(&path)).send().await.expect("GET");
        assert_eq!(response.status(), 200, "{backend:?}");
        assert_eq!(response.headers()["kbot-profile-event"], "cpu-clock");
        let text = response.text().await.expect("text");
        assert!(
            text.contains("ksys_write;vfs_write;pipe_write 40\n"),
            "{text}"
        );
        let unknown = t
            .http
            .get(t.url("/api/v1/jobs/999999/profile"))
            .send()
            .await;
        assert_eq!(unknown.expect("GET").status(), 404, "{backend:?}");

        // The other three runs of the pair.
        for _ in 0..3 {
            let job = agent.lease().await.expect("a job of the pair");
            assert_eq!(job.submission_id, sub);
            stored(
                &agent,
                &job,
                &upload(Some(profile(job.commit == head_sha()))),
            )
            .await;
        }
        let all = "SELECT COUNT(*) FROM result_profiles p JOIN results r ON r.id = p.result_id \
                   JOIN jobs j ON j.id = r.job_id WHERE j.submission_id = $1";
        assert_eq!(count(&t, all, sub).await, 4, "{backend:?}");

        let page = get(&t, &page_path).await;
        assert_eq!(page.status, 200, "{backend:?}: {}", page.body);
        assert!(!page.body.contains("No profile was taken"), "{}", page.body);
        let movers = table_symbols(&page.body, "movers-self");
        assert_eq!(
            movers.first().map(String::as_str),
            Some(GROWN),
            "{movers:?}"
        );
        assert!(movers.len() <= 15, "{movers:?}");
        let children = table_symbols(&page.body, "movers-children");
        assert!(children.iter().any(|s| s == "ksys_read"), "{children:?}");
        assert!(
            page.body.contains(&format!("src=\"{svg_path}\"")),
            "{}",
            page.body
        );

        let svg = get(&t, &svg_path).await;
        assert_eq!(svg.status, 200, "{backend:?}: {}", svg.body);
        assert_eq!(svg.content_type, "image/svg+xml", "{backend:?}");
        // inferno writes the SVG 1.1 DOCTYPE.
        let options = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        let doc =
            roxmltree::Document::parse_with_options(&svg.body, options).expect("the graph is XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert!(
            svg.body.contains(GROWN),
            "{backend:?}: the graph names {GROWN}"
        );
        assert!(
            !svg.body.contains("<script"),
            "{backend:?}: a script in the graph"
        );

        // The comparison page links the profile page.
        let compare = get(&t, &format!("/submissions/{sub}/compare")).await;
        assert!(
            compare.body.contains(&format!("href=\"{page_path}\"")),
            "{}",
            compare.body
        );

        bisection_step(&t, &seeded).await;
        t.stop().await;
    }
}

/// A bisection whose only step tested the pair's head, its good end the
/// pair's base (rows written as the bisector would leave them, concluded so
/// that its worker leaves it alone).
async fn bisection_step(t: &TestServer, seeded: &seed::Seeded) {
    let (repo_id, atomic_job_id): (i64, i64) = sqlx::query_as(
        "SELECT s.repo_id, a.id FROM submissions s JOIN atomic_jobs a ON a.submission_id = s.id \
         WHERE s.id = $1",
    )
    .bind(seeded.submission_id)
    .fetch_one(t.db().read())
    .await
    .expect("pair");
    let bisection: i64 = sqlx::query_scalar(
        "INSERT INTO bisections (repo_id, origin_submission_id, origin_atomic_job_id, \
             probe_submission_id, probe_atomic_job_id, good_commit_id, bad_commit_id, metric, \
             tbox_group, job_key, dedup_key, state, runs_cap, created_at, finished_at) \
         VALUES ($1, $2, $3, $2, $3, $4, $5, 'bw_pipe.bandwidth.MB/sec', 'lkp-test', \
             'bw_pipe/64k', 'profile-test', 'inconclusive', 6, 1, 2) RETURNING id",
    )
    .bind(repo_id)
    .bind(seeded.submission_id)
    .bind(atomic_job_id)
    .bind(seeded.base_commit_id)
    .bind(seeded.head_commit_id)
    .fetch_one(t.db().write())
    .await
    .expect("bisection");
    sqlx::query(
        "INSERT INTO bisection_steps (bisection_id, idx, commit_id, state, started_at) \
         VALUES ($1, 1, $2, 'bad', 1)",
    )
    .bind(bisection)
    .bind(seeded.head_commit_id)
    .execute(t.db().write())
    .await
    .expect("step");

    let path = format!("/bisections/{bisection}/steps/1/profile");
    let page = get(t, &path).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let movers = table_symbols(&page.body, "movers-self");
    assert_eq!(
        movers.first().map(String::as_str),
        Some(GROWN),
        "{movers:?}"
    );
    let svg = get(t, &format!("{path}.svg")).await;
    assert_eq!(svg.status, 200);
    assert_eq!(svg.content_type, "image/svg+xml");
    assert!(svg.body.contains(GROWN));
    let show = get(t, &format!("/bisections/{bisection}")).await;
    assert!(
        show.body.contains(&format!("href=\"{path}\"")),
        "{}",
        show.body
    );
    let unknown = get(t, &format!("/bisections/{bisection}/steps/9/profile")).await;
    assert_eq!(unknown.status, 404);
    assert!(unknown.content_type.starts_with("text/html"));
}
