//! The mailing-list scenario on real kernels: patch series posted to a list
//! archive are applied, built, booted in QEMU, tested, bisected and
//! answered in their threads, every mail checked at a real SMTP server.
//!
//! The kernel repository is the robot scenario's (Debian's linux-source
//! with its planted commits, `master` at h0). From its commits the author
//! makes the mails of a public-inbox v2 archive, which kbot reads as a list:
//!
//! - v1: `[PATCH v1 0/3..3/3]` on base-commit h0: a Documentation note, the
//!   pipe slowdown by Pat Pipe, another note;
//! - chat: a plain discussion reply to v1's patch 3 (no patch: no answer);
//! - noapply: `[PATCH]` whose preimage is in no tree kbot has;
//! - break: `[PATCH 0/2..2/2]`: the note, then kernel/sys.c that does not
//!   compile, with a hostile kernel/Makefile;
//! - (full form) v2: v1 with patch 2 replaced by a harmless fs/pipe.c
//!   comment; Pat's `#kbot test` reply with the revert inline; a commit on
//!   master whose message closes the report; v1's slow patch landing on
//!   master anyway under another author.
//!
//! Passes when v1 is bisected inside the series to patch 2 and reported in
//! patch 2's thread (Subject, In-Reply-To, References, To Pat, Cc the list,
//! `url:`/`base:`/`patch link:` lines, Reported-by:/Closes: tags), its
//! commits having reached the agent only through the server's git; the
//! non-applying series gets `[cannot apply to linux/master]` and no test;
//! the broken one `[auto build test ERROR ...]` with the compiler's line in
//! patch 2's thread, its hostile Makefile having run as a uid other than
//! 0, read no token or `KBOT_` variable, reached no listener, left no
//! process and no file outside its object directory, and changed no cached
//! kernel. Prints each phase's wall time, and posting v1 -> its report.

mod first;
mod full;
mod posts;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kbot_api::client::UserClient;
use kbot_api::lists::{ListCreate, SeriesDetail, SeriesView};
use kbot_api::watches::WatchCreate;
use kbot_server::mail::MailConfig;
use kbot_testkit::smtp_sink::{header, Received, Sink};
use kbot_testkit::{loopback_mail, TestServer};

use posts::hostile_makefile;

use crate::author::{Archive, Author, Posted};
use crate::lab::{self, AgentSetup, Clock, Crew, Guest, KernelRepo, Lab};

/// The robot scenario's kernel configuration (the reduced form): its kernels and
/// ccache serve here too.
const KCONFIG: &str = "qemu-x86_64-ci";
const LIST: &str = "linux-e2e@example.org";
const WEB: &str = "https://lore.example.org/linux-e2e";
const PAT: (&str, &str) = ("Pat Pipe", "pat@example.org");
const ROBOT: &str = "kbot@kbot.test";

#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// v1, noapply and break.
    Ci,
    /// And v2, `#kbot test`, the `Closes:` fix and the landing.
    Full,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "builds and boots real kernels for minutes: scripts/test runs it"]
async fn posted_series_are_bisected_and_answered_in_their_threads() {
    run(Form::Ci).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "builds and boots real kernels for a quarter of an hour: run it by hand"]
async fn and_a_retest_a_closes_fix_and_a_landing_are_told_in_the_report_thread() {
    run(Form::Full).await;
}

/// The commits the mails are made of.
struct Commits {
    h0: String,
    v1_tip: String,
    /// Not posted: the base of `noapply`, in no tree of the server's.
    hidden: String,
    noapply: String,
    broken: String,
    v2_tip: String,
}

/// What a hostile build reaches for, outside its sandbox.
struct Bait {
    listener_port: u16,
    connections: Arc<Mutex<Vec<String>>>,
    sleeper: u32,
    /// The agent's and ccache's directories (two levels deep).
    targets: Vec<PathBuf>,
}

/// The running scenario: the server, its SMTP sink, the agent, the list.
struct Run {
    /// The clock and the agent.
    crew: Crew,
    work: PathBuf,
    url: String,
    token: String,
    client: UserClient,
    http: reqwest::Client,
    sink: Sink,
    ccache_dir: PathBuf,
    list: i64,
    archive: Archive,
    /// The discussion reply's Message-ID: nothing answers it.
    chat: String,
    // Last: stopped after the agent.
    _server: TestServer,
}

async fn run(form: Form) {
    let clock = Clock::start("e2e-series");
    let cache = lab::cache_dir();
    let work = lab::work_dir("e2e-series");
    clock.say(format!("work directory {}", work.display()));

    // The robot scenario's repository, builder directory and ccache.
    let linux = KernelRepo::make(&cache.join("e2e-linux-ci.git"));
    let agent_dir = cache.join("e2e-agent-ci");
    let ccache_dir = cache.join("e2e-ccache-ci");
    for d in [&agent_dir, &ccache_dir] {
        std::fs::create_dir_all(d).expect("agent dirs");
    }
    let bait = Bait::set(&agent_dir, &ccache_dir);
    let author = Author::clone_of(&linux, &work);
    let commits = Commits::make(&author, &linux, &hostile_makefile(&agent_dir, &bait));

    let mut run = Run::start(form, clock, &work, &linux, &agent_dir, &ccache_dir).await;
    let report = run
        .first_posts(&author, &linux, &commits, &bait, &agent_dir)
        .await;
    if form == Form::Full {
        run.second_version_and_a_retest(&author, &linux, &commits, &report)
            .await;
        let closes = run
            .a_fix_closes_the_report(&author, &linux, &commits, &report)
            .await;
        run.the_slow_patch_lands_anyway(&author, &linux, &closes, &report)
            .await;
    }
    run.finish(form, &report).await;
}

/// The report of v1, in patch 2's thread.
struct Report {
    message_id: String,
    subject: String,
}

/// Mail on, from kbot@kbot.test, links into the server at `url`.
fn robot_mail(smtp_port: u16, url: &str) -> MailConfig {
    let mut mail = loopback_mail(smtp_port);
    mail.public_url = url.to_owned();
    mail.report.robot_address = ROBOT.into();
    mail.report.message_id_domain = ROBOT.into();
    mail.report.archive_url = format!("{url}/reports");
    mail.report.materials_url = format!("{url}/archive");
    mail.retry_base = Duration::from_secs(1);
    mail.retry_max = Duration::from_secs(5);
    mail
}

fn job_file() -> String {
    format!(
        "testcase: perf-bench-sched-pipe\nkconfig: {KCONFIG}\ncompiler: gcc-12\nruns: 3\n\
         arch: x86_64\nperf-bench-sched-pipe:\n  loops: 5000\n"
    )
}

impl Run {
    async fn start(
        form: Form,
        clock: Clock,
        work: &Path,
        linux: &KernelRepo,
        agent_dir: &Path,
        ccache_dir: &Path,
    ) -> Run {
        let sink = Sink::start(Default::default()).await;
        let lab = Lab::start(linux, |c, url| c.mail = robot_mail(sink.addr.port(), url)).await;
        let agent = lab
            .qemu_agent(AgentSetup {
                name: "vm-qemu-e2e-1",
                tbox_group: "vm-qemu-e2e",
                work_dir: agent_dir,
                ccache_dir,
                log: &work.join("agent.log"),
                guest: Guest::X86_64,
                roles: "build,test",
                memory_mib: None,
            })
            .await;
        let Lab {
            server,
            url,
            token,
            client,
        } = lab;
        if form == Form::Full {
            // Fixes are looked for on watched branches.
            client
                .add_watch(&WatchCreate {
                    repo: "linux".into(),
                    branch: "master".into(),
                    job_file: job_file(),
                    tbox_group: None,
                    interval_secs: Some(5),
                    max_runs: Some(6),
                })
                .await
                .expect("adding the watch");
        }
        let archive = Archive::create(&work.join("inbox"), LIST);
        // The local archive's replies carry no DKIM signature: the list
        // takes them as from unverified senders, and Pat's `#kbot test`
        // still needs Pat's role, the author's.
        let list = client
            .add_list(&ListCreate {
                name: "linux-e2e".into(),
                archive: archive.inbox.root().to_str().expect("utf-8").into(),
                repo: "linux".into(),
                branch: Some("master".into()),
                job_file: job_file(),
                address: Some(LIST.into()),
                web_url: Some(WEB.into()),
                tbox_group: None,
                interval_secs: Some(2),
                wait_secs: Some(60),
                max_runs: Some(6),
                from_start: true,
                accept_unsigned: true,
                maintainers: Vec::new(),
                tree_tags: BTreeMap::new(),
                patchwork: None,
            })
            .await
            .expect("adding the list")
            .id;
        clock.say(format!(
            "server {url}, list {list} reads {}, mail to {}",
            archive.inbox.root().display(),
            sink.addr
        ));
        Run {
            crew: Crew {
                clock,
                processes: vec![agent],
            },
            work: work.to_path_buf(),
            url,
            token,
            client,
            http: reqwest::Client::new(),
            sink,
            ccache_dir: ccache_dir.to_path_buf(),
            list,
            archive,
            chat: String::new(),
            _server: server,
        }
    }

    fn say(&self, what: impl std::fmt::Display) {
        self.crew.say(what);
    }

    fn alive(&mut self, waiting_for: &str) {
        self.crew.alive(waiting_for);
    }

    /// Waits for the mail In-Reply-To `parent` whose text holds `text`.
    async fn mail_to(&mut self, parent: &str, text: &str, what: &str) -> Received {
        let in_reply_to = format!("In-Reply-To: <{parent}>").to_ascii_lowercase();
        loop {
            self.alive(what);
            let found = self.sink.received().into_iter().find(|m| {
                let data = m.data.replace("\r\n", "\n");
                data.to_ascii_lowercase().contains(&in_reply_to) && data.contains(text)
            });
            if let Some(mut mail) = found {
                mail.data = mail.data.replace("\r\n", "\n");
                return mail;
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    }

    /// The series whose key (its first mail's Message-ID) is `key`.
    async fn series_of(&self, key: &str) -> SeriesView {
        let all = self.client.series().await.expect("the series");
        all.into_iter()
            .find(|s| s.key == key)
            .unwrap_or_else(|| panic!("no series {key}"))
    }

    async fn read_list(&self) {
        self.client
            .read_list(self.list)
            .await
            .expect("reading the list");
    }

    fn post(
        &mut self,
        author: &Author,
        base: &str,
        extra: &[&str],
        from: &str,
        to: &str,
    ) -> Posted {
        let posted = self
            .archive
            .post(author, base, extra, &format!("{from}..{to}"));
        self.say(format!("posted {} mail(s)", posted.mails.len()));
        posted
    }

    async fn detail_of(&self, posted: &Posted) -> SeriesDetail {
        let series = self.series_of(&posted.id(0)).await;
        self.client
            .one_series(series.id)
            .await
            .expect("the series' detail")
    }

    async fn finish(&self, form: Form, report: &Report) {
        let chat = &self.chat;
        let mails = self.sink.received();
        assert!(
            !mails.iter().any(|m| m.data.contains(chat.as_str())),
            "the discussion reply was answered"
        );
        let series = self.client.series().await.expect("series").len();
        let expected = if form == Form::Ci { 3 } else { 4 };
        assert_eq!(series, expected, "series");
        // Kept for reading and for diffs between versions: mail/N.eml, its
        // envelope's recipients in mail/N.rcpt.
        let dir = self.work.join("mail");
        std::fs::create_dir_all(&dir).expect("mail dir");
        self.say(format!(
            "mails at the SMTP server: {} (in {})",
            mails.len(),
            dir.display()
        ));
        for (i, m) in mails.iter().enumerate() {
            let data = m.data.replace("\r\n", "\n");
            std::fs::write(dir.join(format!("{i}.eml")), &data).expect("a mail file");
            std::fs::write(dir.join(format!("{i}.rcpt")), m.rcpt_to.join("\n")).expect("rcpt");
            self.say(format!("  {}", header(&data, "Subject")));
        }
        self.say(format!(
            "report {}; whole run {}s; work directory {}",
            report.message_id,
            self.crew.clock.secs(),
            self.work.display()
        ));
    }
}
