//! At most one copy per Message-ID across a crash of the mail sender, against
//! the loopback SMTP sink, on SQLite and PostgreSQL.
//!
//! The crash is a sender task aborted at an exact point of its SMTP session:
//! after the relay accepted the message but before the sender heard so (and
//! recorded it), or before DATA. The restart is a new sender, or a whole
//! server started on the same store.

use std::sync::Arc;
use std::time::Duration;

use kbot_server::db::Db;
use kbot_server::mail::outbox::{self, OutboxState};
use kbot_server::mail::{MailConfig, Sender};
use kbot_testkit::{backends, Backend, TestServer};
use serde_json::Value;

use kbot_testkit::smtp_sink as sink;

const MESSAGE_ID: &str = "202612010400.c0ffee01-kbot@kbot.test";

fn config(port: u16) -> MailConfig {
    MailConfig {
        claim_ttl: Duration::from_secs(60),
        ..kbot_testkit::loopback_mail(port)
    }
}

async fn queue(db: &Db) -> i64 {
    let report = kbot_testkit::outbox_report(MESSAGE_ID, OutboxState::Pending);
    let mut tx = db.begin().await.expect("begin");
    let id = outbox::insert(&mut tx, &report)
        .await
        .expect("insert")
        .expect("a new row");
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

/// One sender attempt, killed once `at` holds for the sink. Its claim
/// expires at once (TTL 0), as if the restart came after the claim's TTL.
async fn crash_sender(db: &Db, sink: &sink::Sink, at: impl FnMut() -> bool) {
    let doomed = Sender::new(
        db.clone(),
        Arc::new(MailConfig {
            claim_ttl: Duration::ZERO,
            ..config(sink.addr.port())
        }),
    );
    let task = tokio::spawn(async move { doomed.attempt_one().await });
    assert!(
        wait_for(Duration::from_secs(20), at).await,
        "the sender never reached the crash point"
    );
    task.abort();
    assert!(
        task.await.is_err_and(|e| e.is_cancelled()),
        "killed mid-send"
    );
}

async fn report_json(server: &TestServer, path: &str) -> Value {
    server
        .http
        .get(server.url(&format!("/api/v1/reports/{MESSAGE_ID}{path}")))
        .send()
        .await
        .expect("GET report")
        .json()
        .await
        .expect("report JSON")
}

async fn crash_after_accept(backend: Backend) {
    let sink = sink::Sink::start(sink::Plan {
        hold_after_accept: true,
        ..Default::default()
    })
    .await;
    let server = TestServer::start_with(backend, |c| c.mail = MailConfig::disabled()).await;
    let id = queue(server.db()).await;
    crash_sender(server.db(), &sink, || sink.received().len() == 1).await;
    let row = outbox::by_id(server.db(), id)
        .await
        .expect("read")
        .expect("row");
    assert_eq!(
        row.state.as_str(),
        "handed",
        "{backend:?}: recorded before DATA"
    );
    assert!(row.handed_at.is_some());

    // The restart: a whole server with mail on, on the same store.
    sink.shared.plan.lock().expect("lock").hold_after_accept = false;
    let port = sink.addr.port();
    let server = server.restart(|c| c.mail = config(port)).await;
    let mut state = Value::Null;
    for _ in 0..500 {
        state = report_json(&server, "").await["state"].clone();
        if state == "uncertain" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(state, "uncertain", "{backend:?}");
    // Nothing is due: another sender pass finds no work and sends nothing.
    let idle = Sender::new(server.db().clone(), Arc::new(config(port)));
    assert!(!idle.attempt_one().await.expect("a pass"));
    assert_eq!(
        sink.received().len(),
        1,
        "{backend:?}: not resent by itself"
    );
    let shown = report_json(&server, "").await;
    assert_eq!(shown["delivery"][0]["outcome"], "uncertain", "{shown}");
    assert_eq!(shown["attempts"], 1);

    // An operator decides to send it again.
    let (_, token) = kbot_server::auth::create_user_token(server.db(), "operator", None)
        .await
        .expect("user token");
    let resent = server
        .http
        .post(server.url(&format!("/api/v1/reports/{MESSAGE_ID}/resend")))
        .bearer_auth(&token)
        .send()
        .await
        .expect("resend");
    assert_eq!(resent.status(), 200, "{backend:?}");
    assert!(wait_for(Duration::from_secs(20), || sink.received().len() == 2).await);
    let mut done = Value::Null;
    for _ in 0..500 {
        done = report_json(&server, "").await;
        if done["state"] == "sent" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let outcomes: Vec<&str> = done["delivery"]
        .as_array()
        .expect("attempts")
        .iter()
        .filter_map(|a| a["outcome"].as_str())
        .collect();
    assert_eq!(outcomes, ["uncertain", "sent"], "{backend:?}: {done}");
    // A sent report is not resent.
    let again = server
        .http
        .post(server.url(&format!("/api/v1/reports/{MESSAGE_ID}/resend")))
        .bearer_auth(&token)
        .send()
        .await
        .expect("resend again");
    assert_eq!(again.status(), 409);
    server.stop().await;
    assert_eq!(sink.received().len(), 2);
}

#[tokio::test]
async fn a_sender_killed_after_the_relay_accepted_sends_no_second_copy() {
    for backend in backends() {
        crash_after_accept(backend).await;
    }
}

async fn crash_before_data(backend: Backend) {
    let sink = sink::Sink::start(sink::Plan {
        hold_at_rcpt: true,
        ..Default::default()
    })
    .await;
    let store = kbot_testkit::TestStore::new(backend).await;
    let db = store.connect().await;
    let id = queue(&db).await;
    crash_sender(&db, &sink, || {
        *sink.shared.connections.lock().expect("lock") == 1
    })
    .await;
    let row = outbox::by_id(&db, id).await.expect("read").expect("row");
    assert_eq!(
        row.state.as_str(),
        "sending",
        "{backend:?}: stopped before DATA"
    );

    // The relay never had the message: the restarted sender sends it.
    sink.shared.plan.lock().expect("lock").hold_at_rcpt = false;
    let restarted = Sender::new(store.connect().await, Arc::new(config(sink.addr.port())));
    assert!(restarted.attempt_one().await.expect("an attempt"));
    assert!(
        !restarted.attempt_one().await.expect("a pass"),
        "nothing left"
    );
    assert_eq!(sink.received().len(), 1, "{backend:?}");
    let row = outbox::by_id(&db, id).await.expect("read").expect("row");
    assert_eq!((row.state.as_str(), row.attempts), ("sent", 2), "{row:?}");
    db.close().await;
}

#[tokio::test]
async fn a_sender_killed_before_data_is_retried_and_sends_once() {
    for backend in backends() {
        crash_before_data(backend).await;
    }
}
