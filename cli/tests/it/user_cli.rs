//! The `kbot-server` user subcommands (the real binary) against a running
//! test server.

use kbot_testkit::gitrepo;

use kbot_testkit::{backends, TestServer};
use serde_json::Value;

/// Two atomic jobs kbot runs, two it skips (no `RANDOM` placement), and a
/// monitor the agent does not have.
const JOB: &str = "testcase: bw_pipe\nnr_threads: 1\nruns: 2\nturbostat:\nbw_pipe:\n  size: [4k, 64k]\n  sched: [DEFAULT, RANDOM]\n";

/// Runs `kbot-server ARGS` against the server; returns (success, stdout, stderr).
async fn cli(server: &TestServer, token: &str, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kbot-server"))
        .args(args)
        .env("KBOT_SERVER_URL", server.url(""))
        .env("KBOT_TOKEN", token)
        .env("KBOT_LOG", "warn")
        .output()
        .await
        .expect("kbot-server runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn submit_list_cancel_results_from_the_command_line() {
    for backend in backends() {
        let server = TestServer::start(backend).await;
        let (_, token) = kbot_server::auth::create_user_token(server.db(), "bob", None)
            .await
            .expect("token");
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = tmp.path().join("repo");
        let shas = gitrepo::linear_repo(&repo, &["one", "two", "three"]);
        let job = tmp.path().join("bw.yaml");
        std::fs::write(&job, JOB).expect("write job");
        let (repo_s, job_s) = (repo.to_str().expect("utf8"), job.to_str().expect("utf8"));

        let (ok, out, err) = cli(&server, &token, &["repo", "add", "linux", repo_s]).await;
        assert!(ok, "repo add: {err}");
        assert!(out.starts_with("linux\tmain\t"), "{out}");

        let (ok, out, err) = cli(
            &server,
            &token,
            &[
                "submit",
                "--repo",
                "linux",
                "--job",
                job_s,
                "--base",
                &shas[0][..7],
                "--head",
                "main",
            ],
        )
        .await;
        assert!(ok, "submit: {err}");
        // The skipped atomic jobs and monitor, by name with the reason, on stderr.
        for name in ["1-RANDOM-4k", "1-RANDOM-64k"] {
            assert!(
                err.contains(&format!(
                    "skipped job bw_pipe/{name}: invalid value \"RANDOM\" for sched"
                )),
                "{err}"
            );
        }
        assert!(err.contains("skipped monitor turbostat: "), "{err}");
        let id: i64 = out
            .split('\t')
            .next()
            .and_then(|s| s.parse().ok())
            .expect("id first");
        // 2 atomic jobs (the size list) x 2 runs x 2 sides.
        assert!(
            out.contains("\tqueued\tlinux\t") && out.contains("0/8 finished"),
            "{out}"
        );
        assert!(
            out.contains(&format!("{}..{}", &shas[0][..12], &shas[2][..12])),
            "{out}"
        );

        let (ok, out, _) = cli(&server, &token, &["submissions", "--limit", "5"]).await;
        assert!(ok && out.starts_with(&format!("{id}\t")), "{out}");

        // `show`: the summary line, one line per job row, then why each
        // atomic job waits (no agent here).
        let (ok, out, err) = cli(&server, &token, &["show", &id.to_string()]).await;
        assert!(ok, "show: {err}");
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with(&format!("{id}\tqueued\tlinux\t")),
            "{out}"
        );
        assert_eq!(lines.len(), 1 + 8 + 2, "{out}");
        assert!(
            lines[1..9]
                .iter()
                .all(|l| l.starts_with("job ") && l.ends_with("\tqueued\t-")),
            "{out}"
        );
        assert_eq!(
            lines[9..],
            [
                "waiting job 0: no agent has enrolled",
                "waiting job 1: no agent has enrolled"
            ],
            "{out}"
        );
        let (ok, out, err) = cli(&server, &token, &["show", &id.to_string(), "--json"]).await;
        assert!(ok, "show --json: {err}");
        let json: Value = serde_json::from_str(&out).expect("show --json is JSON");
        assert_eq!(json["submission"]["id"], id);
        assert_eq!(json["atomic_jobs"].as_array().map(Vec::len), Some(2));
        assert_eq!(json["jobs"].as_array().map(Vec::len), Some(8));
        assert_eq!(json["job_file"], JOB);

        let (ok, out, err) = cli(&server, &token, &["cancel", &id.to_string()]).await;
        assert!(ok, "cancel: {err}");
        assert!(out.contains("\tcancelled\t"), "{out}");

        // `follow` prints the events and returns once the submission settled.
        let (ok, out, err) = cli(&server, &token, &["follow", &id.to_string()]).await;
        assert!(ok, "follow: {err}");
        assert_eq!(
            out.matches("\tcancelled\tcancelled by bob").count(),
            8,
            "{out}"
        );

        // `events` prints what `follow` printed, and returns at once.
        let (ok, events_out, err) = cli(&server, &token, &["events", &id.to_string()]).await;
        assert!(ok, "events: {err}");
        assert_eq!(events_out.lines().count(), 8, "{events_out}");
        assert!(
            out.starts_with(&events_out),
            "follow:\n{out}\nevents:\n{events_out}"
        );
        let (ok, out, err) = cli(&server, &token, &["events", &id.to_string(), "--json"]).await;
        assert!(ok, "events --json: {err}");
        let events: Vec<Value> = serde_json::from_str(&out).expect("events --json is a JSON list");
        assert_eq!(events.len(), 8, "{out}");
        assert!(events.iter().all(|e| e["state"] == "cancelled"), "{out}");
        // --after: only the events after that one.
        let third = events[2]["id"].as_i64().expect("event id").to_string();
        let (ok, out, err) = cli(
            &server,
            &token,
            &["events", &id.to_string(), "--after", &third, "--json"],
        )
        .await;
        assert!(ok, "events --after: {err}");
        let later: Vec<Value> = serde_json::from_str(&out).expect("JSON list");
        assert_eq!(later, events[3..], "{out}");

        let (ok, out, err) = cli(&server, &token, &["results", &id.to_string()]).await;
        assert!(ok, "results: {err}");
        let json: Value = serde_json::from_str(&out).expect("results are JSON");
        assert_eq!(json["submission"]["id"], id);
        assert_eq!(json["runs"], Value::Array(vec![]));

        // Errors come back as one line with the stable code, and a failure status.
        let (ok, _, err) = cli(&server, &token, &["cancel", "424242"]).await;
        assert!(!ok && err.contains("not_found"), "{err}");
        let (ok, _, err) = cli(&server, "kbot_usr_bogus", &["repo", "add", "x", repo_s]).await;
        assert!(!ok && err.contains("unauthorized"), "{err}");
        let (ok, _, err) = cli(
            &server,
            &token,
            &[
                "submit",
                "--repo",
                "linux",
                "--job",
                "/nonexistent.yaml",
                "--head",
                "main",
            ],
        )
        .await;
        assert!(!ok && err.contains("/nonexistent.yaml"), "{err}");
        server.stop().await;
    }
}

/// `kbot-server user add` reads the password from stdin and stores only its
/// argon2 hash; the password then signs in, another does not.
#[tokio::test]
async fn user_add_sets_a_dashboard_password_from_stdin() {
    use tokio::io::AsyncWriteExt;
    for backend in backends() {
        let server = TestServer::start(backend).await;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kbot-server"))
            .args([
                "user",
                "add",
                "--name",
                "gina",
                "--email",
                "gina@example.org",
            ])
            .env("KBOT_DATABASE_URL", &server.store.database_url)
            .env("KBOT_LOG", "warn")
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kbot-server runs");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(b"gina's long password\n")
            .await
            .expect("write password");
        drop(stdin);
        let out = child.wait_with_output().await.expect("user add");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{backend:?}: {err}");
        assert!(err.contains("user gina"), "{err}");
        let db = server.db();
        let check = kbot_server::access::password::check;
        let user = check(db, "gina", "gina's long password")
            .await
            .expect("check");
        assert_eq!(user.map(|u| u.user_name).as_deref(), Some("gina"));
        assert!(check(db, "gina", "gina's long passwort")
            .await
            .expect("check")
            .is_none());
        let stored: (String,) =
            sqlx::query_as("SELECT password_hash FROM users WHERE name = 'gina'")
                .fetch_one(db.read())
                .await
                .expect("row");
        assert!(stored.0.starts_with("$argon2id$"), "{}", stored.0);
        server.stop().await;
    }
}

/// `kbot-server repo list | head -0` and the like: a reader that closed
/// its end before the answer came ends the command quietly (no panic text,
/// success), as with any Unix tool, with and without `--json`.
#[tokio::test]
async fn a_closed_pipe_ends_a_command_quietly() {
    let backend = backends()[0];
    let server = TestServer::start(backend).await;
    let (_, token) = kbot_server::auth::create_user_token(server.db(), "pia", None)
        .await
        .expect("token");
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    gitrepo::linear_repo(&repo, &["one", "two"]);
    let (ok, _, err) = cli(
        &server,
        &token,
        &["repo", "add", "linux", repo.to_str().expect("utf8")],
    )
    .await;
    assert!(ok, "repo add: {err}");
    for args in [&["repo", "list"][..], &["repo", "list", "--json"][..]] {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kbot-server"))
            .args(args)
            .env("KBOT_SERVER_URL", server.url(""))
            .env("KBOT_TOKEN", &token)
            .env("KBOT_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kbot-server runs");
        // Closed before the command has its answer from the server.
        drop(child.stdout.take());
        let out = child.wait_with_output().await.expect("kbot-server ends");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
        assert!(out.status.success(), "{args:?}: {:?}", out.status);
    }
    server.stop().await;
}

/// `reports` lists the outbox newest first; `report show` finds a report by
/// id or by Message-ID (with or without `<>`) and prints its message, or
/// with `--json` the report and its delivery attempts.
#[tokio::test]
async fn reports_and_report_show_from_the_command_line() {
    use kbot_server::mail::outbox;
    for backend in backends() {
        let server = TestServer::start(backend).await;
        let (_, token) = kbot_server::auth::create_user_token(server.db(), "rita", None)
            .await
            .expect("token");
        let (ok, out, err) = cli(&server, &token, &["reports", "--json"]).await;
        assert!(ok, "reports --json: {err}");
        assert_eq!(out.trim(), "[]");

        let mut ids = Vec::new();
        for message_id in ["first@kbot.test", "second@kbot.test"] {
            let report =
                kbot_testkit::outbox_report(message_id, kbot_api::reports::OutboxState::MailOff);
            let mut tx = server.db().begin().await.expect("begin");
            let id = outbox::insert(&mut tx, &report).await.expect("insert");
            tx.commit().await.expect("commit");
            ids.push(id.expect("a new Message-ID is queued"));
        }

        let (ok, out, err) = cli(&server, &token, &["reports"]).await;
        assert!(ok, "reports: {err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(
            lines[0].starts_with(&format!("{}\tmail_off\t", ids[1]))
                && lines[0].contains("\tsecond@kbot.test\t[linux:master] "),
            "{out}"
        );
        let (ok, out, err) = cli(&server, &token, &["reports", "--json"]).await;
        assert!(ok, "reports --json: {err}");
        let list: Vec<Value> = serde_json::from_str(&out).expect("JSON list");
        let listed: Vec<&str> = list
            .iter()
            .filter_map(|r| r["message_id"].as_str())
            .collect();
        assert_eq!(listed, ["second@kbot.test", "first@kbot.test"]);

        // The message itself, by Message-ID with its angle brackets.
        let (ok, out, err) = cli(&server, &token, &["report", "show", "<first@kbot.test>"]).await;
        assert!(ok, "report show: {err}");
        assert_eq!(
            out,
            kbot_testkit::outbox_report("first@kbot.test", kbot_api::reports::OutboxState::MailOff)
                .message
        );
        let (ok, out, err) = cli(
            &server,
            &token,
            &["report", "show", &ids[1].to_string(), "--json"],
        )
        .await;
        assert!(ok, "report show --json: {err}");
        let json: Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(json["id"], ids[1]);
        assert_eq!(json["message_id"], "second@kbot.test");
        assert_eq!(json["state"], "mail_off");
        assert_eq!(json["recipients"], serde_json::json!(["dev@example.org"]));
        assert!(
            json["message"]
                .as_str()
                .is_some_and(|m| m.contains("Message-ID: <second@kbot.test>")),
            "{out}"
        );
        assert_eq!(json["delivery"], Value::Array(vec![]));

        let (ok, _, err) = cli(&server, &token, &["report", "show", "nobody@kbot.test"]).await;
        assert!(!ok && err.contains("not_found"), "{err}");
        server.stop().await;
    }
}

/// `list add` on an mbox written by `git format-patch`, then `series`,
/// `series-show`, `list ls|show|commands|read|rm`; a missing archive is a
/// clear error.
#[tokio::test]
async fn lists_and_series_from_the_command_line() {
    for backend in backends() {
        let server = TestServer::start(backend).await;
        let (_, token) = kbot_server::auth::create_user_token(server.db(), "lena", None)
            .await
            .expect("token");
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = tmp.path().join("repo");
        let shas = gitrepo::linear_repo(&repo, &["one", "two", "three"]);
        let mbox = tmp.path().join("list.mbox");
        let base = format!("--base={}", shas[1]);
        let patch = gitrepo::git(
            &repo,
            &["format-patch", "-1", "--stdout", "--thread", &base],
        );
        // The helper trims the output: an mbox message ends with a blank line.
        std::fs::write(&mbox, format!("{patch}\n\n")).expect("write mbox");
        let job = tmp.path().join("bw.yaml");
        std::fs::write(&job, JOB).expect("write job");
        let (repo_s, job_s) = (repo.to_str().expect("utf8"), job.to_str().expect("utf8"));
        let (ok, _, err) = cli(&server, &token, &["repo", "add", "linux", repo_s]).await;
        assert!(ok, "repo add: {err}");

        let missing = tmp.path().join("nowhere");
        let add = |archive: &str| {
            let a = archive.to_owned();
            [
                "list",
                "add",
                "fsdevel",
                "--archive",
                "",
                "--tree",
                "linux:main",
                "--job",
                job_s,
                "--interval",
                "1s",
                "--from-start",
            ]
            .map(|x| {
                if x.is_empty() {
                    a.clone()
                } else {
                    x.to_owned()
                }
            })
        };
        let args = add(&missing.to_string_lossy());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, _, err) = cli(&server, &token, &args).await;
        assert!(!ok && err.contains("archive"), "{err}");
        let args = add(&mbox.to_string_lossy());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, out, err) = cli(&server, &token, &args).await;
        assert!(ok, "list add: {err}");
        let list: Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(list["archive_kind"], "mbox", "{list}");
        let id = list["id"].as_i64().expect("id").to_string();

        let series = wait_for_series(&server, &token, &id).await;
        assert_eq!(series["state"], "testing", "{series}");
        assert_eq!(series["base"], shas[1].as_str(), "{series}");
        let sid = series["id"].as_i64().expect("id").to_string();
        let (ok, out, err) = cli(&server, &token, &["series-show", &sid, "--json"]).await;
        assert!(ok, "series-show: {err}");
        let detail: Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(detail["parts"][0]["subject"], "[PATCH] three", "{detail}");
        let (ok, out, _) = cli(&server, &token, &["series"]).await;
        assert!(ok && out.contains("\tfsdevel\tv1 three (1)\t"), "{out}");
        for args in [
            ["list", "ls"].as_slice(),
            &["list", "show", &id],
            &["list", "commands", &id],
            &["list", "read", &id],
        ] {
            let (ok, out, err) = cli(&server, &token, args).await;
            assert!(ok, "{args:?}: {err}");
            serde_json::from_str::<Value>(&out).expect("JSON");
        }
        let (ok, out, err) = cli(&server, &token, &["list", "rm", &id]).await;
        assert!(ok && out.contains("\"removed\""), "list rm: {out} {err}");
        server.stop().await;
    }
}

/// The first series the server lists, once there is one.
async fn wait_for_series(server: &TestServer, token: &str, list: &str) -> Value {
    for _ in 0..300 {
        let (ok, out, err) = cli(server, token, &["series", "--json"]).await;
        assert!(ok, "series: {err}");
        let all: Vec<Value> = serde_json::from_str(&out).expect("JSON");
        if let Some(s) = all.into_iter().find(|s| s["state"] != "waiting") {
            return s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (_, out, _) = cli(server, token, &["list", "show", list]).await;
    panic!("no series after 30 s: {out}");
}

/// Scripts written against the old names still work: `KBOT_SERVER` reaches
/// the server and `RUST_LOG` filters the logs, each with a warning that
/// names its new name; the new names win when both are set.
#[tokio::test]
async fn old_environment_names_still_work_with_a_warning() {
    let server = TestServer::start(backends()[0]).await;
    let (_, token) = kbot_server::auth::create_user_token(server.db(), "olga", None)
        .await
        .expect("token");
    let run = |vars: Vec<(&'static str, String)>| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kbot-server"));
        cmd.args(["repo", "list", "--json"])
            .env_remove("KBOT_SERVER_URL")
            .env_remove("KBOT_LOG")
            .env_remove("RUST_LOG")
            .env("KBOT_TOKEN", &token);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        async move { cmd.output().await.expect("kbot-server runs") }
    };
    let out = run(vec![
        ("KBOT_SERVER", server.url("")),
        ("RUST_LOG", "warn".into()),
    ])
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    assert!(
        err.contains("KBOT_SERVER is read as KBOT_SERVER_URL")
            && err.contains("RUST_LOG is read as KBOT_LOG"),
        "{err}"
    );
    // The new name wins: the old one points nowhere.
    let out = run(vec![
        ("KBOT_SERVER", "http://127.0.0.1:1".into()),
        ("KBOT_SERVER_URL", server.url("")),
    ])
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("KBOT_SERVER is ignored: KBOT_SERVER_URL is set"),
        "{err}"
    );
    server.stop().await;
}
