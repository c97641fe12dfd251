//! The git mirror against real repositories built in temp dirs.

use std::path::Path;
use std::time::Duration;

use kbot_testkit::gitrepo::git;

use kbot_server::repos::git::{GitError, Mirror};

/// A repo with main: c1 - c2 - c3 (tag v1 on c2), and branch `side` off c1 with s1.
fn upstream(dir: &Path) -> [String; 4] {
    git(dir, &["init", "-q", "-b", "main"]);
    let mut shas = Vec::new();
    for (i, subject) in ["pipe: one", "pipe: two", "pipe: three"].iter().enumerate() {
        std::fs::write(dir.join("f"), format!("{i}\n")).expect("write");
        git(dir, &["add", "f"]);
        git(dir, &["commit", "-q", "-m", subject]);
        shas.push(git(dir, &["rev-parse", "HEAD"]));
    }
    git(dir, &["tag", "-a", "-m", "release", "v1", &shas[1]]);
    git(dir, &["checkout", "-q", "-b", "side", &shas[0]]);
    std::fs::write(dir.join("g"), "s\n").expect("write");
    git(dir, &["add", "g"]);
    git(dir, &["commit", "-q", "-m", "side: work"]);
    let s1 = git(dir, &["rev-parse", "HEAD"]);
    git(dir, &["checkout", "-q", "main"]);
    [shas[0].clone(), shas[1].clone(), shas[2].clone(), s1]
}

fn mirror_of(tmp: &Path) -> Mirror {
    Mirror::at(tmp.join("mirrors/up.git"), Duration::from_secs(60))
}

#[tokio::test]
async fn resolves_branches_tags_and_short_shas() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let up = tmp.path().join("up");
    std::fs::create_dir(&up).expect("mkdir");
    let [c1, c2, c3, s1] = upstream(&up);
    let mirror = mirror_of(tmp.path());
    mirror
        .sync(up.to_str().expect("utf8"))
        .await
        .expect("clone");

    assert_eq!(mirror.resolve("main").await.expect("main"), c3);
    assert_eq!(mirror.resolve("side").await.expect("side"), s1);
    // An annotated tag peels to its commit.
    assert_eq!(mirror.resolve("v1").await.expect("v1"), c2);
    assert_eq!(mirror.resolve(&c1[..7]).await.expect("short"), c1);
    assert_eq!(mirror.resolve("main~2").await.expect("main~2"), c1);
    assert_eq!(mirror.default_branch().await.expect("HEAD"), "main");
}

#[tokio::test]
async fn unknown_and_hostile_revisions_are_errors() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let up = tmp.path().join("up");
    std::fs::create_dir(&up).expect("mkdir");
    upstream(&up);
    let mirror = mirror_of(tmp.path());
    mirror
        .sync(up.to_str().expect("utf8"))
        .await
        .expect("clone");

    assert!(matches!(
        mirror.resolve("no-such-branch").await,
        Err(GitError::UnknownRevision { .. })
    ));
    assert!(matches!(
        mirror.resolve(&"0".repeat(40)).await,
        Err(GitError::UnknownRevision { .. })
    ));
    assert!(matches!(
        mirror.resolve("--output=/tmp/x").await,
        Err(GitError::InvalidRevision { .. })
    ));
}

#[tokio::test]
async fn reads_commit_metadata_and_graph() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let up = tmp.path().join("up");
    std::fs::create_dir(&up).expect("mkdir");
    let [c1, c2, c3, s1] = upstream(&up);
    let mirror = mirror_of(tmp.path());
    mirror
        .sync(up.to_str().expect("utf8"))
        .await
        .expect("clone");

    let info = mirror.commit_info(&c3).await.expect("info");
    assert_eq!(info.sha, c3);
    assert_eq!(info.parents, vec![c2.clone()]);
    assert_eq!(info.subject, "pipe: three");
    assert_eq!(info.author_name, "Ann Author");
    assert_eq!(info.author_email, "ann@example.org");
    assert_eq!(info.committer_name, "Cid Committer");
    assert!(info.commit_time > 1_000_000_000);
    let root = mirror.commit_info(&c1).await.expect("root");
    assert!(root.parents.is_empty());

    assert_eq!(
        mirror.rev_list(&c1, "main", false).await.expect("rev-list"),
        vec![c2.clone(), c3.clone()]
    );
    assert!(mirror.is_ancestor(&c1, &c3).await.expect("ancestor"));
    assert!(!mirror.is_ancestor(&s1, &c3).await.expect("not ancestor"));
}

#[tokio::test]
async fn sync_fetches_new_commits_and_prunes_deleted_branches() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let up = tmp.path().join("up");
    std::fs::create_dir(&up).expect("mkdir");
    upstream(&up);
    let mirror = mirror_of(tmp.path());
    let url = up.to_str().expect("utf8");
    mirror.sync(url).await.expect("clone");

    std::fs::write(up.join("f"), "new\n").expect("write");
    git(&up, &["commit", "-q", "-am", "pipe: four"]);
    let c4 = git(&up, &["rev-parse", "HEAD"]);
    git(&up, &["branch", "-D", "side"]);
    assert!(matches!(
        mirror.resolve(&c4).await,
        Err(GitError::UnknownRevision { .. })
    ));

    mirror.sync(url).await.expect("fetch");
    assert_eq!(mirror.resolve("main").await.expect("main"), c4);
    assert!(mirror.resolve("side").await.is_err());
}

#[tokio::test]
async fn clone_of_missing_repo_fails_cleanly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mirror = mirror_of(tmp.path());
    let err = mirror
        .sync(tmp.path().join("nothing-here").to_str().expect("utf8"))
        .await
        .expect_err("no repo");
    assert!(matches!(err, GitError::Failed { .. }), "{err}");
    assert!(!mirror.path().exists(), "no half-made mirror left behind");
}
