//! SQL, markup and argument injection through every parameter the server
//! reads from a URL, on SQLite and PostgreSQL: every path parameter of every
//! GET route, and every query parameter any handler declares (read from the
//! handlers' `Query<...>` structs in the source, so a new parameter is swept
//! without editing this file), each with hostile values.
//!
//! What must hold: no answer is a 5xx; no answer carries the markup
//! unescaped; a tautology (`' OR '1'='1`) gets the same answer as a plain
//! value that matches nothing, so it was never read as SQL; git is never
//! handed a revision as an option; and afterwards the store holds exactly
//! what it held before.

use kbot_testkit::gitrepo;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kbot_load::seed;
use kbot_server::routes::route_list;
use kbot_testkit::{backends, Backend, TestServer};
use serde_json::json;

const MARKUP: &str = "\"><script>alert(7)</script><svg onload=alert(8)>";
const TAUTOLOGY: &str = "x' OR '1'='1";
const PLAIN: &str = "xzzzzzzzzzzz";

/// Values tried in every parameter besides the markup and the tautology.
fn hostile_values(pwned: &Path) -> Vec<String> {
    vec![
        MARKUP.to_string(),
        TAUTOLOGY.to_string(),
        "1; DROP TABLE jobs; --".into(),
        "1) UNION SELECT token_hash FROM tokens --".into(),
        "../../../../etc/passwd".into(),
        format!("--output={}", pwned.display()),
        "-1".into(),
        "99999999999999999999999999".into(),
        "nul\0byte".into(),
        "\u{202e}😀\u{0}".into(),
        "%27%22%3C".into(),
        // Long, though not so long that every text parameter of one request
        // together passes what the HTTP layer takes in a request line.
        "x".repeat(1024),
    ]
}

/// Field names of the handlers' query structs, following `#[serde(flatten)]`
/// into the structs they name; true for a text field (any string is a
/// valid value), false for a number or flag (a hostile value is refused by
/// the parse, alone in its request so that it masks no other parameter).
fn query_parameters() -> BTreeMap<String, bool> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let code = kbot_testkit::files_under(&src, Some("rs"))
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("source"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut wanted: Vec<String> = code
        .split("Query<")
        .skip(1)
        .filter_map(|rest| rest.split_once('>').map(|(name, _)| name.to_string()))
        .filter(|name| name.chars().all(|c| c.is_ascii_alphanumeric()))
        .collect();
    let mut seen = BTreeSet::new();
    let mut fields = BTreeMap::new();
    while let Some(name) = wanted.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        for body in struct_bodies(&code, &name) {
            let mut flatten = false;
            for line in body.lines().map(str::trim) {
                if line.starts_with("#[serde(flatten") {
                    flatten = true;
                    continue;
                }
                if line.starts_with("//") || line.starts_with("#[") {
                    continue;
                }
                let line = line.strip_prefix("pub ").unwrap_or(line);
                let Some((field, ty)) = line.split_once(':') else {
                    continue;
                };
                if flatten {
                    wanted.push(ty.trim().trim_end_matches(',').to_string());
                } else if field.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                    fields.insert(field.to_string(), ty.contains("String"));
                }
                flatten = false;
            }
        }
    }
    fields
}

/// The bodies of every `struct NAME {...}` in `code`.
fn struct_bodies<'a>(code: &'a str, name: &str) -> Vec<&'a str> {
    let marker = format!("struct {name} {{");
    code.match_indices(&marker)
        .filter_map(|(at, _)| {
            let body = &code[at + marker.len()..];
            body.find("\n}").map(|end| &body[..end])
        })
        .collect()
}

#[test]
fn the_sweep_finds_the_handlers_parameters() {
    let params = query_parameters();
    for known in [
        "limit", "before", "metric", "group", "state", "page", "base", "next",
    ] {
        assert!(
            params.contains_key(known),
            "{known} missing from {params:?}"
        );
    }
}

/// Row counts of the tables an injection would change.
async fn table_counts(t: &TestServer) -> BTreeMap<&'static str, i64> {
    let mut counts = BTreeMap::new();
    for table in [
        "repos",
        "commits",
        "users",
        "tokens",
        "agents",
        "submissions",
        "jobs",
        "results",
        "comparisons",
        "regressions",
        "report_outbox",
        "watches",
        "web_sessions",
    ] {
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(t.db().read())
            .await
            .unwrap_or_else(|e| panic!("count {table}: {e}"));
        counts.insert(table, n);
    }
    counts
}

/// A store with something in every table the routes read: a real git repo
/// and its head commit, a submission, a user; the submission's id and the
/// user's token.
async fn populate(t: &TestServer, repo_dir: &Path) -> (i64, String) {
    let seeded = seed::submission(t.db(), "linux", "alice", seed::LOAD_JOB_FILE, 1, 0)
        .await
        .expect("seed");
    let (_, user) = kbot_server::auth::create_user_token(t.db(), "alice", None)
        .await
        .expect("user token");
    gitrepo::linear_repo(repo_dir, &["one", "two"]);
    let registered = t
        .http
        .post(t.url("/api/v1/repos"))
        .bearer_auth(&user)
        .json(&json!({"name": "real", "url": repo_dir.display().to_string()}))
        .send()
        .await
        .expect("register a repo");
    assert_eq!(registered.status(), 201);
    // Looking a commit up stores it: do it before the store is counted.
    let head = t
        .http
        .get(t.url("/api/v1/repos/real/commits/HEAD"))
        .send()
        .await;
    assert_eq!(head.expect("commit lookup").status(), 200);
    (seeded.submission_id, user)
}

/// The user API's bodies with the hostile value in every text field: each
/// is refused with a 4xx (no name, ref or job file here is valid), never a
/// fault; NUL bytes included, which PostgreSQL cannot store.
async fn hostile_bodies(t: &TestServer, user: &str, value: &str, backend: Backend) -> usize {
    let bodies = [
        (
            "/api/v1/repos",
            json!({"name": value, "url": value, "default_branch": value}),
        ),
        (
            "/api/v1/submissions",
            json!({"repo": "real", "job_file": value, "base": value, "head": value}),
        ),
        (
            "/api/v1/submissions",
            json!({"repo": value, "job_file": kbot_testkit::ONE_JOB, "head": "HEAD"}),
        ),
        (
            "/api/v1/watches",
            json!({"repo": "real", "branch": value, "job_file": kbot_testkit::ONE_JOB, "tbox_group": value}),
        ),
    ];
    for (path, body) in &bodies {
        let response = t
            .http
            .post(t.url(path))
            .bearer_auth(user)
            .json(body)
            .send()
            .await
            .expect("post");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        assert!(
            (400..500).contains(&status),
            "{backend:?} POST {path} with {value:.40?}: {status} {text:.300}"
        );
    }
    bodies.len()
}

struct Answer {
    status: u16,
    content_type: String,
    nosniff: bool,
    body: String,
}

async fn get(t: &TestServer, path: &str, query: &[(&str, &str)]) -> Answer {
    let response = t
        .http
        .get(t.url(path))
        .query(query)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path} {:.300}: {e}", format!("{query:?}")));
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    Answer {
        status: response.status().as_u16(),
        content_type: header("content-type"),
        nosniff: header("x-content-type-options") == "nosniff",
        body: response.text().await.unwrap_or_default(),
    }
}

/// No fault, and the hostile value never reaches a page unescaped. A JSON
/// answer may quote it (as a JSON string it is data); every answer is
/// labelled and `nosniff`, so no browser reads JSON or text as a page.
fn check(what: &str, answer: &Answer) {
    assert!(
        answer.status < 500,
        "{what}: {} {:.300}",
        answer.status,
        answer.body
    );
    assert!(answer.nosniff, "{what}: no X-Content-Type-Options: nosniff");
    let page = answer.content_type.starts_with("text/html");
    let data = answer.content_type.starts_with("application/json")
        || answer.content_type.starts_with("image/svg+xml") && !answer.body.contains("<script");
    assert!(
        page || data
            || answer.body.is_empty()
            || answer.content_type.starts_with("text/plain") && answer.status == 200,
        "{what}: answered {:?}",
        answer.content_type
    );
    if page {
        for raw in ["<script>alert(7)", "<svg onload"] {
            assert!(!answer.body.contains(raw), "{what}: unescaped {raw}");
        }
    }
}

/// The status and how many rows the answer lists (a JSON list's length, or
/// an HTML page's table rows), so that a tautology that matched rows shows.
fn shape(answer: &Answer) -> (u16, usize) {
    let items = match serde_json::from_str::<serde_json::Value>(&answer.body) {
        Ok(serde_json::Value::Array(items)) => items.len(),
        Ok(serde_json::Value::Object(o)) => o
            .values()
            .find_map(|v| v.as_array().map(Vec::len))
            .unwrap_or(0),
        _ => answer.body.matches("<tr").count(),
    };
    (answer.status, items)
}

/// `path` with `{param}` segments filled: the hostile value in `slot`, real
/// ones elsewhere.
fn fill(path: &str, submission_id: i64, slot: Option<(&str, &str)>) -> String {
    let mut out = path.to_string();
    for (param, real) in [
        ("{id}", submission_id.to_string()),
        ("{name}", "real".into()),
        ("{*rev}", "HEAD".into()),
        ("{message_id}", "1".into()),
        ("{day}", "20261201".into()),
        ("{position}", "0".into()),
        ("{index}", "1".into()),
    ] {
        let value = match slot {
            Some((p, hostile)) if p == param => percent_encoded(hostile),
            _ => real,
        };
        out = out.replace(param, &value);
    }
    out
}

/// Every byte but unreserved ones as `%XX`, so the value arrives whole in
/// one path segment.
fn percent_encoded(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn path_params(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|s| s.starts_with('{') && s.ends_with('}'))
        .collect()
}

async fn sweep(backend: Backend) {
    let t = TestServer::start(backend).await;
    let repo = tempfile::tempdir().expect("temp dir");
    let scratch = tempfile::tempdir().expect("temp dir");
    let pwned = scratch.path().join("pwned");
    let (submission_id, user) = populate(&t, repo.path()).await;
    let before = table_counts(&t).await;
    let values = hostile_values(&pwned);
    let params = query_parameters();
    let routes: Vec<String> = route_list()
        .into_iter()
        .filter(|(method, _)| method == "GET")
        .map(|(_, path)| path)
        .collect();
    let mut requests = 0;
    for value in &values {
        requests += hostile_bodies(&t, &user, value, backend).await;
    }
    for path in &routes {
        for slot in path_params(path) {
            for value in &values {
                let url = fill(path, submission_id, Some((slot, value)));
                check(&format!("{backend:?} GET {url}"), &get(&t, &url, &[]).await);
                requests += 1;
            }
        }
        let url = fill(path, submission_id, None);
        let text: Vec<&str> = params
            .iter()
            .filter(|(_, text)| **text)
            .map(|(p, _)| p.as_str())
            .collect();
        for value in &values {
            let query: Vec<(&str, &str)> = text.iter().map(|p| (*p, value.as_str())).collect();
            let what = format!("{backend:?} GET {url} with every text parameter {value:.40}");
            check(&what, &get(&t, &url, &query).await);
            requests += 1;
            for (param, _) in params.iter().filter(|(_, text)| !**text) {
                let what = format!("{backend:?} GET {url}?{param}={value:.40}");
                check(&what, &get(&t, &url, &[(param, value)]).await);
                requests += 1;
            }
        }
        for param in &text {
            let tautology = get(&t, &url, &[(param, TAUTOLOGY)]).await;
            let plain = get(&t, &url, &[(param, PLAIN)]).await;
            requests += 2;
            assert_eq!(
                shape(&tautology),
                shape(&plain),
                "{backend:?} GET {url}?{param}: a tautology answers unlike a plain value"
            );
        }
    }
    assert!(!pwned.exists(), "git took a revision as an option");
    assert_eq!(
        table_counts(&t).await,
        before,
        "{backend:?}: the store changed"
    );
    println!(
        "{backend:?}: {requests} hostile requests over {} GET routes and {} query parameters",
        routes.len(),
        params.len()
    );
    t.stop().await;
}

#[tokio::test]
async fn hostile_parameters_break_nothing() {
    for backend in backends() {
        sweep(backend).await;
    }
}
