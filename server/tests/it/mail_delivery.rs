//! Report delivery against a real SMTP server on loopback (written here with
//! tokio): the exact bytes arrive; an outage (421 greetings, a 451 after DATA,
//! connection refused) delays a report but loses none and sends none twice,
//! even with two senders (replicas) on one store; the dashboard serves it.

use std::sync::Arc;
use std::time::Duration;

use kbot_server::db::Db;
use kbot_server::mail::outbox::{self, NewReport};
use kbot_server::mail::smtp::{self, Delivery};
use kbot_server::mail::{MailConfig, Sender};
use kbot_testkit::{backends, Backend, TestServer, TestStore};
use tokio::sync::watch;

use kbot_testkit::smtp_sink as sink;

const MESSAGE_ID: &str = "202611041404.befe64cd-kbot@kbot.test";

fn message() -> String {
    format!(
        "From: kernel test robot <kbot@kbot.test>\nTo: Dev <dev@example.org>\n\
         Subject: [linux:master] [fs/pipe] f7f4665dc5: lmbench3.PIPE.bandwidth.MB/sec 18.5% regression\n\
         Message-ID: <{MESSAGE_ID}>\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\
         Content-Transfer-Encoding: 8bit\n\nHello,\n\n     29142 \u{b1}  2%     -18.5%      23737\n\
         .a line that starts with a dot\n"
    )
}

fn fast_config(port: u16) -> MailConfig {
    MailConfig {
        claim_ttl: Duration::from_secs(60),
        ..kbot_testkit::loopback_mail(port)
    }
}

fn new_report(now: i64) -> NewReport {
    NewReport {
        message_id: MESSAGE_ID.into(),
        submission_id: None,
        atomic_job_id: None,
        bisection_id: None,
        kind: outbox::ReportKind::Regression,
        state: outbox::OutboxState::Pending,
        subject:
            "[linux:master] [fs/pipe] f7f4665dc5: lmbench3.PIPE.bandwidth.MB/sec 18.5% regression"
                .into(),
        envelope_from: "kbot@kbot.test".into(),
        recipients: vec!["dev@example.org".into(), "list@example.org".into()].into(),
        message: message(),
        created_at: now,
        send_after: now,
        culprit: None,
        facts: None,
        thread: None,
    }
}

async fn queue(db: &Db) -> i64 {
    let mut tx = db.begin().await.expect("begin");
    let id = outbox::insert(&mut tx, &new_report(kbot_server::time::now_ms()))
        .await
        .expect("insert")
        .expect("new row");
    // The same regression recorded again queues nothing.
    let again = outbox::insert(&mut tx, &new_report(kbot_server::time::now_ms()))
        .await
        .expect("insert again");
    assert_eq!(again, None);
    tx.commit().await.expect("commit");
    id
}

/// Waits until `cond` holds, up to `limit`.
async fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

#[tokio::test]
async fn delivers_the_exact_message() {
    let sink = sink::Sink::start(sink::Plan::default()).await;
    let to = vec!["dev@example.org".to_owned(), "list@example.org".to_owned()];
    let outcome = smtp::deliver(
        &kbot_testkit::loopback_smtp(sink.addr.port()),
        "kbot@kbot.test",
        &to,
        &message(),
    )
    .await;
    assert_eq!(outcome, Delivery::Sent);
    let got = sink.received();
    assert_eq!(got.len(), 1);
    // The body is 8-bit (the ± of the compare table) and the relay offers 8BITMIME.
    assert_eq!(got[0].mail_from, "<kbot@kbot.test> BODY=8BITMIME");
    assert_eq!(
        got[0].rcpt_to,
        vec!["<dev@example.org>", "<list@example.org>"]
    );
    assert_eq!(got[0].data, message().replace('\n', "\r\n"));
}

#[tokio::test]
async fn refusals_are_classified() {
    let sink = sink::Sink::start(sink::Plan {
        reject_recipients: true,
        ..Default::default()
    })
    .await;
    let to = vec!["nobody@example.org".to_owned()];
    let permanent = smtp::deliver(
        &kbot_testkit::loopback_smtp(sink.addr.port()),
        "kbot@kbot.test",
        &to,
        &message(),
    )
    .await;
    assert!(matches!(permanent, Delivery::Permanent(_)), "{permanent:?}");

    let busy = sink::Sink::start(sink::Plan {
        refuse_connections: 1,
        ..Default::default()
    })
    .await;
    let transient = smtp::deliver(
        &kbot_testkit::loopback_smtp(busy.addr.port()),
        "kbot@kbot.test",
        &to,
        &message(),
    )
    .await;
    assert!(matches!(transient, Delivery::Transient(_)), "{transient:?}");

    let bad = smtp::deliver(
        &kbot_testkit::loopback_smtp(busy.addr.port()),
        "not an address",
        &to,
        &message(),
    )
    .await;
    assert!(matches!(bad, Delivery::Permanent(_)), "{bad:?}");
}

/// Two senders, as two replicas would run, each on its own connection pool.
async fn start_senders(
    store: &TestStore,
    config: MailConfig,
) -> (watch::Sender<bool>, Vec<tokio::task::JoinHandle<()>>) {
    let (stop, stopped) = watch::channel(false);
    let config = Arc::new(config);
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let sender = Sender::new(store.connect().await, config.clone());
        tasks.push(sender.spawn(stopped.clone()));
    }
    (stop, tasks)
}

async fn stop_senders(stop: watch::Sender<bool>, tasks: Vec<tokio::task::JoinHandle<()>>) {
    stop.send(true).expect("senders listen");
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(15), t)
            .await
            .expect("sender stops on shutdown")
            .expect("sender task ends cleanly");
    }
}

async fn outage_case(backend: Backend) {
    let store = TestStore::new(backend).await;
    let db = store.connect().await;
    let id = queue(&db).await;
    let sink = sink::Sink::start(sink::Plan {
        refuse_connections: 3,
        defer_messages: 1,
        ..Default::default()
    })
    .await;
    let (stop, tasks) = start_senders(&store, fast_config(sink.addr.port())).await;
    assert!(
        wait_for(Duration::from_secs(30), || !sink.received().is_empty()).await,
        "{backend:?}: the report never arrived"
    );
    // Give a duplicate every chance to show up before counting.
    tokio::time::sleep(Duration::from_millis(600)).await;
    stop_senders(stop, tasks).await;

    let got = sink.received();
    assert_eq!(got.len(), 1, "{backend:?}: delivered exactly once");
    assert!(got[0]
        .data
        .contains(&format!("Message-ID: <{MESSAGE_ID}>\r\n")));
    let row = outbox::by_message_id(&db, MESSAGE_ID)
        .await
        .expect("read")
        .expect("row");
    assert_eq!(row.state.as_str(), "sent");
    assert_eq!(
        row.attempts, 5,
        "3 refused connections, 1 deferred message, 1 success"
    );
    let attempts = outbox::attempts(&db, id).await.expect("attempts");
    let outcomes: Vec<&str> = attempts.iter().map(|a| a.outcome.as_str()).collect();
    assert_eq!(
        outcomes,
        ["transient", "transient", "transient", "transient", "sent"]
    );
    let numbers: Vec<i64> = attempts.iter().map(|a| a.attempt).collect();
    assert_eq!(numbers, [1, 2, 3, 4, 5]);
    // Backoff: each retry waited at least the base delay.
    for w in attempts.windows(2) {
        assert!(w[1].started_at - w[0].finished_at >= 50, "{attempts:?}");
    }
    db.close().await;
}

#[tokio::test]
async fn smtp_outage_delays_but_loses_nothing_and_sends_once() {
    for backend in backends() {
        outage_case(backend).await;
    }
}

#[tokio::test]
async fn connection_refused_until_the_relay_comes_up() {
    let store = TestStore::new(Backend::Sqlite).await;
    let db = store.connect().await;
    queue(&db).await;
    // A port nobody listens on, for now.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let (stop, tasks) = start_senders(&store, fast_config(port)).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let row = outbox::by_message_id(&db, MESSAGE_ID)
        .await
        .expect("read")
        .expect("row");
    assert!(
        row.attempts >= 2,
        "retried while the relay was down: {row:?}"
    );
    assert_eq!(row.state.as_str(), "pending");
    assert!(row.last_error.is_some());

    let sink = sink::Sink::start_on(
        format!("127.0.0.1:{port}").parse().expect("addr"),
        sink::Plan::default(),
    )
    .await;
    assert!(wait_for(Duration::from_secs(15), || !sink.received().is_empty()).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop_senders(stop, tasks).await;
    assert_eq!(sink.received().len(), 1);
    let row = outbox::by_message_id(&db, MESSAGE_ID)
        .await
        .expect("read")
        .expect("row");
    assert_eq!(row.state.as_str(), "sent");
    db.close().await;
}

#[tokio::test]
async fn permanent_refusal_stops_retrying() {
    let store = TestStore::new(Backend::Sqlite).await;
    let db = store.connect().await;
    queue(&db).await;
    let sink = sink::Sink::start(sink::Plan {
        reject_recipients: true,
        ..Default::default()
    })
    .await;
    let (stop, tasks) = start_senders(&store, fast_config(sink.addr.port())).await;
    let db2 = db.clone();
    let mut failed = false;
    for _ in 0..250 {
        let row = outbox::by_message_id(&db2, MESSAGE_ID)
            .await
            .expect("read")
            .expect("row");
        if row.state.as_str() == "failed" {
            failed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(failed, "a 550 marks the report failed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop_senders(stop, tasks).await;
    let row = outbox::by_message_id(&db, MESSAGE_ID)
        .await
        .expect("read")
        .expect("row");
    assert_eq!(row.attempts, 1, "no retry after a permanent refusal");
    assert!(
        row.last_error.as_deref().unwrap_or("").contains("550"),
        "{row:?}"
    );
    assert!(sink.received().is_empty());
    db.close().await;
}

#[tokio::test]
async fn server_sends_queued_reports_and_serves_them() {
    let sink = sink::Sink::start(sink::Plan {
        refuse_connections: 1,
        ..Default::default()
    })
    .await;
    let port = sink.addr.port();
    let server = TestServer::start_with(Backend::Sqlite, |c| c.mail = fast_config(port)).await;
    queue(server.db()).await;
    assert!(wait_for(Duration::from_secs(20), || !sink.received().is_empty()).await);

    // The sink has the message before the sender records the relay's
    // answer: the row says `sent` a moment later.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let list = loop {
        let list: serde_json::Value = server
            .http
            .get(server.url("/api/v1/reports"))
            .send()
            .await
            .expect("list")
            .json()
            .await
            .expect("json");
        if list[0]["state"] == "sent" || tokio::time::Instant::now() >= deadline {
            break list;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(list[0]["message_id"], MESSAGE_ID);
    assert_eq!(list[0]["state"], "sent", "{list}");

    let page = server
        .http
        .get(server.url(&format!("/reports/{MESSAGE_ID}")))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(
        html.contains("lmbench3.PIPE.bandwidth.MB/sec 18.5% regression"),
        "{html}"
    );
    assert!(html.contains("29142 \u{b1}  2%"));
    assert!(html.contains("transient") && html.contains("sent"));

    let mbox = server
        .http
        .get(server.url(&format!("/reports/{MESSAGE_ID}/mbox")))
        .send()
        .await
        .expect("mbox");
    assert_eq!(mbox.status(), 200);
    assert_eq!(mbox.headers()["content-type"], "application/mbox");
    let text = mbox.text().await.expect("mbox text");
    assert!(text.starts_with("From kbot@localhost "), "{text}");
    assert!(text.contains(&format!("\nMessage-ID: <{MESSAGE_ID}>\n")));
    assert!(text.ends_with("\n.a line that starts with a dot\n\n"));

    let missing = server
        .http
        .get(server.url("/reports/nope@nowhere/mbox"))
        .send()
        .await
        .expect("missing");
    assert_eq!(missing.status(), 404);
    server.stop().await;
    assert_eq!(sink.received().len(), 1);
}

/// Reports queued while the relay is down (nothing listens on its port):
/// the server's sender retries each with the configured exponential
/// backoff, records every failed attempt, loses none; once the relay comes
/// up on that port each report arrives exactly once.
async fn relay_down_then_up(backend: Backend) {
    const REPORTS: usize = 3;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let mut config = fast_config(port);
    config.retry_base = Duration::from_millis(100);
    config.retry_max = Duration::from_millis(800);
    let backoff = config.clone();
    let server = TestServer::start_with(backend, |c| c.mail = config).await;
    let ids: Vec<String> = (0..REPORTS).map(|i| format!("{i}.{MESSAGE_ID}")).collect();
    let mut tx = server.db().begin().await.expect("begin");
    for id in &ids {
        let mut report = new_report(kbot_server::time::now_ms());
        report.message = report.message.replace(MESSAGE_ID, id);
        report.message_id = id.clone();
        outbox::insert(&mut tx, &report)
            .await
            .expect("insert")
            .expect("new row");
    }
    tx.commit().await.expect("commit");

    // Four attempts each while the relay is down.
    let db = server.db().clone();
    let mut rows = Vec::new();
    for _ in 0..500 {
        rows = outbox::list(&db, 10).await.expect("list");
        if rows.iter().all(|r| r.attempts >= 4) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(rows.len(), REPORTS);
    for row in &rows {
        assert!(row.attempts >= 4, "{backend:?}: {row:?}");
        // Waiting for its next attempt, or in one.
        assert!(
            matches!(row.state.as_str(), "pending" | "sending"),
            "{row:?}"
        );
        assert!(row.last_error.is_some(), "{row:?}");
        let attempts = outbox::attempts(&db, row.id).await.expect("attempts");
        for (n, w) in attempts.windows(2).enumerate() {
            let waited = w[1].started_at - w[0].finished_at;
            let due = i64::try_from(backoff.backoff(n as u32 + 1).as_millis()).expect("ms");
            assert!(
                waited >= due,
                "{backend:?}: attempt {} came {waited} ms after the one before, not {due}: {attempts:?}",
                n + 2
            );
            assert_eq!(w[0].outcome, outbox::AttemptOutcome::Transient);
        }
    }

    let sink = sink::Sink::start_on(
        format!("127.0.0.1:{port}").parse().expect("addr"),
        sink::Plan::default(),
    )
    .await;
    assert!(
        wait_for(Duration::from_secs(15), || sink.received().len() >= REPORTS).await,
        "{backend:?}: the reports never arrived"
    );
    // Give a duplicate every chance to show up before counting.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let mut got: Vec<String> = sink
        .received()
        .iter()
        .filter_map(|m| {
            m.data
                .lines()
                .find_map(|l| l.strip_prefix("Message-ID: <"))
                .map(|l| l.trim_end_matches('>').to_string())
        })
        .collect();
    got.sort();
    assert_eq!(got, ids, "{backend:?}: each report exactly once");
    for row in outbox::list(&db, 10).await.expect("list") {
        assert_eq!(row.state.as_str(), "sent", "{row:?}");
        let attempts = outbox::attempts(&db, row.id).await.expect("attempts");
        let sent = attempts
            .iter()
            .filter(|a| a.outcome == outbox::AttemptOutcome::Sent)
            .count();
        assert_eq!(sent, 1, "{attempts:?}");
    }
    server.stop().await;
}

#[tokio::test]
async fn relay_down_then_up_delivers_every_report_once_with_backoff() {
    for backend in backends() {
        relay_down_then_up(backend).await;
    }
}
