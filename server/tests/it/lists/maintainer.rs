//! What a maintainer sees of a regressed series: its pages, and the walk
//! from `/lists` to the profile in a real browser.

use super::*;

/// What a maintainer sees of a regressed series without signing in: the
/// result line on `/lists` and the series page, the bad patch marked in the
/// patch column, the bisection one click away, and no path of the server's
/// disk (the archive, the repository) on either page.
pub(super) async fn maintainer_pages(
    sim: &Sim<'_>,
    v1: &Value,
    commits: &[String],
    paths: &[&Path],
) {
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
pub(super) async fn maintainer_walk(sim: &Sim<'_>, v1: &Value, commits: &[String]) {
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
