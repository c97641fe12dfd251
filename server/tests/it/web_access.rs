//! Dashboard sign-in over HTTP, on both backends: the session cookie's
//! flags, sign-out, CSRF refusals, the sign-in rate limit, the sign-in
//! wall for reading, and the report page's resend form.

use kbot_testkit::smtp_sink;

use kbot_server::mail::outbox::{self, OutboxState};
use kbot_testkit::{backends, TestServer};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;

const PASSWORD: &str = "a long enough password";

/// A client that shows redirects instead of following them.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("client")
}

/// `name=value` of the response's cookie `name` and its whole header.
fn set_cookie(response: &reqwest::Response, name: &str) -> (String, String) {
    let header = response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie in {:?}", response.headers()))
        .to_owned();
    let pair = header.split(';').next().unwrap_or_default().to_owned();
    (pair, header)
}

/// The `value` of `<input ... name="NAME" value="...">` in a page.
fn hidden(html: &str, name: &str) -> String {
    let at = html
        .find(&format!("name=\"{name}\" value=\""))
        .unwrap_or_else(|| panic!("no {name} field in {html}"));
    let rest = &html[at + name.len() + 15..];
    rest[..rest.find('"').expect("closing quote")].to_owned()
}

/// Opens the sign-in form; returns its cookie and token.
async fn sign_in_form(t: &TestServer, http: &reqwest::Client) -> (String, String) {
    let page = http
        .get(t.url("/signin"))
        .send()
        .await
        .expect("GET /signin");
    assert_eq!(page.status(), 200);
    let (cookie, _) = set_cookie(&page, "kbot_signin");
    let html = page.text().await.expect("page");
    (cookie, hidden(&html, "csrf"))
}

async fn post_sign_in(
    t: &TestServer,
    http: &reqwest::Client,
    name: &str,
    password: &str,
) -> reqwest::Response {
    post_sign_in_via(t, http, name, password, None).await
}

/// [`post_sign_in`] with an `X-Forwarded-For` header, as a proxy sends.
async fn post_sign_in_via(
    t: &TestServer,
    http: &reqwest::Client,
    name: &str,
    password: &str,
    forwarded_for: Option<&str>,
) -> reqwest::Response {
    let (cookie, token) = sign_in_form(t, http).await;
    let mut request = http.post(t.url("/signin")).header(COOKIE, cookie);
    if let Some(hops) = forwarded_for {
        request = request.header("x-forwarded-for", hops);
    }
    request
        .form(&[
            ("name", name),
            ("password", password),
            ("csrf", &token),
            ("next", "/agents"),
        ])
        .send()
        .await
        .expect("POST /signin")
}

#[tokio::test]
async fn sign_in_sign_out_and_csrf() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let http = client();
        kbot_server::access::password::add_user(t.db(), "dora", None, PASSWORD)
            .await
            .expect("add user");

        let wrong = post_sign_in(&t, &http, "dora", "not her password").await;
        assert_eq!(wrong.status(), 401, "{backend:?}");
        assert!(wrong
            .text()
            .await
            .expect("page")
            .contains("Wrong user name or password"));

        let ok = post_sign_in(&t, &http, "dora", PASSWORD).await;
        assert_eq!(ok.status(), 303, "{backend:?}");
        assert_eq!(ok.headers()[LOCATION], "/agents");
        let (session, header) = set_cookie(&ok, "kbot_session");
        for flag in ["HttpOnly", "SameSite=Lax", "Path=/"] {
            assert!(header.contains(flag), "{header}");
        }
        assert!(!header.contains("Secure"), "plain HTTP: {header}");

        let page = http.get(t.url("/")).header(COOKIE, &session).send().await;
        let html = page.expect("GET /").text().await.expect("page");
        assert!(
            html.contains("<span id=\"signed-in-as\">dora</span>"),
            "{html}"
        );
        let csrf = hidden(&html, "csrf");

        // Sign-out without the token, or with another one: 403, an HTML page.
        for body in [vec![], vec![("csrf", "0000")]] {
            let refused = http
                .post(t.url("/signout"))
                .header(COOKIE, &session)
                .form(&body);
            let refused = refused.send().await.expect("POST /signout");
            assert_eq!(refused.status(), 403, "{backend:?}");
            let html = refused.text().await.expect("page");
            assert!(
                html.contains("CSRF token") && html.contains("<html"),
                "{html}"
            );
        }
        // The sign-in form itself: its token must match its cookie.
        let forged = http
            .post(t.url("/signin"))
            .header(COOKIE, "kbot_signin=abc");
        let forged = forged.form(&[("name", "dora"), ("password", PASSWORD), ("csrf", "abd")]);
        assert_eq!(forged.send().await.expect("POST").status(), 403);

        let out = http.post(t.url("/signout")).header(COOKIE, &session);
        let out = out
            .form(&[("csrf", csrf.as_str())])
            .send()
            .await
            .expect("sign out");
        assert_eq!(out.status(), 303);
        let (cleared, header) = set_cookie(&out, "kbot_session");
        assert_eq!(cleared, "kbot_session=");
        assert!(header.contains("Max-Age=0"), "{header}");
        // The old cookie is dead on the server too.
        let page = http.get(t.url("/")).header(COOKIE, &session).send().await;
        let html = page.expect("GET /").text().await.expect("page");
        assert!(html.contains("id=\"sign-in\""), "{html}");
        t.stop().await;
    }
}

/// A job file that is not YAML comes back on the form with the reason, and
/// what was typed is kept (escaped).
#[tokio::test]
async fn the_submit_form_shows_a_bad_job_file() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let http = client();
        kbot_server::access::password::add_user(t.db(), "ivy", None, PASSWORD)
            .await
            .expect("add user");
        let signed_in = post_sign_in(&t, &http, "ivy", PASSWORD).await;
        let (session, _) = set_cookie(&signed_in, "kbot_session");
        let form = http
            .get(t.url("/submit"))
            .header(COOKIE, &session)
            .send()
            .await;
        let csrf = hidden(
            &form.expect("GET /submit").text().await.expect("page"),
            "csrf",
        );
        let bad = "testcase: [bw_pipe <i>\n";
        let posted = http.post(t.url("/submit")).header(COOKIE, &session);
        let fields = [
            ("csrf", csrf.as_str()),
            ("repo", "linux"),
            ("head", "main"),
            ("job_file", bad),
        ];
        let posted = posted.form(&fields).send().await.expect("POST /submit");
        assert_eq!(posted.status(), 422, "{backend:?}");
        let html = posted.text().await.expect("page");
        assert!(html.contains("id=\"submit-error\""), "{html}");
        assert!(
            html.contains("testcase: [bw_pipe &#60;i&#62;"),
            "kept, escaped: {html}"
        );
        t.stop().await;
    }
}

#[tokio::test]
async fn sign_in_is_rate_limited_per_user_name() {
    for backend in backends() {
        let t = TestServer::start_with(backend, |c| c.access.sign_in_attempts = 3).await;
        let http = client();
        kbot_server::access::password::add_user(t.db(), "erin", None, PASSWORD)
            .await
            .expect("add user");
        for _ in 0..3 {
            let wrong = post_sign_in(&t, &http, "erin", "guess").await;
            assert_eq!(wrong.status(), 401, "{backend:?}");
        }
        // Even the right password now waits for the window.
        let limited = post_sign_in(&t, &http, "Erin", PASSWORD).await;
        assert_eq!(limited.status(), 429, "{backend:?}");
        assert!(limited.headers().contains_key("retry-after"));
        let html = limited.text().await.expect("page");
        assert!(html.contains("Too many failed sign-ins"), "{html}");
        t.stop().await;
    }
}

/// Three failed sign-ins (under three names) from `from` through the
/// proxy (this test's loopback connection); then a fourth name's attempt
/// from `from`, and one from `other`: their statuses.
async fn per_address_limit(t: &TestServer, from: &str, other: &str) -> (u16, u16) {
    let http = client();
    for name in ["hal", "ida", "jon"] {
        let hops = format!("198.51.100.1, {from}");
        let wrong = post_sign_in_via(t, &http, name, "guess", Some(&hops)).await;
        assert_eq!(wrong.status(), 401);
    }
    let same = post_sign_in_via(t, &http, "kim", "guess", Some(from)).await;
    let other = post_sign_in_via(t, &http, "lou", "guess", Some(other)).await;
    (same.status().as_u16(), other.status().as_u16())
}

/// Behind a trusted proxy, sign-in is limited per forwarded client (the
/// rightmost hop the proxy added, not what the client wrote left of it);
/// from an untrusted peer the header is ignored and every caller shares
/// the peer's limit.
#[tokio::test]
async fn forwarded_clients_are_believed_only_from_trusted_proxies() {
    for backend in backends() {
        let trusted = TestServer::start_with(backend, |c| {
            c.access.sign_in_attempts = 3;
            c.access.trusted_proxies =
                kbot_server::access::proxy::TrustedProxies(vec!["127.0.0.0/8"
                    .parse()
                    .expect("CIDR")]);
        })
        .await;
        let (same, other) = per_address_limit(&trusted, "203.0.113.1", "203.0.113.2").await;
        assert_eq!((same, other), (429, 401), "{backend:?}: per client");
        trusted.stop().await;

        let untrusted = TestServer::start_with(backend, |c| c.access.sign_in_attempts = 3).await;
        let (same, other) = per_address_limit(&untrusted, "203.0.113.1", "203.0.113.2").await;
        assert_eq!((same, other), (429, 429), "{backend:?}: one shared peer");
        untrusted.stop().await;
    }
}

#[tokio::test]
async fn reading_can_require_sign_in() {
    for backend in backends() {
        let t = TestServer::start_with(backend, |c| c.access.read_requires_sign_in = true).await;
        let http = client();
        let (_, token) = kbot_server::auth::create_user_token(t.db(), "fay", None)
            .await
            .expect("token");
        kbot_server::access::password::add_user(t.db(), "fay", None, PASSWORD)
            .await
            .expect("password");

        let page = http.get(t.url("/agents")).send().await.expect("GET");
        assert_eq!(page.status(), 303, "{backend:?}");
        assert_eq!(page.headers()[LOCATION], "/signin?next=%2Fagents");
        let api = http
            .get(t.url("/api/v1/submissions"))
            .send()
            .await
            .expect("GET");
        assert_eq!(api.status(), 401, "{backend:?}");
        let api = http.get(t.url("/api/v1/submissions")).bearer_auth(&token);
        assert_eq!(api.send().await.expect("GET").status(), 200);
        assert_eq!(
            http.get(t.url("/healthz"))
                .send()
                .await
                .expect("GET")
                .status(),
            200
        );

        let ok = post_sign_in(&t, &http, "fay", PASSWORD).await;
        let (session, _) = set_cookie(&ok, "kbot_session");
        let page = http
            .get(t.url("/agents"))
            .header(COOKIE, session)
            .send()
            .await;
        assert_eq!(page.expect("GET").status(), 200, "{backend:?}");
        t.stop().await;
    }
}

/// An `uncertain` report (its sender stopped while handing it to the relay)
/// has a Resend button for a signed-in user: refused without the session's
/// CSRF token, and with it queued again and sent once; a sent report shows
/// no button and a second post is refused.
#[tokio::test]
async fn an_uncertain_report_is_resent_from_its_page() {
    for backend in backends() {
        let sink = smtp_sink::Sink::start(smtp_sink::Plan::default()).await;
        let port = sink.addr.port();
        let t =
            TestServer::start_with(backend, |c| c.mail = kbot_testkit::loopback_mail(port)).await;
        let http = client();
        kbot_server::access::password::add_user(t.db(), "gus", None, PASSWORD)
            .await
            .expect("add user");
        let message_id = "202612010400.0b5e55ed-kbot@kbot.test";
        queue_uncertain(t.db(), message_id).await;
        let path = format!("/reports/{message_id}");

        let anonymous = http.get(t.url(&path)).send().await.expect("GET");
        let html = anonymous.text().await.expect("page");
        assert!(!html.contains("id=\"resend\""), "{html}");
        assert!(html.contains("to resend this uncertain report"), "{html}");

        let ok = post_sign_in(&t, &http, "gus", PASSWORD).await;
        let (session, _) = set_cookie(&ok, "kbot_session");
        let page = http.get(t.url(&path)).header(COOKIE, &session).send().await;
        let html = page.expect("GET").text().await.expect("page");
        assert!(html.contains("id=\"resend\""), "{backend:?}: {html}");
        let csrf = hidden(&html, "csrf");

        let resend = format!("{path}/resend");
        let forged = http.post(t.url(&resend)).header(COOKIE, &session);
        let forged = forged.form(&[("csrf", "0000")]).send().await.expect("POST");
        assert_eq!(forged.status(), 403, "{backend:?}");
        assert_eq!(state_of(&t, message_id).await, "uncertain");
        assert!(sink.received().is_empty());

        let posted = http.post(t.url(&resend)).header(COOKIE, &session);
        let posted = posted.form(&[("csrf", csrf.as_str())]).send().await;
        let posted = posted.expect("POST");
        assert_eq!(posted.status(), 303, "{backend:?}");
        assert_eq!(posted.headers()[LOCATION], path.as_str());
        let mut state = String::new();
        for _ in 0..500 {
            state = state_of(&t, message_id).await;
            if state == "sent" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(state, "sent", "{backend:?}");
        assert_eq!(sink.received().len(), 1, "{backend:?}");

        let page = http.get(t.url(&path)).header(COOKIE, &session).send().await;
        let html = page.expect("GET").text().await.expect("page");
        assert!(!html.contains("id=\"resend\""), "sent: no button: {html}");
        let again = http.post(t.url(&resend)).header(COOKIE, &session);
        let again = again.form(&[("csrf", csrf.as_str())]).send().await;
        assert_eq!(again.expect("POST").status(), 409, "{backend:?}");
        t.stop().await;
        assert_eq!(sink.received().len(), 1, "{backend:?}: sent once");
    }
}

/// A report whose sender stopped mid-handoff, as the outbox records one.
async fn queue_uncertain(db: &kbot_server::db::Db, message_id: &str) {
    let report = kbot_testkit::outbox_report(message_id, OutboxState::Uncertain);
    let mut tx = db.begin().await.expect("begin");
    outbox::insert(&mut tx, &report).await.expect("insert");
    tx.commit().await.expect("commit");
}

async fn state_of(t: &TestServer, message_id: &str) -> String {
    outbox::by_message_id(t.db(), message_id)
        .await
        .expect("read")
        .expect("the report")
        .state
        .to_string()
}
