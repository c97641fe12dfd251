//! Mailing lists end to end against simulated agents, on every backend: a
//! public-inbox v2 archive written by the test from `git format-patch
//! --cover-letter --thread --base` output of a real repository; series
//! assembled, applied with `git am -3` into `refs/kbot/series/...`, tested,
//! bisected inside the series and answered in the patch's thread at a real
//! SMTP server; a series that does not apply and a tip that does not build
//! answered; v2 tested clean; a discussion reply ignored; `#kbot test` with
//! an inline fix and `#kbot invalid` from a stranger (recorded, not
//! answered); a `Closes:` commit on
//! a watched branch closing the regression once its rerun shows the KPI back.
//!
//! The kernel-sized form of the same scenario is `agent/tests/e2e/series.rs`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::sim::fleet::{Fleet, GOOD};
use crate::sim::{self, id, list, poll, str_of, Sim, World, DEADLINE, JOB, KPI, REPO};
use kbot_testkit::inbox::PublicInbox;
use kbot_testkit::smtp_sink::{self, Received};
use kbot_testkit::{backends, gitrepo::git};

pub(crate) const PAT: &str = "Pat Pipe <pat@example.org>";
pub(crate) const LIST: &str = "fsdevel@lists.example.org";
const WEB: &str = "https://lore.example.org/fsdevel";

/// A posted series: the mails `git format-patch` wrote, cover first.
pub(crate) struct Posted {
    pub(crate) mails: Vec<String>,
}

impl Posted {
    pub(crate) fn message_id(&self, i: usize) -> String {
        header(&self.mails[i], "Message-ID")
    }

    pub(crate) fn subject(&self, i: usize) -> String {
        header(&self.mails[i], "Subject")
    }
}

pub(crate) use kbot_testkit::smtp_sink::header;

/// A working clone of the world's repository for the patch author.
pub(crate) struct Author {
    pub(crate) dir: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Author {
    pub(crate) fn new(world: &World) -> Author {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("work");
        git(
            tmp.path(),
            &[
                "clone",
                "-q",
                world.repo.url(),
                dir.to_str().expect("utf-8"),
            ],
        );
        for (k, v) in [("user.name", "Pat Pipe"), ("user.email", "pat@example.org")] {
            git(&dir, &["config", k, v]);
        }
        Author { dir, _tmp: tmp }
    }

    pub(crate) fn at(&self, rev: &str) {
        git(&self.dir, &["checkout", "-q", "--detach", rev]);
    }

    pub(crate) fn commit(&self, file: &str, text: &str, subject: &str) -> String {
        let path = self.dir.join(file);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, text).expect("write");
        git(&self.dir, &["add", "-A"]);
        git(
            &self.dir,
            &["commit", "-q", "-m", subject, &format!("--author={PAT}")],
        );
        git(&self.dir, &["rev-parse", "HEAD"])
    }

    /// `git format-patch` of the last `n` commits, as mails (no From_ line).
    pub(crate) fn post(&self, n: usize, version: u32, base: &str, extra: &[&str]) -> Posted {
        let tag = format!("v{version}-{}", rand_tag());
        let out = self.dir.join(format!("out-{tag}"));
        let mut args = vec![
            "format-patch".to_owned(),
            "-q".into(),
            format!("-{n}"),
            format!("-v{version}"),
            "--thread=shallow".into(),
            format!("--base={base}"),
            format!("--to={LIST}"),
            "--cc=Maint Ainer <maint@example.org>".into(),
            "-o".into(),
            out.to_string_lossy().into_owned(),
        ];
        if n > 1 {
            args.push("--cover-letter".into());
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        git(&self.dir, &args);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&out)
            .expect("read out")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        let mails = files
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(f).expect("read patch");
                let text = text
                    .split_once('\n')
                    .map(|(_, rest)| rest.to_owned())
                    .unwrap_or(text);
                // format-patch names a cover letter by the second it ran in:
                // versions made in one second would share one Message-ID.
                text.replace("<cover.", &format!("<cover-{tag}."))
                    .replace("*** SUBJECT HERE ***", "pipe: faster small writes")
                    .replace(
                        "*** BLURB HERE ***",
                        "This series makes small pipe writes faster.",
                    )
            })
            .collect();
        Posted { mails }
    }
}

fn rand_tag() -> u32 {
    rand::random::<u32>()
}

/// A reply to `parent` (id and subject) by `from`, with `body`.
pub(crate) fn reply(
    from: &str,
    parent_id: &str,
    parent_subject: &str,
    id: &str,
    body: &str,
) -> String {
    format!(
        "From: {from}\nTo: {LIST}\nSubject: Re: {parent_subject}\nDate: Wed, 02 Dec 2026 09:00:00 +0000\n\
         Message-ID: <{id}>\nIn-Reply-To: <{parent_id}>\nReferences: <{parent_id}>\n\
         MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n{body}"
    )
}

pub(crate) fn append(inbox: &PublicInbox, mails: &[String]) {
    for m in mails {
        inbox.append(m.as_bytes());
    }
}

/// The list's series, newest first.
pub(crate) async fn series(sim: &Sim<'_>) -> Vec<Value> {
    list(sim.get("/api/v1/series").await)
}

/// Waits until the series whose key is `key` satisfies `ready`.
pub(crate) async fn series_when(sim: &Sim<'_>, key: &str, ready: impl Fn(&Value) -> bool) -> Value {
    poll(DEADLINE, || async {
        let all = series(sim).await;
        match all.iter().find(|s| s["key"] == key) {
            Some(s) if ready(s) => Ok(s.clone()),
            Some(s) => Err(format!("{s} among {all:#?}")),
            None => Err(format!("no series {key}: {all:#?}")),
        }
    })
    .await
}

pub(crate) async fn mail_when(
    sink: &smtp_sink::Sink,
    what: &str,
    pick: impl Fn(&str) -> bool,
) -> Received {
    poll(DEADLINE, || async {
        let got = sink.received();
        got.iter()
            .find(|m| pick(&m.data.replace("\r\n", "\n")))
            .cloned()
            .ok_or_else(|| format!("no mail {what} among {} mails", got.len()))
    })
    .await
}

pub(crate) fn in_reply_to(data: &str, parent: &str) -> bool {
    data.contains(&format!("\nIn-Reply-To: <{parent}>\n"))
}

/// What the test posts and where.
struct Scenario {
    base: String,
    /// v3 brings v1's slowdown back (the same patch-id as v1's patch 2).
    v3: Posted,
    /// The author's own commit of v1's patch 2 (the server applies its own).
    v1_second: String,
    v1: Posted,
    broken: Posted,
    build: Posted,
    v2: Posted,
    author: Author,
}

fn scenario(world: &World) -> Scenario {
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(world);
    author.at(&base);
    author.commit(
        "Documentation/pipe.rst",
        "pipes\n",
        "Documentation: describe pipe buffers",
    );
    let v1_second = author.commit(
        "fs/pipe.c",
        "zero pages on every write\n",
        "pipe: zero the page on every write",
    );
    author.commit(
        "fs/pipe.c",
        "zero pages on every write\n/* tuned */\n",
        "pipe: comment the write path",
    );
    let v1 = author.post(3, 1, &base, &[]);
    // A patch on top of a commit that was never posted: it cannot apply.
    author.at(&base);
    author.commit(
        "kernel/sys.c",
        "local change\n",
        "sys: a change nobody posted",
    );
    author.commit(
        "kernel/sys.c",
        "local change\nposted change\n",
        "sys: tidy the syscall table",
    );
    let broken = author.post(1, 1, &base, &[]);
    author.at(&base);
    author.commit("fs/splice.c", "syntax error\n", "splice: break the build");
    let build = author.post(1, 1, &base, &[]);
    author.at(&base);
    author.commit(
        "Documentation/pipe.rst",
        "pipes\n",
        "Documentation: describe pipe buffers",
    );
    author.commit(
        "fs/pipe.c",
        "reuse pages\n",
        "pipe: zero the page on every write",
    );
    author.commit(
        "fs/pipe.c",
        "reuse pages\n/* tuned */\n",
        "pipe: comment the write path",
    );
    let v1_cover = v1.message_id(0);
    let v2 = author.post(3, 2, &base, &[&format!("--in-reply-to={v1_cover}")]);
    author.at(&base);
    author.commit(
        "Documentation/pipe.rst",
        "pipes, v3\n",
        "Documentation: describe pipe buffers",
    );
    author.commit(
        "fs/pipe.c",
        "zero pages on every write\n",
        "pipe: zero the page on every write",
    );
    author.commit(
        "fs/pipe.c",
        "zero pages on every write\n/* tuned */\n",
        "pipe: comment the write path",
    );
    let v3 = author.post(3, 3, &base, &[&format!("--in-reply-to={v1_cover}")]);
    Scenario {
        base,
        v3,
        v1_second,
        v1,
        broken,
        build,
        v2,
        author,
    }
}

pub(crate) const BUILD_LOG: &str = "  CC      fs/splice.o\nfs/splice.c:1:1: error: unknown type name 'syntax'\n    1 | syntax error\n      | ^~~~~~\nmake[3]: *** [scripts/Makefile.build:250: fs/splice.o] Error 1\n";

/// The whole conversation: posted series, answers, commands, the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn series_are_tested_and_answered_in_their_threads() {
    let world = World::new();
    let sc = scenario(&world);
    for backend in backends() {
        let sink = smtp_sink::Sink::start(smtp_sink::Plan::default()).await;
        let port = sink.addr.port();
        let sim = Sim::start_with(backend, &world, move |c| c.mail = sim::mail_to(port)).await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let inbox = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
        append(&inbox, &sc.v1.mails);
        let chat = reply(
            "Ann Other <ann@example.org>",
            &sc.v1.message_id(2),
            &sc.v1.subject(2),
            "chat-1@example.org",
            "Looks fine to me.\n",
        );
        append(&inbox, &[chat]);
        append(&inbox, &sc.broken.mails);
        append(&inbox, &sc.build.mails);
        let posted = std::time::Instant::now();
        let l = add_list(&sim, inbox.root()).await;
        let fleet = Fleet::enroll(&sim, 2).await;

        // v1 is applied on its base-commit; the planted slowdown is patch 2.
        let v1 = series_when(&sim, &sc.v1.message_id(0), |s| s["state"] == "testing").await;
        assert_eq!(
            (str_of(&v1["base"]), str_of(&v1["base_how"])),
            (sc.base.as_str(), "base-commit"),
            "{v1}"
        );
        let mut detail = sim.get(&format!("/api/v1/series/{}", id(&v1))).await;
        let parts = list(detail["parts"].take());
        let commits: Vec<String> = parts
            .iter()
            .skip(1)
            .map(|p| str_of(&p["commit"]).to_owned())
            .collect();
        assert_eq!(commits.len(), 3, "{parts:#?}");
        for c in &commits[1..] {
            world.model.set(c, GOOD * 0.8);
        }
        let build = series_when(&sim, &sc.build.message_id(0), |s| s["state"] == "testing").await;
        world
            .model
            .fail_saying(str_of(&build["tip"]), "build_failed", BUILD_LOG);

        // Does not apply: answered, not tested.
        let broken = series_when(&sim, &sc.broken.message_id(0), |s| {
            s["state"] == "cannot_apply"
        })
        .await;
        assert!(broken["submission"].is_null(), "{broken}");
        let m = mail_when(&sink, "cannot apply", |d| {
            in_reply_to(d, &sc.broken.message_id(0))
        })
        .await;
        let data = m.data.replace("\r\n", "\n");
        assert!(
            data.contains(&format!("[cannot apply to {REPO}/main]")),
            "{data}"
        );
        // Its unposted parent is a prerequisite-patch-id no list has.
        assert!(
            data.contains("prerequisite-patch-id ")
                && data.contains("is not among the patches posted"),
            "{data}"
        );

        // Tested, bisected inside the series, answered in patch 2's thread.
        let report = fleet
            .run_until(mail_when(&sink, "the regression report", |d| {
                in_reply_to(d, &sc.v1.message_id(2))
            }))
            .await;
        expect_report(&report, &sc.v1, &commits[1]);
        // BENCHMARKS.md quotes this line (`--nocapture`).
        eprintln!(
            "lists[{backend:?}]: series in the archive -> report in patch 2's thread: {} ms",
            posted.elapsed().as_millis()
        );
        let v1 = series_when(&sim, &sc.v1.message_id(0), |s| s["state"] == "tested").await;
        assert!(
            str_of(&v1["ref_name"]).starts_with("refs/kbot/series/fsdevel/"),
            "{v1}"
        );
        fetch_series(&sim, &v1, &commits[2]);
        maintainer_pages(&sim, &v1, &commits, &[inbox.root(), world.repo.path()]).await;
        if backend == kbot_testkit::Backend::Sqlite {
            maintainer_walk(&sim, &v1, &commits).await;
        }
        let data = report.data.replace("\r\n", "\n");
        assert!(
            !data.contains(&world.repo.path().display().to_string()),
            "{data}"
        );

        // The build break: its compiler lines.
        fleet
            .run_until(series_when(&sim, &sc.build.message_id(0), |s| {
                s["state"] == "build_failed"
            }))
            .await;
        let m = mail_when(&sink, "build error", |d| {
            in_reply_to(d, &sc.build.message_id(0))
        })
        .await;
        let data = m.data.replace("\r\n", "\n");
        assert!(
            data.contains(">> fs/splice.c:1:1: error: unknown type name 'syntax'"),
            "{data}"
        );
        assert!(
            data.contains("| Reported-by: kernel test robot <kbot@kbot.test>"),
            "{data}"
        );

        // v2, `#kbot test` with the fix inline, a stranger's `#kbot invalid`.
        let report_id = header(&report.data.replace("\r\n", "\n"), "Message-ID");
        let report_subject = header(&report.data.replace("\r\n", "\n"), "Subject");
        let fix = fix_patch(&sc.author, &sc.v1_second);
        let test = reply(
            PAT,
            &report_id,
            &report_subject,
            "test-1@example.org",
            &format!("Does this fix it?\n\n#kbot test\n\n{fix}"),
        );
        let stranger = reply(
            "Eve <eve@example.org>",
            &report_id,
            &report_subject,
            "invalid-1@example.org",
            "#kbot invalid\n",
        );
        append(&inbox, &sc.v2.mails);
        append(&inbox, &[test, stranger]);
        sim.post(&format!("/api/v1/lists/{l}/read"), json!({}), 200)
            .await;
        // The stranger's refusal is recorded, not mailed (see lists_trust.rs).
        let refused = poll(DEADLINE, || async {
            let commands = list(sim.get(&format!("/api/v1/lists/{l}/commands")).await);
            commands
                .into_iter()
                .find(|c| c["message_id"] == "invalid-1@example.org")
                .ok_or_else(|| "the stranger's command is not recorded yet".to_owned())
        })
        .await;
        assert_eq!(str_of(&refused["state"]), "refused", "{refused}");
        let answered = fleet
            .run_until(mail_when(&sink, "the fix's result", |d| {
                in_reply_to(d, "test-1@example.org") && d.contains("brings the metric back")
            }))
            .await;
        assert!(
            answered.rcpt_to.iter().any(|r| r == "<pat@example.org>"),
            "{answered:?}"
        );
        assert!(
            !sink
                .received()
                .iter()
                .any(|m| in_reply_to(&m.data.replace("\r\n", "\n"), "invalid-1@example.org")),
            "a stranger's refusal is not mailed"
        );
        let v2 = fleet
            .run_until(series_when(&sim, &sc.v2.message_id(0), |s| {
                s["state"] == "tested"
            }))
            .await;
        assert_eq!(str_of(&v2["base_how"]), "base-commit", "{v2}");
        let bisections = sim.bisections().await;
        assert_eq!(bisections.len(), 1, "v2 regresses nothing: {bisections:#?}");

        // A fix with `Closes:` lands on the watched branch.
        let regressions = list(sim.get("/api/v1/regressions").await);
        assert_eq!(regressions.len(), 1, "{regressions:#?}");
        assert_eq!(
            str_of(&regressions[0]["state"]),
            "new",
            "the stranger's command changed nothing"
        );
        world.repo.checkout("main");
        let message = format!("pipe: reuse pages\n\nCloses: https://kbot.test/reports/{report_id}");
        let closes = world.repo.commit_by(&message, Some(PAT));
        let watch = json!({"repo": REPO, "branch": "main", "job_file": JOB, "interval_secs": 1});
        sim.post("/api/v1/watches", watch, 201).await;
        let fixed = fleet
            .run_until(mail_when(&sink, "the fix landed", |d| {
                in_reply_to(d, &report_id) && d.contains(&closes)
            }))
            .await;
        assert!(fixed.data.contains("is marked fixed"), "{}", fixed.data);
        let regressions = list(sim.get("/api/v1/regressions").await);
        assert_eq!(
            str_of(&regressions[0]["state"]),
            "fixed",
            "{regressions:#?}"
        );

        // v3 brings the slowdown back: no second report, a pointer to the first.
        append(&inbox, &sc.v3.mails);
        sim.post(&format!("/api/v1/lists/{l}/read"), json!({}), 200)
            .await;
        let v3 = series_when(&sim, &sc.v3.message_id(0), |s| s["state"] != "waiting").await;
        let mut detail = sim.get(&format!("/api/v1/series/{}", id(&v3))).await;
        for p in list(detail["parts"].take()).iter().skip(2) {
            world.model.set(str_of(&p["commit"]), GOOD * 0.8);
        }
        let still = fleet
            .run_until(mail_when(&sink, "v3's pointer", |d| {
                in_reply_to(d, &sc.v3.message_id(2))
            }))
            .await;
        let data = still.data.replace("\r\n", "\n");
        assert!(
            data.contains("still has the regression") && data.contains(&report_id),
            "{data}"
        );
        let reports = sim.reports().await;
        let regression_reports = reports.iter().filter(|r| r["kind"] == "regression").count();
        assert_eq!(regression_reports, 1, "{reports:#?}");
        world.repo.git(&["reset", "-q", "--hard", &sc.base]);
        sim.stop().await;
    }
}

/// What a maintainer sees of a regressed series without signing in: the
/// result line on `/lists` and the series page, the bad patch marked in the
/// patch column, the bisection one click away, and no path of the server's
/// disk (the archive, the repository) on either page.
async fn maintainer_pages(sim: &Sim<'_>, v1: &Value, commits: &[String], paths: &[&Path]) {
    let lists = crate::dashboard_pages::page(sim, "/lists").await;
    let series = crate::dashboard_pages::page(sim, &format!("/series/{}", id(v1))).await;
    for html in [&lists, &series] {
        assert!(
            html.contains(&format!("regression: {KPI} −")),
            "the result line: {html}"
        );
        for path in paths {
            let path = path.display().to_string();
            assert!(!html.contains(&path), "{path} on a public page: {html}");
        }
    }
    let bad = &commits[1][..12];
    let row = series
        .split("<tr>")
        .find(|r| r.contains(bad))
        .unwrap_or_else(|| panic!("no row of patch 2 ({bad}): {series}"));
    assert!(row.contains("first bad commit"), "{row}");
    let bisection = sim.bisections().await;
    let b = bisection.first().expect("a bisection");
    assert!(
        series.contains(&format!("<a href=\"/bisections/{}\">", id(b))),
        "the bisection is one click away: {series}"
    );
    assert!(series.contains("bisection reported on"), "{series}");
    // The pair links what it led to: its series, bisection and regression.
    let pair =
        crate::dashboard_pages::page(sim, &format!("/submissions/{}", v1["submission"])).await;
    let neighbours = pair
        .split("id=\"neighbours\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no neighbours on the pair's page: {pair}"));
    for href in [
        format!("/series/{}", id(v1)),
        format!("/bisections/{}", id(b)),
        String::from("/regressions/"),
    ] {
        assert!(
            neighbours.contains(&format!("<a href=\"{href}")),
            "{href}: {pair}"
        );
    }
    // The bad patch's commit is one click away, as git shows it.
    let commit = format!("/commits/{REPO}/{}", commits[1]);
    assert!(row.contains(&format!("<a href=\"{commit}\">")), "{row}");
    // Who may fetch the mirror may read its commits: not a stranger.
    assert_eq!(sim.fetch(&commit).await.0, 401, "{commit} without a token");
    let shown = sim
        .t
        .http
        .get(sim.t.url(&commit))
        .bearer_auth(&sim.token)
        .send()
        .await;
    let shown = shown.expect("GET").text().await.expect("text");
    assert!(
        shown.contains(&format!("commit {}", commits[1])) && shown.contains("diff --git"),
        "{shown}"
    );
    assert!(
        pair.contains(&format!(
            "<a href=\"/commits/{REPO}/{}\">",
            str_of(&v1["base"])
        )),
        "the base links its commit: {pair}"
    );
    let unknown = format!("/commits/{REPO}/{}", "0".repeat(40));
    let unknown = sim
        .t
        .http
        .get(sim.t.url(&unknown))
        .bearer_auth(&sim.token)
        .send()
        .await;
    assert_eq!(
        unknown.expect("GET").status(),
        404,
        "a commit the mirror does not have"
    );
    // The list's base has a history: its runs, measured as series' bases.
    let trend = crate::dashboard_pages::page(
        sim,
        &format!(
            "/trends?repo={REPO}&branch=main&metric={}",
            KPI.replace('/', "%2F")
        ),
    )
    .await;
    let base = &str_of(&v1["base"])[..10];
    let row = trend.split("<tr>").find(|r| r.contains(base));
    assert!(
        row.is_some_and(|r| !r.contains("<td class=\"num\">0</td>")),
        "the base {base} on the list branch's trend: {trend}"
    );
    assert!(
        series.contains(&format!("<a href=\"{WEB}/")),
        "each patch links its mail in the list's web archive: {series}"
    );
}

/// The maintainer's path in a real browser at 760 px: from `/lists` to the
/// regressed series and its bad patch, the bisection, its report, the pair
/// it reports on and that pair's profile, each one click from the last,
/// every page fitting the window.
async fn maintainer_walk(sim: &Sim<'_>, v1: &Value, commits: &[String]) {
    use crate::browser_session::{self as web, at_path, click, fits, html};
    if !web::browser_available() {
        return;
    }
    let driver = web::Driver::start().await;
    let profile = tempfile::tempdir().expect("tempdir");
    let b = driver.browser(profile.path()).await;
    b.set_window_size(760, 900).await.expect("resize");
    let result = format!("regression: {KPI} −");
    b.goto(&sim.t.url("/lists")).await.expect("goto");
    fits(&b, "/lists").await;
    assert!(
        html(&b).await.contains(&result),
        "/lists: {}",
        html(&b).await
    );

    let series = format!("/series/{}", id(v1));
    click(&b, &format!("a[href=\"{series}\"]")).await;
    at_path(&b, &series).await;
    fits(&b, &series).await;
    let page = html(&b).await;
    assert!(page.contains(&result), "{series}: {page}");
    let bad = &commits[1][..12];
    let row = page.split("<tr>").find(|r| r.contains(bad));
    assert!(
        row.is_some_and(|r| r.contains("first bad commit")),
        "the bad patch is marked on {series}: {page}"
    );

    let bisection = sim.bisections().await;
    let bisection = format!(
        "/bisections/{}",
        id(bisection.first().expect("a bisection"))
    );
    click(&b, &format!("a[href=\"{bisection}\"]")).await;
    at_path(&b, &bisection).await;
    fits(&b, &bisection).await;

    click(&b, "#summary a[href^=\"/reports/\"]").await;
    at_path(&b, "/reports/").await;
    fits(&b, "the report").await;
    let report = html(&b).await;
    assert!(
        report.contains(&format!("commit: {}", commits[1])),
        "{report}"
    );

    click(&b, "#report-links a[href^=\"/submissions/\"]").await;
    let pair = at_path(&b, "/submissions/").await;
    fits(&b, pair.path()).await;
    let page = html(&b).await;
    for neighbour in [&series, &bisection] {
        assert!(
            page.contains(&format!("<a href=\"{neighbour}\">")),
            "{neighbour} one click from {pair}: {page}"
        );
    }
    assert!(page.contains("How it was decided"), "{page}");

    click(&b, "#profiles a").await;
    at_path(&b, &format!("{}/jobs/0/profile", pair.path())).await;
    fits(&b, "the profile").await;
    b.close().await.expect("close the browser");
}

pub(crate) async fn add_list(sim: &Sim<'_>, archive: &Path) -> i64 {
    add_list_with(sim, archive, json!({})).await
}

/// [`add_list`] with more settings (`extra`'s keys replace the defaults).
pub(crate) async fn add_list_with(sim: &Sim<'_>, archive: &Path, extra: Value) -> i64 {
    let mut body = json!({
        "name": "fsdevel",
        "archive": archive.to_string_lossy(),
        "repo": REPO,
        "branch": "main",
        "job_file": JOB,
        "address": LIST,
        "web_url": WEB,
        "interval_secs": 1,
        "wait_secs": 60,
        "from_start": true,
        // The replies here are unsigned: the list takes them as unverified
        // senders (DKIM is lists_trust.rs's).
        "accept_unsigned": true,
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    id(&sim.post("/api/v1/lists", body, 201).await)
}

/// The report of patch 2: threaded, addressed and tagged as 0-day's are.
fn expect_report(m: &Received, v1: &Posted, first_bad: &str) {
    let data = m.data.replace("\r\n", "\n");
    let patch2 = v1.message_id(2);
    assert!(
        data.contains(&format!("\nSubject: Re: {}\n", v1.subject(2))),
        "{data}"
    );
    let refs = header(&data, "References");
    assert!(
        refs.contains(&v1.message_id(0)) && refs.ends_with(&patch2),
        "{refs}"
    );
    assert!(data.contains(&format!("\nTo: {PAT}\n")), "{data}");
    for rcpt in [
        "<pat@example.org>",
        &format!("<{LIST}>"),
        "<maint@example.org>",
    ] {
        assert!(
            m.rcpt_to.iter().any(|r| r == rcpt),
            "{rcpt} in {:?}",
            m.rcpt_to
        );
    }
    assert!(data.contains(&format!("commit: {first_bad}")), "{data}");
    assert!(
        data.contains(&format!("patch link: {WEB}/{patch2}/")),
        "{data}"
    );
    assert!(
        data.contains("\nurl: ") && data.contains("refs/kbot/series/fsdevel/"),
        "{data}"
    );
    assert!(
        data.contains("| Reported-by: kernel test robot <kbot@kbot.test>"),
        "{data}"
    );
    assert!(data.contains("| Closes: "), "{data}");
}

/// The applied series can be fetched from the server with git.
fn fetch_series(sim: &Sim<'_>, series: &Value, tip: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    git(tmp.path(), &["init", "-q", "--bare", "x.git"]);
    let dir = tmp.path().join("x.git");
    let url = sim.t.url(&format!("/git/{REPO}.git"));
    let refspec = format!("+{0}:{0}", str_of(&series["ref_name"]));
    let auth = format!("http.extraHeader=Authorization: Bearer {}", sim.token);
    git(&dir, &["-c", &auth, "fetch", "-q", &url, &refspec]);
    assert_eq!(git(&dir, &["rev-parse", str_of(&series["ref_name"])]), tip);
}

/// A fix on top of the first bad patch, as the author would paste it.
fn fix_patch(author: &Author, first_bad: &str) -> String {
    author.at(first_bad);
    author.commit("fs/pipe.c", "reuse pages\n", "pipe: reuse the zeroed page");
    let out = git(&author.dir, &["format-patch", "-1", "--stdout"]);
    let diff = out.find("diff --git").map(|i| &out[i..]).unwrap_or(&out);
    diff.split("\n-- \n").next().unwrap_or(diff).to_owned()
}

/// `prerequisite-patch-id:`: a patch posted on top of one posted before is
/// applied on its base plus that patch, and its pair tests it alone against
/// them; one on top of a patch nobody posted cannot apply, and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_series_applies_on_its_posted_prerequisites() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    author.at(&base);
    author.commit("fs/pipe_pool.c", "pool\n", "pipe: add a page pool");
    let first = author.post(1, 1, &base, &[]);
    author.commit("fs/pipe_pool.c", "pool\nused\n", "pipe: use the page pool");
    let second = author.post(1, 1, &base, &[]);
    assert!(
        second.mails[0].contains("\nprerequisite-patch-id: "),
        "{}",
        second.mails[0]
    );
    author.at(&base);
    author.commit(
        "fs/splice.c",
        "unposted\n",
        "splice: a change nobody posted",
    );
    author.commit(
        "fs/splice.c",
        "unposted\nposted\n",
        "splice: on the unposted change",
    );
    let orphan = author.post(1, 1, &base, &[]);
    for backend in backends() {
        let sim = Sim::start(backend, &world).await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let inbox = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
        append(&inbox, &first.mails);
        let l = add_list(&sim, inbox.root()).await;
        let s1 = series_when(&sim, &first.message_id(0), |s| s["state"] == "testing").await;
        let d1 = sim.get(&format!("/api/v1/series/{}", id(&s1))).await;
        let pool = str_of(&d1["parts"][0]["commit"]).to_owned();

        append(&inbox, &second.mails);
        append(&inbox, &orphan.mails);
        sim.post(&format!("/api/v1/lists/{l}/read"), json!({}), 200)
            .await;
        let s2 = series_when(&sim, &second.message_id(0), |s| s["state"] != "waiting").await;
        assert_eq!(str_of(&s2["state"]), "testing", "{backend:?}: {s2}");
        assert_eq!(
            str_of(&s2["base"]),
            pool,
            "{backend:?}: on the prerequisite: {s2}"
        );
        assert_eq!(
            str_of(&s2["base_how"]),
            "base-commit + 1 prerequisite patch(es)",
            "{s2}"
        );
        let d2 = sim.get(&format!("/api/v1/series/{}", id(&s2))).await;
        assert_eq!(list(d2["parts"].clone()).len(), 1, "{d2}");
        let pair = sim
            .submission(s2["submission"].as_i64().expect("a pair"))
            .await;
        assert_eq!(str_of(&pair["base"]["sha"]), pool, "{pair}");

        let s3 = series_when(&sim, &orphan.message_id(0), |s| s["state"] != "waiting").await;
        assert_eq!(str_of(&s3["state"]), "cannot_apply", "{backend:?}: {s3}");
        assert!(
            str_of(&s3["detail"]).contains("is not among the patches posted"),
            "{s3}"
        );
        sim.stop().await;
    }
}

/// A series whose tip does not build: its patches are built one by one, and
/// the build error is answered in the thread of the patch that broke it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_break_is_answered_in_the_patch_that_broke_it() {
    let world = World::new();
    let base = world.repo.git(&["rev-parse", "main"]);
    let author = Author::new(&world);
    author.at(&base);
    author.commit(
        "Documentation/pipe.rst",
        "pipes\n",
        "Documentation: describe pipe buffers",
    );
    author.commit("fs/splice.c", "syntax error\n", "splice: break the build");
    author.commit("fs/pipe.c", "tuned\n", "pipe: tune the write path");
    let series = author.post(3, 1, &base, &[]);
    for backend in backends() {
        let sink = smtp_sink::Sink::start(smtp_sink::Plan::default()).await;
        let port = sink.addr.port();
        let sim = Sim::start_with(backend, &world, move |c| c.mail = sim::mail_to(port)).await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let inbox = PublicInbox::create_v2(&tmp.path().join("fsdevel"));
        append(&inbox, &series.mails);
        add_list(&sim, inbox.root()).await;
        let fleet = Fleet::enroll(&sim, 1).await;
        let s = series_when(&sim, &series.message_id(0), |s| s["state"] == "testing").await;
        let detail = sim.get(&format!("/api/v1/series/{}", id(&s))).await;
        // Patch 2 breaks the build, so patch 3 does not build either.
        for part in list(detail["parts"].clone())
            .iter()
            .filter(|p| p["index"].as_u64() >= Some(2))
        {
            world
                .model
                .fail_saying(str_of(&part["commit"]), "build_failed", BUILD_LOG);
        }
        let patch2 = series.message_id(2);
        let answer = fleet
            .run_until(mail_when(&sink, "the build error", |d| {
                in_reply_to(d, &patch2)
            }))
            .await;
        let data = answer.data.replace("\r\n", "\n");
        assert!(
            data.contains("[auto build test ERROR on linux/main]"),
            "{data}"
        );
        assert!(
            data.contains(">> fs/splice.c:1:1: error: unknown type name"),
            "{data}"
        );
        assert!(
            data.contains("\nSubject: Re: [PATCH v1 2/3] splice: break the build\n"),
            "{data}"
        );
        let s = series_when(&sim, &series.message_id(0), |s| s["state"] != "testing").await;
        assert_eq!(str_of(&s["state"]), "build_failed", "{backend:?}: {s}");
        assert!(
            str_of(&s["detail"]).starts_with("patch 2 of 3 does not build"),
            "{s}"
        );
        assert_eq!(sink.received().len(), 1, "{backend:?}: one answer");
        sim.stop().await;
    }
}
