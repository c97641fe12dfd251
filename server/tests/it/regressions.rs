//! The regressions list over HTTP, on both backends: filters from the URL,
//! pages of 50, and the triage form's refusals; the same list and triage
//! through the JSON API.

use kbot_server::regressions::{record, NewRegression};
use kbot_testkit::{backends, TestServer};

/// Records `n` regressions of one seeded pair, metrics `m00`, `m01`, ...;
/// the even ones on tbox group `even`.
async fn regressions(t: &TestServer, n: usize) {
    let seeded = t.seed("dev", kbot_testkit::ONE_JOB, 1, 0).await;
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

async fn api_list(t: &TestServer, query: &str) -> (u16, serde_json::Value) {
    let response = t
        .http
        .get(t.url(&format!("/api/v1/regressions{query}")))
        .send()
        .await
        .expect("GET");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

fn metrics(list: &serde_json::Value) -> Vec<&str> {
    list.as_array()
        .expect("a JSON array")
        .iter()
        .filter_map(|r| r["metric"].as_str())
        .collect()
}

/// The API lists what the page lists, with the same filters, and a user
/// token changes the state, which the history records with the user; no
/// token, a bad state or an unknown regression are refused.
#[tokio::test]
async fn the_api_lists_and_triages() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        regressions(&t, 53).await;

        let (status, all) = api_list(&t, "").await;
        assert_eq!(status, 200, "{backend:?}");
        assert_eq!(metrics(&all).len(), 50, "default limit");
        assert_eq!(metrics(&all)[0], "m52", "newest first");
        let (_, rest) = api_list(&t, "?limit=10&offset=50").await;
        assert_eq!(metrics(&rest), ["m02", "m01", "m00"], "{backend:?}");
        let (_, even) = api_list(&t, "?tbox_group=even&limit=500").await;
        assert_eq!(metrics(&even).len(), 27, "{backend:?}");
        let (_, one) = api_list(&t, "?metric=m07&tbox_group=odd&state=new&repo=linux").await;
        assert_eq!(metrics(&one), ["m07"], "{backend:?}: {one}");
        let id = one[0]["id"].as_i64().expect("an id");
        assert_eq!(one[0]["state"], "new");
        let (status, _) = api_list(&t, "?state=fixd").await;
        assert_eq!(status, 400, "{backend:?}: a misspelt state");

        let (_, token) = kbot_server::auth::create_user_token(t.db(), "nia", None)
            .await
            .expect("token");
        let url = t.url(&format!("/api/v1/regressions/{id}/state"));
        let body = serde_json::json!({"state": "confirmed", "note": "seen on two boxes"});
        let anonymous = t.http.post(&url).json(&body).send().await.expect("POST");
        assert_eq!(anonymous.status(), 401, "{backend:?}");
        let bad = t.http.post(&url).bearer_auth(&token);
        let bad = bad.json(&serde_json::json!({"state": "done"})).send().await;
        assert_eq!(bad.expect("POST").status(), 400, "{backend:?}");
        let missing = t.http.post(t.url("/api/v1/regressions/999999/state"));
        let missing = missing.bearer_auth(&token).json(&body).send().await;
        assert_eq!(missing.expect("POST").status(), 404, "{backend:?}");

        let ok = t
            .http
            .post(&url)
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await;
        let ok = ok.expect("POST");
        assert_eq!(ok.status(), 200, "{backend:?}");
        let changed: serde_json::Value = ok.json().await.expect("JSON");
        assert_eq!(changed["state"], "confirmed");
        assert_eq!(changed["id"], id);
        let (_, confirmed) = api_list(&t, "?state=confirmed").await;
        assert_eq!(metrics(&confirmed), ["m07"], "{backend:?}");
        let history = kbot_server::regressions::history(t.db(), id)
            .await
            .expect("history");
        assert_eq!(history.len(), 1, "{backend:?}");
        assert_eq!(history[0].user.as_deref(), Some("nia"));
        assert_eq!(history[0].note, "seen on two boxes");
        assert_eq!(
            (history[0].from_state.as_str(), history[0].to_state.as_str()),
            ("new", "confirmed")
        );
        t.stop().await;
    }
}
