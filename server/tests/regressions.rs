//! The regressions list over HTTP, on both backends: filters from the URL,
//! pages of 50, and the triage form's refusals.

mod common;

use common::{backends, TestServer};
use kbot_server::regressions::{record, NewRegression};

/// Records `n` regressions of one seeded pair, metrics `m00`, `m01`, ...;
/// the even ones on tbox group `even`.
async fn regressions(t: &TestServer, n: usize) {
    let seeded = t.seed("dev", common::ONE_JOB, 1, 0).await;
    let (repo_id,): (i64,) = sqlx::query_as("SELECT repo_id FROM submissions WHERE id = $1")
        .bind(seeded.submission_id)
        .fetch_one(t.db().read())
        .await
        .expect("repo");
    let mut tx = t.db().begin().await.expect("tx");
    for i in 0..n {
        let metric = format!("m{i:02}");
        let r = NewRegression {
            repo_id,
            submission_id: seeded.submission_id,
            atomic_job_id: seeded.atomic_job_ids[0],
            metric: &metric,
            tbox_group: if i % 2 == 0 { "even" } else { "odd" },
            change_pct: Some(-10.0),
            bisection_id: None,
            report_id: None,
        };
        assert!(record(&mut tx, &r).await.expect("record").is_some());
        // The same job's metric again is the same regression.
        assert!(record(&mut tx, &r).await.expect("record").is_none());
    }
    tx.commit().await.expect("commit");
}

async fn page(t: &TestServer, query: &str) -> String {
    let response = t
        .http
        .get(t.url(&format!("/regressions{query}")))
        .send()
        .await;
    let response = response.expect("GET");
    assert_eq!(response.status(), 200, "{query}");
    response.text().await.expect("page")
}

/// Rows of the list: links to a regression.
fn rows(html: &str) -> usize {
    html.matches("<td><a href=\"/regressions/").count()
}

#[tokio::test]
async fn the_list_filters_from_the_url_and_pages() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        regressions(&t, 53).await;

        let first = page(&t, "").await;
        assert_eq!(rows(&first), 50, "{backend:?}");
        assert!(
            first.contains("m52") && !first.contains("<code>m02</code>"),
            "newest first"
        );
        assert!(first.contains("href=\"/regressions?page=2\""), "{first}");
        let second = page(&t, "?page=2").await;
        assert_eq!(rows(&second), 3, "{backend:?}");
        assert!(second.contains("href=\"/regressions?page=1\"") && !second.contains("id=\"next\""));

        let even = page(&t, "?tbox_group=even").await;
        assert_eq!(rows(&even), 27, "{backend:?}");
        let one = page(&t, "?metric=m07&tbox_group=odd&state=new&repo=linux").await;
        assert_eq!(rows(&one), 1, "{backend:?}: {one}");
        let none = page(&t, "?metric=m07&tbox_group=even").await;
        assert_eq!(rows(&none), 0, "{backend:?}");
        // Paging keeps the filters.
        let filtered = page(&t, "?state=new&page=1").await;
        assert!(
            filtered.contains("href=\"/regressions?state=new&#38;page=2\""),
            "{filtered}"
        );

        // Not signed in: the triage form is not offered, and a post is refused.
        let show = page(&t, "/1").await;
        assert!(
            show.contains("to triage") && !show.contains("id=\"triage\""),
            "{show}"
        );
        let post = t
            .http
            .post(t.url("/regressions/1/state"))
            .form(&[("state", "fixed")]);
        assert_eq!(post.send().await.expect("POST").status(), 403);
        t.stop().await;
    }
}
