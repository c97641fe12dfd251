//! The base a posted series is applied on, by the first rule that gives
//! one, as 0-day and netdev's patchwork CI choose it:
//!
//! 1. the sender's `base-commit:`, in the list's tree;
//! 2. the same, in any other registered repository (its mirror is fetched
//!    when it does not have it), whose branches are then fetched into the
//!    list's tree under `refs/kbot/trees/REPO/`;
//! 3. a subject tag the list maps to a tree (`[PATCH net-next]` ->
//!    `net-next:main`): that branch's head when the series was posted;
//! 4. the tree the tree's own MAINTAINERS names (`T: git URL [BRANCH]`) for
//!    the files the series touches, when that URL is a registered
//!    repository: its branch's head when posted;
//! 5. the list's branch head when posted.
//!
//! The series is applied in the list's tree either way, so its refs, pair
//! and answers stay where they were. The answer's `base:` line names the
//! rule, and the earlier rules' reasons for not applying.

use std::collections::BTreeMap;

use super::assemble::SeriesDraft;
use super::maintainers;
use super::store::{self, ListRow};
use super::subject;
use crate::error::{Error, Result};
use crate::repos::git::Mirror;
use crate::repos::{self, RepoRow};
use crate::state::AppState;

/// The base of a series and how it was chosen.
pub struct Base {
    pub sha: String,
    pub how: String,
}

/// A branch of a registered repository.
struct Tree {
    repo: RepoRow,
    branch: String,
}

impl Tree {
    fn name(&self) -> String {
        format!("{}/{}", self.repo.name, self.branch)
    }
}

/// What the rules are given: the series and where it came from.
pub struct Posting<'a> {
    pub draft: &'a SeriesDraft,
    pub rows: &'a [store::MessageMetaRow],
    /// The patches' text (for the files they touch).
    pub patches: &'a str,
}

/// Chooses the base of `posting` on list `l` (tree `repo`).
pub async fn choose(
    state: &AppState,
    l: &ListRow,
    repo: &RepoRow,
    posting: &Posting<'_>,
) -> Result<Base> {
    let mirror = repos::mirror_for(state, &repo.name);
    repos::sync_mirror(state, repo).await?;
    let posted_secs = posting.draft.first_date_ms / 1000;
    let mut not = Vec::new();
    if let Some(sha) = named_base(posting) {
        if mirror.has_commit(&sha).await {
            return Ok(Base {
                sha,
                how: "base-commit".into(),
            });
        }
        match in_other_repo(state, repo, &mirror, &sha).await? {
            Some(other) => {
                return Ok(Base {
                    sha,
                    how: format!("base-commit, from {other}"),
                })
            }
            None => not.push(format!("base-commit {sha} is in no registered repository")),
        }
    }
    match tagged_tree(state, l, posting).await? {
        Lookup::Found((tag, tree)) => {
            let sha = head_of(state, repo, &mirror, &tree, posted_secs).await?;
            return Ok(chosen(
                sha,
                format!("subject tag [{tag}]: {} head when posted", tree.name()),
                &not,
            ));
        }
        Lookup::Not(why) => not.push(why),
    }
    match maintainers_tree(state, l, &mirror, posting).await? {
        Lookup::Found(tree) => {
            let sha = head_of(state, repo, &mirror, &tree, posted_secs).await?;
            let how = format!("MAINTAINERS T: {} head when posted", tree.name());
            return Ok(chosen(sha, how, &not));
        }
        Lookup::Not(why) => not.push(why),
    }
    let sha = mirror.head_at(&l.branch, posted_secs).await?;
    Ok(chosen(
        sha,
        format!("tree head ({} when posted)", l.branch),
        &not,
    ))
}

/// What one way of finding the base found: a tree, or why it found none
/// (said in the chosen base's `how`).
enum Lookup<T> {
    Found(T),
    Not(String),
}

fn chosen(sha: String, how: String, not: &[String]) -> Base {
    let how = match not {
        [] => how,
        _ => format!("{how}; {}", not.join("; ")),
    };
    Base { sha, how }
}

/// The first `base-commit:` of the series' mails.
fn named_base(posting: &Posting<'_>) -> Option<String> {
    let draft = posting.draft;
    let ids: Vec<&String> = draft.cover.iter().chain(draft.patches.values()).collect();
    posting
        .rows
        .iter()
        .filter(|r| ids.contains(&&r.message_id))
        .find_map(|r| r.base_commit.clone())
}

/// The registered repository other than `own` that has `sha` (its mirror
/// synced first); its branches are fetched into `mirror`.
async fn in_other_repo(
    state: &AppState,
    own: &RepoRow,
    mirror: &Mirror,
    sha: &str,
) -> Result<Option<String>> {
    for other in repos::list_repos(&state.db).await? {
        if other.id == own.id {
            continue;
        }
        let theirs = repos::mirror_for(state, &other.name);
        if !theirs.has_commit(sha).await {
            if let Err(e) = repos::sync_mirror(state, &other).await {
                tracing::warn!(repo = %other.name, error = %e, "fetching a base's repository failed");
                continue;
            }
            if !theirs.has_commit(sha).await {
                continue;
            }
        }
        mirror.fetch_trees(&theirs, &other.name, "*").await?;
        if mirror.has_commit(sha).await {
            return Ok(Some(other.name));
        }
    }
    Ok(None)
}

/// The tree the series' subject tag names on this list, or why none does.
async fn tagged_tree(
    state: &AppState,
    l: &ListRow,
    posting: &Posting<'_>,
) -> Result<Lookup<(String, Tree)>> {
    let tags = l.tree_tags();
    if tags.is_empty() {
        return Ok(Lookup::Not("the list maps no subject tag to a tree".into()));
    }
    let first = posting
        .draft
        .cover
        .iter()
        .chain(posting.draft.patches.values())
        .find_map(|id| posting.rows.iter().find(|r| &r.message_id == id));
    let words = first
        .map(|r| subject::parse(&r.subject).prefixes)
        .unwrap_or_default();
    for word in &words {
        if let Some((_, spec)) = tags.iter().find(|(t, _)| t.eq_ignore_ascii_case(word)) {
            return Ok(Lookup::Found((word.clone(), tree_of(state, spec).await?)));
        }
    }
    Ok(Lookup::Not(format!(
        "no subject tag of [{}] names a tree",
        words.join(" ")
    )))
}

/// The registered tree MAINTAINERS (at the list's branch head) names for
/// the files the series touches, or why none.
async fn maintainers_tree(
    state: &AppState,
    l: &ListRow,
    mirror: &Mirror,
    posting: &Posting<'_>,
) -> Result<Lookup<Tree>> {
    let paths = super::patches::touched_paths(posting.patches);
    let head = mirror.resolve(&l.branch).await?;
    let found: Option<String> = mirror.file_at(&head, "MAINTAINERS").await?;
    let Some(text) = found else {
        return Ok(Lookup::Not(format!("{} has no MAINTAINERS", l.branch)));
    };
    let trees = maintainers::trees_of(&text, &paths);
    let repos = repos::list_repos(&state.db).await?;
    for (url, branch) in &trees {
        if let Some(repo) = repos.iter().find(|r| same_url(&r.url, url)) {
            let branch = branch
                .clone()
                .unwrap_or_else(|| repo.default_branch.clone());
            return Ok(Lookup::Found(Tree {
                repo: repo.clone(),
                branch,
            }));
        }
    }
    Ok(Lookup::Not(if trees.is_empty() {
        "MAINTAINERS names no tree for the files it touches".into()
    } else {
        format!(
            "MAINTAINERS names {} for its files, none registered",
            trees
                .iter()
                .map(|(u, _)| u.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }))
}

/// `branch`'s head when posted, in the list's tree (`mirror` of `own`),
/// fetched there first when it is another repository's.
async fn head_of(
    state: &AppState,
    own: &RepoRow,
    mirror: &Mirror,
    tree: &Tree,
    posted_secs: i64,
) -> Result<String> {
    if tree.repo.id == own.id {
        return Ok(mirror.head_at(&tree.branch, posted_secs).await?);
    }
    repos::sync_mirror(state, &tree.repo).await?;
    let theirs = repos::mirror_for(state, &tree.repo.name);
    let local = mirror
        .fetch_trees(&theirs, &tree.repo.name, &tree.branch)
        .await?;
    Ok(mirror.head_at(&local, posted_secs).await?)
}

/// `REPO[:BRANCH]` as a registered tree whose branch exists.
async fn tree_of(state: &AppState, spec: &str) -> Result<Tree> {
    let (name, branch) = match spec.split_once(':') {
        Some((r, b)) => (r.trim(), Some(b.trim())),
        None => (spec.trim(), None),
    };
    let repo = repos::get_repo(&state.db, name).await?;
    let branch = branch
        .filter(|b| !b.is_empty())
        .map_or_else(|| repo.default_branch.clone(), str::to_owned);
    Ok(Tree { repo, branch })
}

/// A list's tree tags as stored; each must name a registered repository and
/// one of its branches.
pub async fn tree_tags(state: &AppState, given: &BTreeMap<String, String>) -> Result<String> {
    let mut out = Vec::new();
    for (tag, spec) in given {
        let tag = tag.trim();
        let word_ok = !tag.is_empty()
            && tag.len() <= 64
            && tag
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !word_ok {
            return Err(Error::BadRequest(format!(
                "tree_tags: {tag:?} is not a subject tag (letters, digits, '.', '_', '-')"
            )));
        }
        let tree = tree_of(state, spec).await?;
        repos::resolve_commit(state, &tree.repo, &tree.branch).await?;
        out.push(format!("{tag}={}:{}", tree.repo.name, tree.branch));
    }
    Ok(out.join("\n"))
}

/// Whether two git URLs name one repository: the same after dropping the
/// scheme, a trailing `/` and `.git`.
fn same_url(a: &str, b: &str) -> bool {
    fn norm(u: &str) -> String {
        let u = u.trim();
        let u = u.split_once("://").map_or(u, |(_, rest)| rest);
        u.trim_end_matches('/')
            .trim_end_matches(".git")
            .to_ascii_lowercase()
    }
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_compare_without_scheme_and_suffix() {
        assert!(same_url(
            "git://git.kernel.org/pub/scm/linux/kernel/git/netdev/net-next.git",
            "https://git.kernel.org/pub/scm/linux/kernel/git/netdev/net-next"
        ));
        assert!(!same_url("/srv/a.git", "/srv/b.git"));
    }
}
