//! End to end: a submission whose head is 20% slower settles with a
//! `different` KPI, the comparison transaction queues the report, and the
//! server's sender delivers it to a real SMTP server on loopback: to the
//! author, Cc the repo's list and the committer, in the 0-day layout.

use kbot_testkit::gitrepo;
use kbot_testkit::smtp_sink;

use std::time::{Duration, Instant};

use kbot_server::mail::{outbox, MailConfig};
use kbot_testkit::agent::TestAgent;
use kbot_testkit::{backends, Backend, TestServer, THREE_RUN_JOB};
use serde_json::json;

const KPI: &str = "bw_pipe.bandwidth.MB/sec";

fn mail_config(port: u16) -> MailConfig {
    let mut c = MailConfig {
        poll_interval: Duration::from_millis(50),
        ..kbot_testkit::loopback_mail(port)
    };
    c.report.robot_address = "kbot@kbot.test".into();
    c.report.message_id_domain = "kbot@kbot.test".into();
    c.repo_lists
        .insert("linux".into(), vec!["pipe-list@example.org".into()]);
    c
}

/// Plays an agent until nothing is left to lease: head runs are 20% slower.
async fn run_agent(agent: &TestAgent<'_>, head_sha: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut idle = 0;
    while idle < 3 {
        assert!(Instant::now() < deadline, "runs did not finish in time");
        match agent.run_slower_head(head_sha).await {
            Some(_) => idle = 0,
            None => idle += 1,
        }
    }
}

async fn case(backend: Backend) {
    // The relay is down at first: the report must still arrive, once.
    let sink = smtp_sink::Sink::start(smtp_sink::Plan {
        refuse_connections: 2,
        ..Default::default()
    })
    .await;
    let port = sink.addr.port();
    let server = TestServer::start_with(backend, |c| c.mail = mail_config(port)).await;
    let (_, user_token) = kbot_server::auth::create_user_token(server.db(), "alice", None)
        .await
        .expect("user token");
    let repo_dir = tempfile::tempdir().expect("tempdir");
    let shas = gitrepo::linear_repo(
        repo_dir.path(),
        &["pipe: baseline", "pipe: slow down writes"],
    );
    let resp = server
        .http
        .post(server.url("/api/v1/repos"))
        .bearer_auth(&user_token)
        .json(&json!({"name": "linux", "url": repo_dir.path().to_str()}))
        .send()
        .await
        .expect("repo");
    assert_eq!(resp.status(), 201);
    let agent = TestAgent::enroll(&server, "box1", "lkp-test").await;
    let resp = server
        .http
        .post(server.url("/api/v1/submissions"))
        .bearer_auth(&user_token)
        .json(&json!({"repo": "linux", "job_file": THREE_RUN_JOB, "head": &shas[1]}))
        .send()
        .await
        .expect("submit");
    assert_eq!(resp.status(), 201);

    run_agent(&agent, &shas[1]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while sink.received().is_empty() {
        assert!(Instant::now() < deadline, "{backend:?}: no report arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = sink.received();
    assert_eq!(got.len(), 1, "{backend:?}: one report");
    let mail = &got[0];
    let mut rcpt = mail.rcpt_to.clone();
    rcpt.sort();
    assert_eq!(
        rcpt,
        [
            "<ann@example.org>",
            "<cid@example.org>",
            "<pipe-list@example.org>"
        ]
    );
    let data = mail.data.replace("\r\n", "\n");
    let sha10 = &shas[1][..10];
    let subject = smtp_sink::header(&data, "Subject");
    assert!(
        subject.starts_with(&format!("[linux:main] [pipe] {sha10}: {KPI} "))
            && subject.ends_with("% regression"),
        "{data}"
    );
    assert!(
        smtp_sink::addressed(&data, "To", "Ann Author <ann@example.org>"),
        "{data}"
    );
    assert!(
        smtp_sink::addressed(&data, "Cc", "Cid Committer <cid@example.org>"),
        "{data}"
    );
    assert!(data.contains(&format!(
        "commit: {} (\"pipe: slow down writes\") ",
        shas[1]
    )));
    assert!(data.contains(
        "test machine: 16 threads 2 sockets Intel(R) Xeon(R) Platinum 8321HC CPU @ 1.40GHz with 64G memory\n"
    ), "{data}");
    assert!(data.contains("| Reported-by: kernel test robot <kbot@kbot.test>\n"));
    assert!(data.contains(&format!("  {sha10} (\"pipe: slow down writes\")\n")));
    assert!(
        data.contains(&format!("  {KPI}\n")),
        "KPI row in the compare table: {data}"
    );

    // The reproduction link in the body is served.
    let link = data
        .lines()
        .skip_while(|l| !l.starts_with("The kernel config and materials"))
        .nth(1)
        .expect("reproduction link")
        .to_owned();
    let path = link.split_once("/archive/").expect("archive path").1;
    let materials = server
        .http
        .get(server.url(&format!("/archive/{path}")))
        .send()
        .await
        .expect("materials");
    assert_eq!(materials.status(), 200, "{link}");
    let text = materials.text().await.expect("materials text");
    assert!(text.contains("bw_pipe:"), "{text}");
    assert!(text.contains(&format!("--head {}", shas[1])), "{text}");
    // The sim's runs record no QEMU line: the materials say there is no script.
    assert!(
        text.contains("== Reproduce one run with one script\n(none: "),
        "{text}"
    );

    let reports = outbox::list(server.db(), 10).await.expect("list");
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].state.as_str(), "sent");
    assert!(reports[0].submission_id.is_some());
    server.stop().await;
}

#[tokio::test]
async fn regression_is_mailed_once_after_the_relay_recovers() {
    for backend in backends() {
        case(backend).await;
    }
}
