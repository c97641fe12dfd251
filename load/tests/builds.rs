//! `kbot-load builds` at test scale against a real server, on SQLite and
//! (with `KBOT_TEST_DATABASE_URL`) PostgreSQL: every commit built once, no
//! job waiting on a failed build, every job ended.

use kbot_load::builds::{self, BuildsArgs};
use kbot_server::config::DbArgs;
use kbot_testkit::{backends, TestServer};

/// The test-scale run against `t`: 6 agents on 2 groups, 6 commits of
/// which 0 and 3 do not build, 200 ms builds; `builders` dedicated ones.
fn args(t: &TestServer, builders: usize) -> BuildsArgs {
    BuildsArgs {
        server: t.url(""),
        db: DbArgs {
            database_url: Some(t.store.database_url.clone()),
        },
        agents: 6,
        groups: 2,
        commits: 6,
        build_ms: 200,
        fail_every: 3,
        image_kib: 64,
        builders,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_agents_on_two_groups_build_six_commits_once() {
    for backend in backends() {
        // A 1 s heartbeat interval makes the retry hint 1 s, keeping the
        // waits short.
        let t = TestServer::start_with(backend, |c| c.heartbeat_interval_secs = 1).await;
        let args = args(&t, 0);
        let report = builds::run(&args).await.expect("the builds run");
        eprintln!("{backend:?}:\n{report}");
        assert!(report.holds(), "{backend:?}:\n{report}");
        assert_eq!(report.db.builds, 6, "{backend:?}:\n{report}");
        assert_eq!(report.db.failed, 2, "commits 0 and 3 do not build");
        assert_eq!(report.jobs, 12, "3 pairs x 2 groups x base and head");
        assert_eq!(report.db.build_failed_jobs, 4, "2 commits x 2 groups");
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_builders_build_ahead_for_six_agents_that_only_test() {
    for backend in backends() {
        let t = TestServer::start_with(backend, |c| c.heartbeat_interval_secs = 1).await;
        let args = args(&t, 2);
        let report = builds::run(&args).await.expect("the lab run");
        eprintln!("{backend:?}:\n{report}");
        assert!(report.holds(), "{backend:?}:\n{report}");
        assert_eq!(report.db.orders, 6, "{backend:?}:\n{report}");
        assert_eq!(report.build_answers, 6, "the builders built each once");
        assert_eq!(report.violations, 0, "no test agent built or waited");
        assert_eq!(report.jobs, 12);
        assert_eq!(report.db.build_failed_jobs, 4);
        t.stop().await;
    }
}
