//! The OpenAPI document the server serves at `/api/openapi.json`, checked
//! against the server itself:
//! - every route of the route table under `/api`, with each of its methods,
//!   is in the document, nothing else is, and the router answers exactly
//!   those;
//! - a real OpenAPI 3.1 validator (`openapi-spec-validator`) accepts it;
//! - a Python client generated from it (`openapi-python-client`) registers a
//!   repo, submits a job file from jobs/, plays the agent and reads the
//!   results back (server/tests/openapi_client.py).
//!
//! The two tools come from PyPI (`scripts/install-test-deps` installs them).
//! Without them the tests that need them are skipped with a notice, except
//! under CI, where a missing tool fails the test.

use kbot_testkit::gitrepo;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use kbot_api::submissions::SubmissionResults;
use kbot_testkit::{backends, Backend, TestServer};
use serde_json::Value;

const VALIDATOR: &str = "openapi-spec-validator";
const GENERATOR: &str = "openapi-python-client";
/// Methods probed on every `/api` path (HEAD and OPTIONS are axum's own).
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// The document as served.
async fn document_bytes(t: &TestServer) -> Vec<u8> {
    let response = t
        .http
        .get(t.url("/api/openapi.json"))
        .send()
        .await
        .expect("GET /api/openapi.json");
    assert_eq!(response.status(), 200);
    let body = response.bytes().await.expect("the document");
    body.to_vec()
}

async fn document(t: &TestServer) -> Value {
    serde_json::from_slice(&document_bytes(t).await).expect("the document is JSON")
}

/// (method, path) of the route table's routes under `/api`, in OpenAPI form
/// (`{*rev}` is `{rev}`).
fn route_table_operations() -> BTreeSet<(String, String)> {
    kbot_server::routes::route_list()
        .into_iter()
        .filter(|(_, path)| path.starts_with("/api/"))
        .map(|(method, path)| (method, path.replace("{*", "{")))
        .collect()
}

/// `path` with every `{param}` replaced by `1`.
fn concrete(path: &str) -> String {
    let mut out = String::new();
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_param = true;
                out.push('1');
            }
            '}' => in_param = false,
            _ if !in_param => out.push(c),
            _ => {}
        }
    }
    out
}

#[tokio::test]
async fn every_api_route_is_in_the_document() {
    let t = TestServer::start(Backend::Sqlite).await;
    let doc = document(&t).await;
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, item)| {
            let methods = item.as_object().expect("path item").keys();
            methods.map(|m| (m.to_uppercase(), path.clone()))
        })
        .collect();
    let operations = route_table_operations();
    assert!(
        operations.len() > 20,
        "the route table reads as {operations:?}"
    );
    assert_eq!(
        operations, documented,
        "the /api routes of the route table (left) and the document's operations (right) differ"
    );
    let table: BTreeSet<&String> = operations.iter().map(|(_, path)| path).collect();

    // Which methods the router answers on each path: axum says 405 for a
    // path it routes without that method. Nothing probed has an effect:
    // writes without a token or a body are refused before any work.
    let mut routed = BTreeSet::new();
    // Whether the router wanted a token: a tokenless request gets 401.
    let mut wants_token = BTreeSet::new();
    for path in table {
        for method in METHODS {
            let request = t
                .http
                .request(method.parse().expect("method"), t.url(&concrete(path)));
            let response = request.send().await.expect("probe");
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            // The dashboard's fallback 404 page means no route matched.
            let fallback = status == 404 && content_type.starts_with("text/html");
            if status != 405 && !fallback {
                routed.insert((method.to_owned(), path.clone()));
            }
            if status == 401 {
                wants_token.insert((method.to_owned(), path.clone()));
            }
            // Every error an operation answers is the documented ErrorBody,
            // axum's own rejections (a bad query string, ...) included.
            if status >= 400 && status != 405 && !fallback {
                let body: Value = response.json().await.unwrap_or_default();
                assert!(
                    body["error"]["code"].is_string() && body["error"]["message"].is_string(),
                    "{method} {path}: {status} {content_type} is not an ErrorBody: {body}"
                );
            }
        }
    }
    // The wildcard `{*rev}` is the path parameter `rev`, and says it may
    // hold `/` (OpenAPI has no multi-segment parameters).
    let rev = doc["paths"]["/api/v1/repos/{name}/commits/{rev}"]["get"]["parameters"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "rev"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (rev["in"].as_str(), rev["required"].as_bool()),
        (Some("path"), Some(true)),
        "{rev}"
    );
    assert!(
        rev["description"].as_str().is_some_and(|d| d.contains('/')),
        "{rev}"
    );
    let not_a_number = t.http.get(t.url("/api/v1/submissions/abc")).send();
    let response = not_a_number.await.expect("GET /api/v1/submissions/abc");
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("a JSON error body");
    assert_eq!(body["error"]["code"], "bad_request", "{body}");

    assert_eq!(
        routed, documented,
        "the methods the router answers (left) and the document's operations (right) differ"
    );

    // Every operation declares the parameters of its path, an error body,
    // and a security requirement exactly where the server wants a token.
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let secured = op["security"].as_array().is_some_and(|s| !s.is_empty());
            let key = (method.to_uppercase(), path.clone());
            assert_eq!(
                secured,
                wants_token.contains(&key),
                "{method} {path}: documented security vs the server's 401 without a token"
            );
            if secured {
                assert!(op["responses"]["401"].is_object(), "{method} {path}: 401");
            }
            let declared: BTreeSet<&str> = op["parameters"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .filter(|p| p["in"] == "path")
                        .filter_map(|p| p["name"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            let in_path: BTreeSet<&str> = path
                .split('/')
                .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            assert_eq!(declared, in_path, "{method} {path}: path parameters");
            let operation_id = op["operationId"].as_str().unwrap_or_default();
            assert!(!operation_id.is_empty(), "{method} {path}: operationId");
            let error_body = |status: &str| {
                op["responses"][status]["content"]["application/json"]["schema"]["$ref"].clone()
            };
            if path != "/api/openapi.json" {
                assert_eq!(
                    error_body("500"),
                    "#/components/schemas/ErrorBody",
                    "{method} {path}: the error body"
                );
            }
            // The router's timeout layer covers every request, and the
            // database may be down under any of them.
            for status in ["408", "503"] {
                assert_eq!(
                    error_body(status),
                    "#/components/schemas/ErrorBody",
                    "{method} {path}: {status}"
                );
            }
        }
    }
    t.stop().await;
}

/// The document declares both token kinds and uses each where the server
/// asks for it: agent tokens on the agent protocol, user tokens on writes.
#[tokio::test]
async fn security_follows_the_token_kinds() {
    let t = TestServer::start(Backend::Sqlite).await;
    let doc = document(&t).await;
    for scheme in ["agent_token", "user_token"] {
        let s = &doc["components"]["securitySchemes"][scheme];
        assert_eq!(
            (s["type"].as_str(), s["scheme"].as_str()),
            (Some("http"), Some("bearer"))
        );
    }
    let security = |method: &str, path: &str| -> Option<String> {
        let op = &doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path} is documented");
        let first = op["security"].as_array()?.first()?.as_object()?;
        first.keys().next().cloned()
    };
    for (method, path, token) in [
        ("post", "/api/v1/agents/enroll", None),
        ("post", "/api/v1/agents/lease", Some("agent_token")),
        ("put", "/api/v1/jobs/{id}/result", Some("agent_token")),
        ("post", "/api/v1/builds/claim", Some("agent_token")),
        ("get", "/api/v1/builds/{key}/files/{name}", None),
        ("post", "/api/v1/submissions", Some("user_token")),
        ("delete", "/api/v1/watches/{id}", Some("user_token")),
        ("get", "/api/v1/submissions/{id}/results", None),
    ] {
        assert_eq!(security(method, path).as_deref(), token, "{method} {path}");
    }
    // A token of the wrong kind is answered with 403 (agent_protocol.rs
    // checks the server does so); the document says it may be.
    let lease = &doc["paths"]["/api/v1/agents/lease"]["post"]["responses"];
    assert!(lease["403"].is_object(), "{lease}");
    t.stop().await;
}

/// Every state, kind, side and verdict of the API is a string enum in the
/// document, with the values the server writes: a client can match on them
/// instead of on free text.
#[tokio::test]
async fn states_and_kinds_are_string_enums() {
    let t = TestServer::start(Backend::Sqlite).await;
    let doc = document(&t).await;
    let schemas = &doc["components"]["schemas"];
    let values = |schema: &str| -> Vec<String> {
        let s = &schemas[schema];
        assert_eq!(s["type"].as_str(), Some("string"), "{schema}: {s}");
        s["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{schema} has no enum: {s}"))
            .iter()
            .map(|v| v.as_str().expect("a string value").to_owned())
            .collect()
    };
    assert_eq!(
        values("SubmissionStatus"),
        ["queued", "running", "done", "failed", "cancelled"]
    );
    assert_eq!(values("Verdict"), ["different", "same", "unknown"]);
    assert_eq!(values("Side"), ["base", "head"]);
    assert!(values("OutboxState").contains(&"mail_off".to_owned()));
    assert!(values("SeriesState").contains(&"over_quota".to_owned()));
    assert!(values("ArchiveKind").contains(&"public-inbox-v2".to_owned()));
    // Each typed field refers to its enum instead of being a plain string.
    for (object, field, schema) in [
        ("SubmissionView", "state", "SubmissionStatus"),
        ("SubmissionView", "kind", "SubmissionKind"),
        ("JobView", "state", "JobState"),
        ("JobView", "side", "Side"),
        ("ComparisonView", "verdict", "Verdict"),
        ("BisectionView", "state", "BisectionState"),
        ("StepView", "state", "StepState"),
        ("RegressionRow", "state", "TriageState"),
        ("StoredReport", "state", "OutboxState"),
        ("StoredReport", "kind", "ReportKind"),
        ("WatchView", "state", "SourceState"),
        ("WatchEvent", "kind", "WatchEventKind"),
        ("ListView", "state", "SourceState"),
        ("ListEvent", "kind", "ListEventKind"),
        ("SeriesView", "state", "SeriesState"),
        ("ListCommand", "command", "CommandName"),
        ("ListCommand", "state", "CommandState"),
    ] {
        let property = &schemas[object]["properties"][field];
        let reference = property["$ref"].as_str().unwrap_or_default();
        assert_eq!(
            reference,
            format!("#/components/schemas/{schema}"),
            "{object}.{field}: {property}"
        );
    }
    t.stop().await;
}

/// The installed tool `name`, or `None` (a failure under CI) when it is missing.
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is not installed (scripts/install-test-deps installs it from PyPI)"
        );
        eprintln!("{name} is not installed: skipping (scripts/install-test-deps installs it)");
    }
    found
}

fn assert_success(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The served document, written to `dir`.
async fn saved_document(t: &TestServer, dir: &Path) -> PathBuf {
    let file = dir.join("openapi.json");
    std::fs::write(&file, document_bytes(t).await).expect("write the document");
    file
}

#[tokio::test]
async fn an_openapi_validator_accepts_the_document() {
    let Some(validator) = tool(VALIDATOR) else {
        return;
    };
    let t = TestServer::start(Backend::Sqlite).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = saved_document(&t, dir.path()).await;
    let doc: Value =
        serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("JSON document");
    assert_eq!(doc["openapi"], "3.1.0");
    // The validator picks the rules from the `openapi` field: 3.1 here.
    let out = tokio::process::Command::new(&validator)
        .arg(&file)
        .output()
        .await
        .expect("run the validator");
    assert_success(VALIDATOR, &out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.trim_end().ends_with(": OK"), "{VALIDATOR} said {said}");

    // The validator does fail a broken document: the old one's fault, a
    // path parameter missing from an operation.
    let mut broken = doc.clone();
    broken["paths"]["/api/v1/jobs/{id}/events"]["post"]["parameters"] = Value::Array(vec![]);
    let broken_file = dir.path().join("broken.json");
    std::fs::write(&broken_file, broken.to_string()).expect("write");
    let out = tokio::process::Command::new(&validator)
        .arg(&broken_file)
        .output()
        .await
        .expect("run the validator");
    assert!(
        !out.status.success(),
        "{VALIDATOR} accepted a broken document"
    );
    t.stop().await;
}

#[tokio::test]
async fn a_generated_client_submits_a_job_and_reads_its_results() {
    let Some(generator) = tool(GENERATOR) else {
        return;
    };
    for backend in backends() {
        generated_client_round_trip(&generator, backend).await;
    }
}

async fn generated_client_round_trip(generator: &Path, backend: Backend) {
    let t = TestServer::start(backend).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = saved_document(&t, dir.path()).await;
    let out = tokio::process::Command::new(generator)
        .args(["generate", "--meta", "none", "--overwrite", "--path"])
        .arg(&file)
        .arg("--output-path")
        .arg(dir.path().join("kbot_client"))
        .output()
        .await
        .expect("run the generator");
    assert_success(GENERATOR, &out);
    // The generator warns, and leaves an operation out, when it cannot map
    // part of the document; every operation must come through.
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        !said.contains("Warning") && !said.contains("Error"),
        "{GENERATOR}: {said}"
    );

    let repo = dir.path().join("repo");
    gitrepo::linear_repo(&repo, &["pipe: baseline", "pipe: slow down writes"]);
    let (_, user_token) = kbot_server::auth::create_user_token(t.db(), "erin", None)
        .await
        .expect("user token");
    let job_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../jobs/bw_pipe.yaml");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openapi_client.py");
    let out = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(t.url(""))
        .arg(&user_token)
        .arg(t.enrollment_token().await)
        .arg(&repo)
        .arg(&job_file)
        .env("PYTHONPATH", dir.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true)
        .output()
        .await
        .expect("run python3");
    assert_success("the generated client's script", &out);
    let read: Value = serde_json::from_slice(&out.stdout).expect("the script prints JSON");

    // What the Python client read is what the server says.
    let id = read["submission_id"].as_i64().expect("submission id");
    let results: SubmissionResults = t
        .http
        .get(t.url(&format!("/api/v1/submissions/{id}/results")))
        .send()
        .await
        .expect("results")
        .json()
        .await
        .expect("results JSON");
    assert_eq!(results.submission.state.as_str(), "done", "{backend:?}");
    assert_eq!(read["state"], "done");
    assert_eq!(read["jobs"].as_u64(), Some(results.runs.len() as u64));
    let compared = read["comparisons"].as_array().expect("comparisons");
    assert_eq!(compared.len(), 3, "{read}");
    for c in compared {
        let ours = results
            .comparisons
            .iter()
            .find(|r| {
                Some(u64::from(r.job_index)) == c["job_index"].as_u64()
                    && r.metric == "bw_pipe.bandwidth.MB/sec"
            })
            .expect("the same comparison");
        assert_eq!(c["verdict"], ours.verdict.as_str());
        assert_eq!(c["base_runs"].as_u64(), Some(u64::from(ours.base_runs)));
        assert_eq!(c["head_runs"].as_u64(), Some(u64::from(ours.head_runs)));
        assert_eq!(c["base_mean"].as_f64(), ours.base_mean);
        assert_eq!(c["head_mean"].as_f64(), ours.head_mean);
    }
    t.stop().await;
}
