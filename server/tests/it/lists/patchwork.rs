//! Patchwork checks against a local server of patchwork's REST API (the
//! patchwork project's container does not run here): `GET
//! /api/1.2/patches/?project=&msgid=` and `POST /api/1.2/patches/{id}/checks/`
//! with a `Token` header, as patchwork 3.x answers them (403 without the
//! token, 400 for a state or context it refuses). One list, four series: a
//! clean one, one whose patch 2 regresses, one that does not build and one
//! that does not apply; every patch ends with the check its series earned,
//! after a `pending` one while it was tested.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::lists::{add_list_with, append, series_when, Author, Posted, BUILD_LOG};
use crate::sim::fleet::{Fleet, GOOD};
use crate::sim::{id, list, poll, str_of, Sim, World, DEADLINE};
use kbot_testkit::backends;
use kbot_testkit::inbox::PublicInbox;

const TOKEN: &str = "pw-token-1234";
const PROJECT: &str = "fsdevel";

/// What the server holds: patches by Message-ID, and the checks posted.
#[derive(Default)]
struct Patchwork {
    patches: BTreeMap<String, i64>,
    checks: Vec<(i64, Value)>,
}

type Shared = Arc<Mutex<Patchwork>>;

fn authorized(headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Token {TOKEN}"))
}

async fn patches(
    State(pw): State<Shared>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Json<Value> {
    let pw = pw.lock().expect("lock");
    let wanted = q
        .get("msgid")
        .map(|m| m.trim_matches(['<', '>']).to_owned());
    let project_ok = q.get("project").is_none_or(|p| p == PROJECT);
    let found: Vec<Value> = pw
        .patches
        .iter()
        .filter(|(m, _)| project_ok && wanted.as_ref().is_none_or(|w| w == *m))
        .map(|(m, id)| json!({"id": id, "msgid": format!("<{m}>"), "project": {"link_name": PROJECT}}))
        .collect();
    Json(Value::Array(found))
}

async fn post_check(
    State(pw): State<Shared>,
    UrlPath(patch): UrlPath<i64>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    if !authorized(&headers) {
        let detail = json!({"detail": "Authentication credentials were not provided."});
        return (StatusCode::FORBIDDEN, Json(detail));
    }
    let mut pw = pw.lock().expect("lock");
    if !pw.patches.values().any(|p| *p == patch) {
        return (StatusCode::NOT_FOUND, Json(json!({"detail": "Not found."})));
    }
    let state_ok = ["pending", "success", "warning", "fail"].contains(&str_of(&body["state"]));
    let context = str_of(&body["context"]);
    let context_ok = !context.is_empty()
        && context
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
    if !state_ok || !context_ok {
        return (StatusCode::BAD_REQUEST, Json(json!({"state": ["invalid"]})));
    }
    pw.checks.push((patch, body.clone()));
    (StatusCode::CREATED, Json(body))
}

async fn start_patchwork(pw: Shared) -> String {
    let app = Router::new()
        .route("/api/1.2/patches/", get(patches))
        .route(
            "/api/1.2/patches/{id}/checks/",
            axum::routing::post(post_check),
        )
        .with_state(pw);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// The states posted for the patch mail `message_id`, in order.
fn states(pw: &Shared, message_id: &str) -> Vec<String> {
    let pw = pw.lock().expect("lock");
    let Some(id) = pw.patches.get(message_id).copied() else {
        return Vec::new();
    };
    pw.checks
        .iter()
        .filter(|(p, _)| *p == id)
        .map(|(_, c)| str_of(&c["state"]).to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tested_patch_gets_its_check_in_patchwork() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    author.at(&base);
    author.commit("fs/clean.c", "clean\n", "fs: a clean change");
    let clean = author.post(1, 1, &base, &[]);
    author.at(&base);
    author.commit("Documentation/pipe.rst", "pipes\n", "Documentation: pipes");
    author.commit("fs/pipe.c", "zero\n", "pipe: zero the page on every write");
    author.commit(
        "fs/pipe.c",
        "zero\n/* c */\n",
        "pipe: comment the write path",
    );
    let regress = author.post(3, 1, &base, &[]);
    author.at(&base);
    author.commit("fs/splice.c", "syntax error\n", "splice: break the build");
    let broken = author.post(1, 1, &base, &[]);
    author.at(&base);
    author.commit("kernel/sys.c", "unposted\n", "sys: a change nobody posted");
    author.commit(
        "kernel/sys.c",
        "unposted\nposted\n",
        "sys: on the unposted change",
    );
    let orphan = author.post(1, 1, &base, &[]);
    let patch_mails = |p: &Posted| -> Vec<String> {
        let skip = usize::from(p.mails.len() > 1);
        (skip..p.mails.len()).map(|i| p.message_id(i)).collect()
    };
    for backend in backends() {
        let pw: Shared = Arc::default();
        {
            let mut known = pw.lock().expect("lock");
            for (n, m) in [&clean, &regress, &broken, &orphan]
                .into_iter()
                .flat_map(patch_mails)
                .enumerate()
            {
                known.patches.insert(m, 100 + n as i64);
            }
        }
        let url = start_patchwork(pw.clone()).await;
        let sim = Sim::start(backend, &world).await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let inbox = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
        for p in [&clean, &regress, &broken, &orphan] {
            append(&inbox, &p.mails);
        }
        let settings = json!({"patchwork": {"url": url, "project": PROJECT, "token": TOKEN}});
        let l = add_list_with(&sim, inbox.root(), settings).await;
        let view = sim.get(&format!("/api/v1/lists/{l}")).await;
        assert_eq!(view["list"]["patchwork_url"], url.as_str(), "{view}");
        assert!(
            !view.to_string().contains(TOKEN),
            "the token is never shown: {view}"
        );
        let fleet = Fleet::enroll(&sim, 2).await;

        let s = series_when(&sim, &regress.message_id(0), |s| s["state"] == "testing").await;
        let detail = sim.get(&format!("/api/v1/series/{}", id(&s))).await;
        for p in list(detail["parts"].clone())
            .iter()
            .filter(|p| p["index"].as_u64() >= Some(2))
        {
            world.model.set(str_of(&p["commit"]), GOOD * 0.8);
        }
        let s = series_when(&sim, &broken.message_id(0), |s| s["state"] == "testing").await;
        world
            .model
            .fail_saying(str_of(&s["tip"]), "build_failed", BUILD_LOG);

        let last = |m: &str| states(&pw, m).last().cloned().unwrap_or_default();
        let expected: Vec<(String, &str)> = vec![
            (clean.message_id(0), "success"),
            (regress.message_id(1), "success"),
            (regress.message_id(2), "warning"),
            (regress.message_id(3), "success"),
            (broken.message_id(0), "fail"),
            (orphan.message_id(0), "fail"),
        ];
        fleet
            .run_until(poll(DEADLINE, || async {
                let now: Vec<(String, String)> =
                    expected.iter().map(|(m, _)| (m.clone(), last(m))).collect();
                let done = expected
                    .iter()
                    .zip(&now)
                    .all(|((_, want), (_, got))| got == want);
                if done {
                    Ok(())
                } else {
                    Err(format!("{now:?}"))
                }
            }))
            .await;
        for m in [
            clean.message_id(0),
            regress.message_id(2),
            broken.message_id(0),
        ] {
            assert_eq!(
                states(&pw, &m).first().map(String::as_str),
                Some("pending"),
                "{backend:?}: {m}"
            );
        }
        let checks = pw.lock().expect("lock").checks.clone();
        for (_, c) in &checks {
            assert_eq!(str_of(&c["context"]), "kbot", "{c}");
            assert!(str_of(&c["target_url"]).contains("/series/"), "{c}");
        }
        assert!(
            checks
                .iter()
                .any(|(_, c)| str_of(&c["description"])
                    .contains("regression reported on this patch")),
            "{checks:?}"
        );
        sim.stop().await;
    }
}
