//! Bad input gets a clear JSON error with a stable code, and the meta routes.

use kbot_testkit::agent::{error_code, TestAgent};
use kbot_testkit::{backends, TestServer, ONE_JOB};

fn upload_json(metric_value: &str) -> String {
    format!(
        r#"{{"metrics": {{"bw_pipe.bandwidth.MB/sec": {metric_value}}}, "raw_output": "",
            "console": null, "kconfig": null, "kernel_release": "6.1", "tuning": {{}},
            "started_at": 1, "finished_at": 2}}"#
    )
}

#[tokio::test]
async fn malformed_and_non_finite_uploads_are_refused() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        t.seed("u", ONE_JOB, 1, 0).await;
        let a = TestAgent::enroll(&t, "a", "g").await;
        let job = a.lease().await.expect("job");
        let url = t.url(&format!("/api/v1/jobs/{}/result", job.job_id));
        let put = |body: String| {
            t.http
                .put(&url)
                .bearer_auth(&a.token)
                .header("content-type", "application/json")
                .body(body)
        };
        for bad in ["1e999", "-1e999", "NaN", "\"fast\""] {
            let response = put(upload_json(bad)).send().await.expect("upload");
            let (status, code) = error_code(response).await;
            assert_eq!(status, 400, "{bad}");
            assert!(
                code == "invalid_json" || code == "non_finite_metric",
                "{bad}: {code}"
            );
        }
        let response = put("{not json".into()).send().await.expect("upload");
        assert_eq!(error_code(response).await, (400, "invalid_json".into()));
        // Nothing was stored; a good upload still works.
        let stored: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM results")
            .fetch_one(t.db().read())
            .await
            .expect("count");
        assert_eq!(stored.0, 0);
        let response = put(upload_json("12.5")).send().await.expect("upload");
        assert_eq!(response.status(), 200, "{backend:?}");
        // Unknown job.
        let response = a.heartbeat(999_999).await;
        assert_eq!(error_code(response).await, (404, "not_found".into()));
        t.stop().await;
    }
}

#[tokio::test]
async fn oversized_bodies_get_json_413() {
    for backend in backends() {
        let t = TestServer::start_with(backend, |c| c.max_upload_bytes = 4096).await;
        t.seed("u", ONE_JOB, 1, 0).await;
        let a = TestAgent::enroll(&t, "a", "g").await;
        let job = a.lease().await.expect("job");
        let big = upload_json("1.0").replace(
            r#""raw_output": """#,
            &format!(r#""raw_output": "{}""#, "x".repeat(10_000)),
        );
        let response = t
            .http
            .put(t.url(&format!("/api/v1/jobs/{}/result", job.job_id)))
            .bearer_auth(&a.token)
            .header("content-type", "application/json")
            .body(big)
            .send()
            .await
            .expect("upload");
        assert_eq!(
            error_code(response).await,
            (413, "payload_too_large".into())
        );
        t.stop().await;
    }
}

/// A result with more metrics than a run can have is refused as too
/// large, however small its body; one within the limit is stored.
#[tokio::test]
async fn too_many_metrics_get_413() {
    use kbot_core::metrics::MAX_METRICS_PER_RESULT;
    for backend in backends() {
        let t = TestServer::start(backend).await;
        t.seed("u", ONE_JOB, 1, 0).await;
        let a = TestAgent::enroll(&t, "a", "g").await;
        let job = a.lease().await.expect("job");
        let url = t.url(&format!("/api/v1/jobs/{}/result", job.job_id));
        let metrics: Vec<String> = (0..=MAX_METRICS_PER_RESULT)
            .map(|i| format!(r#""m{i}": 1"#))
            .collect();
        let body =
            upload_json("1.0").replace(r#""bw_pipe.bandwidth.MB/sec": 1.0"#, &metrics.join(","));
        let put = |body: String| {
            t.http
                .put(&url)
                .bearer_auth(&a.token)
                .header("content-type", "application/json")
                .body(body)
                .send()
        };
        let response = put(body).await.expect("upload");
        assert_eq!(
            error_code(response).await,
            (413, "payload_too_large".into()),
            "{backend:?}"
        );
        let response = put(upload_json("1.0")).await.expect("upload");
        assert_eq!(response.status(), 200, "{backend:?}");
        t.stop().await;
    }
}

/// Names that reach the file system (a repo's mirror under the artifact
/// directory) cannot leave it, and path parameters that look like paths
/// are looked up, never opened.
#[tokio::test]
async fn path_traversal_in_names_is_refused() {
    let t = TestServer::start(kbot_testkit::Backend::Sqlite).await;
    let (_, token) = kbot_server::auth::create_user_token(t.db(), "u", None)
        .await
        .expect("user token");
    let artifacts = t.store.dir.path().join("artifacts");
    for name in [
        "../escape",
        "..",
        "a/../../escape",
        "/tmp/escape",
        "a\\..\\escape",
        ".git",
    ] {
        let response = t
            .http
            .post(t.url("/api/v1/repos"))
            .bearer_auth(&token)
            .json(&serde_json::json!({"name": name, "url": "/nonexistent"}))
            .send()
            .await
            .expect("register");
        assert_eq!(error_code(response).await.0, 400, "{name}");
    }
    let outside = t.store.dir.path().join("escape.git");
    assert!(!outside.exists() && !artifacts.join("escape.git").exists());
    for path in [
        "/reports/..%2F..%2Fetc%2Fpasswd/mbox",
        "/archive/..%2F..%2Fetc/passwd",
        "/api/v1/reports/..%2F..%2Fkbot.db",
    ] {
        let response = t.http.get(t.url(path)).send().await.expect("get");
        assert_eq!(response.status(), 404, "{path}");
    }
    t.stop().await;
}

#[tokio::test]
async fn openapi_and_health() {
    let t = TestServer::start(kbot_testkit::Backend::Sqlite).await;
    let doc: serde_json::Value = t
        .http
        .get(t.url("/api/openapi.json"))
        .send()
        .await
        .expect("openapi")
        .json()
        .await
        .expect("openapi JSON");
    assert!(doc["openapi"]
        .as_str()
        .unwrap_or_default()
        .starts_with("3."));
    for path in [
        "/api/v1/agents/enroll",
        "/api/v1/agents/lease",
        "/api/v1/jobs/{id}/result",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} missing");
    }
    let health = t.http.get(t.url("/healthz")).send().await.expect("health");
    assert_eq!(health.status(), 200);
    let missing = t.http.get(t.url("/api/v1/nope")).send().await.expect("404");
    assert_eq!(missing.status(), 404);
    t.stop().await;
}

/// A stored job this server cannot read (say one a newer replica wrote
/// during an upgrade) is failed at lease time with the reason, after its
/// attempts; the agent gets no error and leases the next job.
#[tokio::test]
async fn a_stored_job_that_cannot_be_prepared_fails_and_the_lease_goes_on() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let broken = t.seed("u", ONE_JOB, 1, 10).await;
        let good = t.seed("u", ONE_JOB, 1, 0).await;
        for id in &broken.atomic_job_ids {
            sqlx::query("UPDATE atomic_jobs SET spec = $1 WHERE id = $2")
                .bind(r#"{"testcase": 7}"#)
                .bind(id)
                .execute(t.db().write())
                .await
                .expect("break the spec");
        }
        let a = TestAgent::enroll(&t, "a", "g").await;
        let job = a.lease().await.expect("the good submission's job");
        assert_eq!(job.submission_id, good.submission_id, "{backend:?}");
        let rows: Vec<(String, Option<String>, Option<String>, i64)> = sqlx::query_as(
            "SELECT state, failure, failure_detail, attempts FROM jobs WHERE submission_id = $1",
        )
        .bind(broken.submission_id)
        .fetch_all(t.db().read())
        .await
        .expect("jobs");
        assert!(!rows.is_empty());
        for (state, failure, detail, attempts) in &rows {
            assert_eq!(state, "failed", "{backend:?}: {rows:?}");
            assert_eq!(failure.as_deref(), Some("infrastructure"), "{rows:?}");
            let detail = detail.as_deref().unwrap_or_default();
            assert!(
                detail.starts_with("cannot prepare job: stored atomic job is not valid"),
                "{detail}"
            );
            assert_eq!(*attempts, 3, "failed after its attempts: {rows:?}");
        }
        t.stop().await;
    }
}
