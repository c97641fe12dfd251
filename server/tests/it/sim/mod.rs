//! The robot loop with simulated agents: real git repositories, agents for
//! which builds cost nothing ([`fleet`]), and the REST calls of submissions,
//! bisections, watches and reports read as JSON (`serde_json::Value`), so the
//! tests depend on the interface (/tmp/robot-contract.md), not on the
//! server's Rust types.

pub mod fleet;
pub mod repo;

use std::future::Future;
use std::time::{Duration, Instant};

use kbot_server::config::Config;
use kbot_server::mail::{MailConfig, SmtpSettings};
use serde_json::{json, Value};

use fleet::{Fleet, Model};
use kbot_testkit::{Backend, TestServer};
use repo::Repo;

/// The repository's name on the server.
pub const REPO: &str = "linux";
/// bw_pipe, three runs per side to start with.
pub const JOB: &str = kbot_testkit::THREE_RUN_JOB;
/// The KPI the agents upload (what `TestAgent::upload` sends): higher is better.
pub const KPI: &str = "bw_pipe.bandwidth.MB/sec";
/// Upper bound of one wait for the server.
pub const DEADLINE: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(100);

/// Polls `probe` until it returns `Ok`; panics after `limit` with the last
/// `Err`, which describes what was seen.
pub async fn poll<T, F, Fut>(limit: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match probe().await {
            Ok(value) => return value,
            Err(seen) if Instant::now() > deadline => panic!("gave up after {limit:?}: {seen}"),
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// The git history and what each commit's runs measure; built once, used by
/// a server on each backend.
pub struct World {
    pub repo: Repo,
    pub model: Model,
}

impl World {
    pub fn new() -> World {
        World {
            repo: Repo::new(),
            model: Model::new(),
        }
    }

    /// Branch `name` off the base with `n` commits; returns their shas.
    pub fn range(&self, name: &str, n: usize) -> Vec<String> {
        self.repo.branch_at(name, &self.repo.base);
        let shas = self.repo.commits(name, n);
        self.repo.checkout("main");
        shas
    }

    /// `git bisect` over base..head under the model.
    pub fn git_bisect(&self, head: &str) -> repo::GitBisect {
        self.repo
            .bisect(&self.repo.base, head, |c| self.model.mark(c))
    }
}

/// A server on one backend with the world's repo registered and a user.
pub struct Sim<'w> {
    pub t: TestServer,
    pub token: String,
    pub world: &'w World,
    tweak: Box<dyn Fn(&mut Config)>,
}

impl<'w> Sim<'w> {
    pub async fn start(backend: Backend, world: &'w World) -> Sim<'w> {
        Sim::start_with(backend, world, |_| {}).await
    }

    /// With a config tweak, applied again on [`Sim::restart`].
    pub async fn start_with(
        backend: Backend,
        world: &'w World,
        tweak: impl Fn(&mut Config) + 'static,
    ) -> Sim<'w> {
        let t = TestServer::start_with(backend, &tweak).await;
        let (_, token) = kbot_server::auth::create_user_token(t.db(), "alice", None)
            .await
            .expect("user token");
        let sim = Sim {
            t,
            token,
            world,
            tweak: Box::new(tweak),
        };
        let repo = json!({"name": REPO, "url": world.repo.url()});
        sim.post("/api/v1/repos", repo, 201).await;
        sim
    }

    pub fn backend(&self) -> Backend {
        self.t.store.backend
    }

    /// With `KBOT_PAGES_DIR` set, the SQLite run's pages are written there
    /// as self-contained HTML (the styles are inline) for
    /// `scripts/screenshots`, named after their path.
    pub fn keep_page(&self, path: &str, html: &str) {
        let Ok(dir) = std::env::var("KBOT_PAGES_DIR") else {
            return;
        };
        if self.backend() != Backend::Sqlite {
            return;
        }
        let name: String = path
            .trim_start_matches('/')
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let name = if name.is_empty() {
            "overview".into()
        } else {
            name
        };
        std::fs::write(
            std::path::Path::new(&dir).join(format!("{name}.html")),
            html,
        )
        .expect("write page");
    }

    /// Stops the server and starts a new one on the same database and
    /// artifact dir.
    pub async fn restart(self) -> Sim<'w> {
        let t = self.t.restart(&self.tweak).await;
        Sim { t, ..self }
    }

    pub async fn stop(self) {
        self.t.stop().await;
    }

    pub async fn get(&self, path: &str) -> Value {
        let (status, body) = self.fetch(path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// GET: the status and the JSON body (null when it is not JSON).
    pub async fn fetch(&self, path: &str) -> (u16, Value) {
        let response = self.t.http.get(self.t.url(path)).send().await;
        let response = response.expect("GET");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// POSTs with the user token; asserts the status.
    pub async fn post(&self, path: &str, body: Value, status: u16) -> Value {
        let request = self.t.http.post(self.t.url(path)).json(&body);
        self.send(request, status, path).await
    }

    /// DELETEs with the user token; asserts the status.
    pub async fn delete(&self, path: &str, status: u16) -> Value {
        let request = self.t.http.delete(self.t.url(path));
        self.send(request, status, path).await
    }

    async fn send(&self, request: reqwest::RequestBuilder, status: u16, path: &str) -> Value {
        let response = request.bearer_auth(&self.token).send().await;
        checked(response.expect("request"), status, path).await
    }

    /// Submits `base..head` of the sim job; returns the submission id.
    pub async fn submit(&self, base: &str, head: &str) -> i64 {
        let body = json!({"repo": REPO, "job_file": JOB, "base": base, "head": head});
        id(&self.post("/api/v1/submissions", body, 201).await)
    }

    pub async fn submission(&self, id: i64) -> Value {
        let detail = self.get(&format!("/api/v1/submissions/{id}")).await;
        detail["submission"].clone()
    }

    /// The newest submissions (up to 200), newest first.
    pub async fn submissions(&self) -> Vec<Value> {
        list(self.get("/api/v1/submissions?limit=200").await)
    }

    pub async fn bisections(&self) -> Vec<Value> {
        list(self.get("/api/v1/bisections").await)
    }

    /// `{"bisection": ..., "steps": [...]}`.
    pub async fn bisection(&self, id: i64) -> Value {
        self.get(&format!("/api/v1/bisections/{id}")).await
    }

    /// The reports as a signed-in user reads them (anonymous readers see no
    /// recipients and no report that has yet to leave).
    pub async fn reports(&self) -> Vec<Value> {
        let request = self.t.http.get(self.t.url("/api/v1/reports"));
        let response = request.bearer_auth(&self.token).send().await.expect("GET");
        assert_eq!(response.status().as_u16(), 200, "GET /api/v1/reports");
        list(response.json().await.expect("reports JSON"))
    }

    /// Waits until the bisection started by submission `origin` satisfies
    /// `ready`; returns its detail.
    pub async fn bisection_when(&self, origin: i64, ready: impl Fn(&Value) -> bool) -> Value {
        poll(DEADLINE, || async {
            let all = self.bisections().await;
            let Some(b) = all.iter().find(|b| b["origin_submission"] == origin) else {
                return Err(format!("no bisection of submission {origin}: {all:?}"));
            };
            let detail = self.bisection(id(b)).await;
            if ready(&detail) {
                Ok(detail)
            } else {
                Err(detail.to_string())
            }
        })
        .await
    }

    /// Waits until watch `id`'s detail (`{"watch": ..., "events": [...]}`)
    /// satisfies `ready`; returns it.
    pub async fn watch_when(&self, id: i64, ready: impl Fn(&Value) -> bool) -> Value {
        poll(DEADLINE, || async {
            let detail = self.get(&format!("/api/v1/watches/{id}")).await;
            if ready(&detail) {
                Ok(detail)
            } else {
                Err(detail.to_string())
            }
        })
        .await
    }

    /// Waits (up to `limit`) until the bisections started by the submissions
    /// `origins` have all ended; returns their details, in `origins` order.
    pub async fn ended(&self, origins: &[i64], limit: Duration) -> Vec<Value> {
        let ids = poll(limit, || async {
            let all = self.bisections().await;
            let mut ids = Vec::new();
            for origin in origins {
                match all.iter().find(|b| b["origin_submission"] == *origin) {
                    Some(b) if !["running", "verifying"].contains(&str_of(&b["state"])) => {
                        ids.push(id(b))
                    }
                    Some(b) => return Err(format!("bisection of submission {origin}: {b}")),
                    None => return Err(format!("no bisection of submission {origin}: {all:?}")),
                }
            }
            Ok(ids)
        })
        .await;
        let mut details = Vec::new();
        for id in ids {
            details.push(self.bisection(id).await);
        }
        details
    }

    /// Submits `base..head` and runs `fleet` until the bisection it starts
    /// has ended; returns the bisection's detail.
    pub async fn bisect(&self, fleet: &Fleet<'_>, base: &str, head: &str) -> Value {
        let origin = self.submit(base, head).await;
        let mut done = fleet.run_until(self.ended(&[origin], DEADLINE)).await;
        done.pop().expect("one bisection")
    }

    /// Waits until submission `id` is done, failed or cancelled.
    pub async fn settled(&self, id: i64) -> Value {
        poll(DEADLINE, || async {
            let s = self.submission(id).await;
            match str_of(&s["state"]) {
                "done" | "failed" | "cancelled" => Ok(s),
                _ => Err(s.to_string()),
            }
        })
        .await
    }
}

async fn checked(response: reqwest::Response, status: u16, what: &str) -> Value {
    let got = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    assert_eq!(got, status, "{what}: {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// A JSON array's elements (an empty list for anything else).
pub fn list(v: Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items,
        _ => Vec::new(),
    }
}

/// `v["id"]`.
pub fn id(v: &Value) -> i64 {
    v["id"].as_i64().unwrap_or_else(|| panic!("no id in {v}"))
}

/// A string field, or "" when absent or null.
pub fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// Mail on, to an SMTP server on loopback `port`, retrying fast.
pub fn mail_to(port: u16) -> MailConfig {
    let smtp = SmtpSettings {
        host: "127.0.0.1".into(),
        port,
        starttls: false,
        credentials: None,
        timeout: Duration::from_secs(10),
    };
    let mut mail = MailConfig {
        enabled: true,
        smtp,
        poll_interval: Duration::from_millis(50),
        gather: Duration::ZERO,
        ..MailConfig::disabled()
    };
    mail.report.robot_address = "kbot@kbot.test".into();
    mail
}

/// The inline `<svg>…</svg>` documents of a page.
pub fn svgs(html: &str) -> Vec<String> {
    html.match_indices("<svg ")
        .filter_map(|(start, _)| {
            let end = html[start..].find("</svg>")? + start + "</svg>".len();
            Some(html[start..end].to_owned())
        })
        .collect()
}
