//! Builds queued ahead of the tests (`kbot_api::builds` build orders): lab
//! machines that cannot build get no job until a builder made its kernel,
//! and asking queues the orders; a dedicated builder builds each kernel
//! once for every group; a builder that dies loses its order with its
//! lease, once. Each on SQLite and PostgreSQL, through the agent client.

use kbot_api::builds::{
    BuildClaim, BuildOrder, ClaimAnswer, Claimant, OrderLease, OrderState, OrderView,
};
use kbot_api::client::AgentClient;
use kbot_load::seed;
use kbot_testkit::agent::TestAgent;
use kbot_testkit::{backends, TestServer, ONE_JOB};

use super::builds::{count, get_json, kernel_for, key_of, share_as, Got};

/// A builder's lease of an order for x86_64, planning ahead as a dedicated
/// builder does.
async fn lease_order(client: &AgentClient) -> Option<BuildOrder> {
    let req = OrderLease {
        arch: "x86_64".into(),
        wait_secs: 0,
        plan: true,
    };
    client.lease_order(&req).await.expect("order lease").order
}

/// The builder's side: claim the order's key as the order, then build and
/// share it (or find it built).
async fn build_order(client: &AgentClient, order: &BuildOrder) -> bool {
    let by = Claimant::Order(order.order_id);
    let claim = BuildClaim {
        job_id: None,
        order_id: Some(order.order_id),
        build_key: key_of(&order.commit),
        commit: order.commit.clone(),
        arch: order.arch.clone(),
    };
    match client.claim_build(&claim).await.expect("claim") {
        ClaimAnswer::Build => {
            share_as(client, by, &order.commit).await;
            true
        }
        ClaimAnswer::Ready { .. } => false,
        other => panic!("an order's claim got {other:?}"),
    }
}

/// Runs every job a machine that only tests can get: it downloads each
/// kernel, never builds.
async fn tester_loop(agent: &TestAgent<'_>) -> Vec<Got> {
    let client = agent.client();
    let mut got = Vec::new();
    while let Some(job) = agent.lease_as(1, false).await {
        got.push(kernel_for(&client, &job, false).await);
        assert_eq!(agent.upload(job.job_id, 100.0).await.status(), 200);
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builder_builds_ahead_for_every_group_once() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        for user in ["u1", "u2", "u3"] {
            t.seed(user, ONE_JOB, 1, 0).await;
        }
        let a = TestAgent::enroll(&t, "board-a", "group-a").await;
        let b = TestAgent::enroll(&t, "board-b", "group-b").await;
        let c = TestAgent::enroll(&t, "c", "group-c").await;
        let z = TestAgent::enroll(&t, "builder", "builders").await;
        // Machines that cannot build get nothing yet; asking queued the
        // pair's two kernels once for all of them.
        assert!(a.lease_as(0, false).await.is_none(), "{backend:?}");
        assert!(b.lease_as(0, false).await.is_none());
        let orders: Vec<OrderView> = get_json(&t, "/api/v1/builds/orders").await;
        assert_eq!(orders.len(), 2, "{backend:?}: {orders:?}");
        assert!(orders
            .iter()
            .all(|o| o.state == OrderState::Queued && o.arch == "x86_64"));
        // The builder takes both, and builds each once.
        let zc = z.client();
        let mut built = 0;
        while let Some(order) = lease_order(&zc).await {
            assert_eq!(order.leases, 1);
            assert!(build_order(&zc, &order).await, "{order:?}");
            built += 1;
        }
        assert_eq!(built, 2);
        let orders: Vec<OrderView> = get_json(&t, "/api/v1/builds/orders").await;
        assert!(
            orders.iter().all(|o| o.state == OrderState::Done
                && o.agent.as_deref() == Some("builder")
                && o.build_key.as_deref() == Some(key_of(&o.commit).as_str())),
            "{orders:?}"
        );
        // Every group's jobs download: the machines that only test, and
        // one that could build but finds the kernels made.
        let (ga, gb, gc) = tokio::join!(tester_loop(&a), tester_loop(&b), async {
            let mut got = Vec::new();
            while let Some(job) = c.lease_waiting(1).await {
                got.push(kernel_for(&c.client(), &job, true).await);
                assert_eq!(c.upload(job.job_id, 100.0).await.status(), 200);
            }
            got
        });
        let jobs = count(&t, "SELECT COUNT(*) FROM jobs").await;
        let all: Vec<&Got> = ga.iter().chain(&gb).chain(&gc).collect();
        assert_eq!(all.len() as i64, jobs, "{backend:?}: {ga:?} {gb:?} {gc:?}");
        assert!(all.iter().all(|g| **g == Got::Downloaded), "{all:?}");
        assert_eq!(
            count(&t, "SELECT CAST(SUM(claims) AS BIGINT) FROM builds").await,
            2,
            "each kernel claimed once, by its order"
        );
        assert_eq!(
            count(&t, "SELECT COUNT(*) FROM jobs WHERE state = 'finished'").await,
            jobs
        );
        // A job's log page names the order its kernel was built on.
        let job = count(&t, "SELECT MIN(id) FROM jobs").await;
        let page = t.http.get(t.url(&format!("/jobs/{job}/log"))).send().await;
        let page = page.expect("log page").text().await.expect("text");
        assert!(page.contains("built ahead on"), "{page}");
        t.stop().await;
    }
}

/// Kernels are built in the order their jobs are served, whenever they were
/// ordered: a pair ordered first at priority 0 waits for pairs ordered
/// later at 10 and 5, and the kernel they share is raised to 10 (a cold
/// builder once built the low pair's kernel first, one group's plan having
/// ordered it, and a machine then ran that pair before the urgent ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_are_built_in_the_order_their_jobs_are_served() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let base = format!("{:040x}", 0xb0);
        let heads: Vec<String> = (1..=3).map(|i| format!("{:040x}", 0xc0 + i)).collect();
        let submit = |head: usize, priority: i64| {
            let (base, head) = (base.clone(), heads[head].clone());
            let db = t.db().clone();
            async move {
                seed::submission_at(&db, "linux", "u1", ONE_JOB, 1, priority, (&base, &head)).await
            }
        };
        // The low pair is ordered before the others exist.
        submit(0, 0).await.expect("seed");
        let tester = TestAgent::enroll(&t, "tester", "lab").await;
        assert!(tester.lease_as(0, false).await.is_none());
        let orders: Vec<OrderView> = get_json(&t, "/api/v1/builds/orders").await;
        assert_eq!(orders.len(), 2, "{backend:?}: {orders:?}");
        submit(1, 10).await.expect("seed");
        submit(2, 5).await.expect("seed");
        let z = TestAgent::enroll(&t, "builder", "builders").await;
        let zc = z.client();
        let mut built = Vec::new();
        while let Some(order) = lease_order(&zc).await {
            assert!(build_order(&zc, &order).await, "{order:?}");
            built.push(order.commit);
        }
        let want = [&base, &heads[1], &heads[2], &heads[0]].map(String::clone);
        assert_eq!(built, want, "{backend:?}");
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_builders_order_is_leased_again_once() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        t.seed("u1", ONE_JOB, 1, 0).await;
        let a = TestAgent::enroll(&t, "board-a", "group-a").await;
        let y = TestAgent::enroll(&t, "builder-y", "builders").await;
        let z = TestAgent::enroll(&t, "builder-z", "builders").await;
        assert!(a.lease_as(0, false).await.is_none());
        let (yc, zc) = (y.client(), z.client());
        let first = lease_order(&yc).await.expect("an order");
        let claim = BuildClaim {
            job_id: None,
            order_id: Some(first.order_id),
            build_key: key_of(&first.commit),
            commit: first.commit.clone(),
            arch: first.arch.clone(),
        };
        assert_eq!(
            yc.claim_build(&claim).await.expect("claim"),
            ClaimAnswer::Build
        );
        yc.order_heartbeat(first.order_id)
            .await
            .expect("y holds it");
        // y's machine dies: its order's lease runs out.
        sqlx::query("UPDATE build_orders SET lease_expires_at = 1 WHERE id = $1")
            .bind(first.order_id)
            .execute(t.db().write())
            .await
            .expect("expire");
        let again = loop {
            let order = lease_order(&zc).await.expect("the order again");
            if order.order_id == first.order_id {
                break order;
            }
            assert!(build_order(&zc, &order).await);
        };
        assert_eq!(again.leases, 2, "{backend:?}");
        let lost = yc
            .order_heartbeat(first.order_id)
            .await
            .expect_err("y lost it");
        assert_eq!(lost.status(), Some(409), "{lost}");
        let late = yc
            .upload_build_file(
                &claim.build_key,
                "bzImage",
                Claimant::Order(first.order_id),
                b"stale".to_vec(),
            )
            .await
            .expect_err("y's late upload");
        assert_eq!(late.status(), Some(409), "{late}");
        assert!(build_order(&zc, &again).await, "z builds it instead");
        while let Some(order) = lease_order(&zc).await {
            assert!(build_order(&zc, &order).await);
        }
        // The claim is the order's, whoever leases it: the lost build is
        // claimed once and leased twice.
        assert_eq!(
            count(&t, "SELECT CAST(SUM(claims) AS BIGINT) FROM builds").await,
            2,
            "{backend:?}"
        );
        assert_eq!(
            count(&t, "SELECT CAST(SUM(leases) AS BIGINT) FROM build_orders").await,
            3,
            "{backend:?}: the lost order leased twice, the other once"
        );
        let got = tester_loop(&a).await;
        let jobs = count(&t, "SELECT COUNT(*) FROM jobs").await;
        assert_eq!(got.len() as i64, jobs);
        assert!(got.iter().all(|g| *g == Got::Downloaded), "{got:?}");
        t.stop().await;
    }
}

#[tokio::test]
async fn orders_are_checked() {
    let t = TestServer::start(kbot_testkit::Backend::Sqlite).await;
    let z = TestAgent::enroll(&t, "builder", "builders").await;
    let odd = OrderLease {
        arch: "riscv".into(),
        wait_secs: 0,
        plan: true,
    };
    let err = z
        .client()
        .lease_order(&odd)
        .await
        .expect_err("an arch kbot does not build");
    assert_eq!(err.status(), Some(400));
    let err = z
        .client()
        .order_heartbeat(12345)
        .await
        .expect_err("no such order");
    assert_eq!(err.status(), Some(409));
    // A claim names its job or its order, not both.
    let both = BuildClaim {
        job_id: Some(1),
        order_id: Some(1),
        build_key: key_of("c0ffee"),
        commit: "c0ffee".into(),
        arch: "x86_64".into(),
    };
    let err = z.client().claim_build(&both).await.expect_err("both");
    assert_eq!(err.status(), Some(400));
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unused_builds_leave_the_store_and_are_ordered_again() {
    const DAY: i64 = 24 * 3600 * 1000;
    for backend in backends() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let t = TestServer::start_with(backend, |c| c.artifact_dir = dir).await;
        t.seed("u1", ONE_JOB, 1, 0).await;
        let a = TestAgent::enroll(&t, "board-a", "group-a").await;
        let z = TestAgent::enroll(&t, "builder", "builders").await;
        assert!(a.lease_as(0, false).await.is_none());
        while let Some(order) = lease_order(&z.client()).await {
            assert!(build_order(&z.client(), &order).await);
        }
        assert!(tester_loop(&a).await.iter().all(|g| *g == Got::Downloaded));
        let files = || kbot_testkit::files_under(&tmp.path().join("builds"), None).len();
        assert_eq!(files(), 6, "{backend:?}: two builds of three files");

        // Used within the last 30 days: kept.
        let state = &t.server.state;
        let now = kbot_server::time::now_ms();
        let kept = kbot_server::lists::retention::prune(state, now + DAY)
            .await
            .expect("pass");
        assert_eq!(kept.builds, 0, "{backend:?}");
        // Unused for longer: the builds, their files and orders go.
        let pruned = kbot_server::lists::retention::prune(state, now + 31 * DAY)
            .await
            .expect("pass");
        assert_eq!(pruned.builds, 2, "{backend:?}");
        assert_eq!(files(), 0, "{backend:?}");
        assert_eq!(count(&t, "SELECT COUNT(*) FROM builds").await, 0);
        assert_eq!(count(&t, "SELECT COUNT(*) FROM build_orders").await, 0);
        // A job that needs the kernels again has them ordered again.
        t.seed("u2", ONE_JOB, 1, 0).await;
        assert!(a.lease_as(0, false).await.is_none());
        let orders: Vec<OrderView> = get_json(&t, "/api/v1/builds/orders").await;
        assert_eq!(orders.len(), 2, "{backend:?}: {orders:?}");
        assert!(orders.iter().all(|o| o.state == OrderState::Queued));
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_its_builders_lose_three_times_is_given_up() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        t.seed("u1", ONE_JOB, 1, 0).await;
        let a = TestAgent::enroll(&t, "board-a", "group-a").await;
        let z = TestAgent::enroll(&t, "builder", "builders").await;
        assert!(a.lease_as(0, false).await.is_none());
        let expire = |id: i64| {
            sqlx::query("UPDATE build_orders SET lease_expires_at = 1 WHERE id = $1")
                .bind(id)
                .execute(t.db().write())
        };
        // Three builders in turn lose the first order with their lease.
        let first = lease_order(&z.client()).await.expect("an order");
        for lease in 1..=3 {
            let order = lease_order(&z.client()).await;
            if lease == 1 {
                assert!(order.is_some_and(|o| o.order_id != first.order_id));
                expire(first.order_id).await.expect("expire");
                continue;
            }
            let order = order.expect("the lost order again");
            assert_eq!(order.order_id, first.order_id, "{backend:?}");
            assert_eq!(order.leases, lease);
            expire(first.order_id).await.expect("expire");
        }
        // The fourth try gives it up: its job goes to the board, which
        // fails it rather than wait.
        let job = a
            .lease_as(0, false)
            .await
            .expect("the given-up order's job");
        assert_eq!(job.commit, first.commit, "{backend:?}");
        let orders: Vec<OrderView> = get_json(&t, "/api/v1/builds/orders").await;
        let given: Vec<&OrderView> = orders
            .iter()
            .filter(|o| o.state == OrderState::GivenUp)
            .collect();
        assert_eq!(given.len(), 1, "{backend:?}: {orders:?}");
        assert_eq!(given[0].leases, 3);
        assert!(
            lease_order(&z.client()).await.is_none(),
            "nothing left to build"
        );
        t.stop().await;
    }
}
