//! The tree's own MAINTAINERS file: who maintains the files a commit
//! touches (the `M:` lines of every entry with an `F:` pattern matching one
//! of them and no `X:` pattern excluding it), as the kernel's
//! `scripts/get_maintainer.pl` reads it. A maintainer may command kbot
//! about a report of a change to their files.

/// One MAINTAINERS entry: its mail addresses and file patterns.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Entry {
    mails: Vec<String>,
    files: Vec<String>,
    excluded: Vec<String>,
    /// `T: git URL [BRANCH]`: the entry's git trees.
    trees: Vec<(String, Option<String>)>,
}

/// The addresses (lowercased, deduplicated) that maintain any of `paths`
/// according to the MAINTAINERS text `text`.
pub fn of(text: &str, paths: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in entries(text) {
        let covers = |p: &String| {
            e.files.iter().any(|f| matches(f, p)) && !e.excluded.iter().any(|x| matches(x, p))
        };
        if !paths.iter().any(covers) {
            continue;
        }
        for m in &e.mails {
            if !out.contains(m) {
                out.push(m.clone());
            }
        }
    }
    out
}

/// The git trees (`T: git URL [BRANCH]`) of the entries that cover any of
/// `paths`, the most specific entry (longest matching `F:` pattern) first.
pub fn trees_of(text: &str, paths: &[String]) -> Vec<(String, Option<String>)> {
    let mut covering: Vec<(usize, Entry)> = entries(text)
        .into_iter()
        .filter_map(|e| {
            let best = paths
                .iter()
                .filter(|p| !e.excluded.iter().any(|x| matches(x, p)))
                .flat_map(|p| e.files.iter().filter(|f| matches(f, p)).map(|f| f.len()))
                .max()?;
            Some((best, e))
        })
        .collect();
    covering.sort_by_key(|(specific, _)| std::cmp::Reverse(*specific));
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for (_, e) in covering {
        for t in e.trees {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out
}

/// `git URL [BRANCH]` (other kinds of tree, `quilt`, `hg`, are not git).
fn git_tree(value: &str) -> Option<(String, Option<String>)> {
    let mut words = value.split_whitespace();
    if words.next()? != "git" {
        return None;
    }
    let url = words.next()?.to_owned();
    Some((url, words.next().map(str::to_owned)))
}

/// The entries: runs of `X:\tvalue` lines starting at column 0, separated by
/// any other line (the preamble's examples are indented, so they are none).
fn entries(text: &str) -> Vec<Entry> {
    let mut all = Vec::new();
    let mut cur = Entry::default();
    for line in text.lines() {
        let field = line
            .split_once(':')
            .filter(|(k, _)| k.len() == 1 && k.bytes().all(|b| b.is_ascii_uppercase()));
        match field {
            Some(("M", v)) => {
                if let Some(a) = address(v) {
                    cur.mails.push(a);
                }
            }
            Some(("F", v)) => cur.files.push(v.trim().to_owned()),
            Some(("X", v)) => cur.excluded.push(v.trim().to_owned()),
            Some(("T", v)) => cur.trees.extend(git_tree(v)),
            Some(_) => {}
            None => {
                if cur != Entry::default() {
                    all.push(std::mem::take(&mut cur));
                }
            }
        }
    }
    if cur != Entry::default() {
        all.push(cur);
    }
    all
}

/// `Name <a@b>` or a bare `a@b`, lowercased.
fn address(value: &str) -> Option<String> {
    let v = value.trim();
    let a = match v.rsplit_once('<') {
        Some((_, rest)) => rest.split('>').next().unwrap_or_default(),
        None => v,
    }
    .trim();
    a.contains('@').then(|| a.to_ascii_lowercase())
}

/// get_maintainer.pl's `F:` rules: a pattern ending in `/` covers every
/// file below that directory; `*` and `?` match within one path component;
/// a plain name covers that file or everything below that directory.
fn matches(pattern: &str, path: &str) -> bool {
    if pattern.is_empty() {
        return false;
    }
    if let Some(dir) = pattern.strip_suffix('/') {
        return glob_prefix(dir, path);
    }
    if !pattern.contains(['*', '?']) {
        return path == pattern
            || path
                .strip_prefix(pattern)
                .is_some_and(|rest| rest.starts_with('/'));
    }
    glob(pattern.as_bytes(), path.as_bytes())
}

/// Whether `path` lies below the directory the glob `dir` names.
fn glob_prefix(dir: &str, path: &str) -> bool {
    let depth = dir.split('/').count();
    let mut parts = path.split('/');
    let head: Vec<&str> = parts.by_ref().take(depth).collect();
    head.len() == depth && parts.next().is_some() && glob(dir.as_bytes(), head.join("/").as_bytes())
}

/// Shell-style glob where `*` and `?` never match a `/`.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob(&p[1..], s) || (s.first().is_some_and(|&c| c != b'/') && glob(p, &s[1..]))
        }
        (Some(b'?'), Some(&c)) => c != b'/' && glob(&p[1..], &s[1..]),
        (Some(a), Some(b)) => a == b && glob(&p[1..], &s[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "List of maintainers\n===================\n\n\
        Descriptions of section entries and preferred order\n\
        \tM: *Mail* patches to: FullName <address@domain>\n\
        \tF: *Files* and directories wildcard patterns.\n\n\
        PIPE\n\
        M:\tPat Pipe <Pat@Example.org>\n\
        L:\tlinux-fsdevel@vger.kernel.org\n\
        S:\tMaintained\n\
        T:\tgit git://git.example.org/pipe.git pipe-next\n\
        F:\tfs/pipe.c\n\
        F:\tinclude/linux/pipe_fs_i.h\n\n\
        FILESYSTEMS (VFS and infrastructure)\n\
        M:\tVic Vfs <vic@example.org>\n\
        R:\tRee Viewer <ree@example.org>\n\
        T:\tgit https://git.example.org/vfs.git\n\
        T:\tquilt https://example.org/series/\n\
        F:\tfs/\n\
        X:\tfs/ext4/\n\n\
        EXT4\n\
        M:\tTed <ted@example.org>\n\
        F:\tfs/ext4/\n\n\
        DRIVERS TOP\n\
        M:\tdan@example.org\n\
        F:\tdrivers/net/*\n";

    fn of_paths(paths: &[&str]) -> Vec<String> {
        let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
        of(TEXT, &paths)
    }

    #[test]
    fn trees_most_specific_first() {
        let paths = ["fs/pipe.c".to_owned()];
        assert_eq!(
            trees_of(TEXT, &paths),
            [
                (
                    "git://git.example.org/pipe.git".to_owned(),
                    Some("pipe-next".to_owned())
                ),
                ("https://git.example.org/vfs.git".to_owned(), None),
            ]
        );
        assert!(trees_of(TEXT, &["fs/ext4/super.c".to_owned()]).is_empty());
    }

    #[test]
    fn a_file_and_its_directories() {
        assert_eq!(
            of_paths(&["fs/pipe.c"]),
            vec!["pat@example.org", "vic@example.org"]
        );
        assert_eq!(of_paths(&["fs/splice.c"]), vec!["vic@example.org"]);
    }

    #[test]
    fn excluded_paths_and_reviewers() {
        assert_eq!(of_paths(&["fs/ext4/inode.c"]), vec!["ted@example.org"]);
        assert!(!of_paths(&["fs/splice.c"]).contains(&"ree@example.org".to_owned()));
    }

    #[test]
    fn a_star_stays_in_its_directory() {
        assert_eq!(
            of_paths(&["drivers/net/loopback.c"]),
            vec!["dan@example.org"]
        );
        assert!(of_paths(&["drivers/net/ethernet/x.c"]).is_empty());
        assert!(of_paths(&["kernel/sys.c"]).is_empty());
    }

    #[test]
    fn the_preamble_is_no_entry() {
        assert!(!of_paths(&["fs/pipe.c"]).contains(&"address@domain".to_owned()));
    }

    #[test]
    fn globs() {
        assert!(matches("arch/*/kernel/", "arch/x86/kernel/setup.c"));
        assert!(!matches("arch/*/kernel/", "arch/x86/mm/init.c"));
        assert!(matches("fs/pipe", "fs/pipe/x.c"));
        assert!(!matches("fs/pipe", "fs/pipes.c"));
        assert!(matches(
            "include/linux/pipe_fs_?.h",
            "include/linux/pipe_fs_i.h"
        ));
    }
}
