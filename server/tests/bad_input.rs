//! Bad input gets a clear JSON error with a stable code, and the meta routes.

mod common;

use common::agent::{error_code, TestAgent};
use common::{backends, TestServer, ONE_JOB};

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

#[tokio::test]
async fn openapi_and_health() {
    let t = TestServer::start(common::Backend::Sqlite).await;
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
