//! The subject line: `[tree:branch] [prefix] <sha10>: <metric> <N>% regression`.

use super::ReportData;

/// The subsystem prefix 0-day puts in brackets: the commit subject up to its
/// first `": "` (`fs/pipe` for "fs/pipe: unify the page pools ..."), if any.
pub fn subject_prefix(commit_subject: &str) -> Option<&str> {
    let (prefix, _) = commit_subject.split_once(": ")?;
    let prefix = prefix.trim();
    // A prefix with spaces is prose ("Revert "x: y""), not a subsystem tag.
    (!prefix.is_empty() && !prefix.contains(' ')).then_some(prefix)
}

/// The first ten hex digits, as 0-day abbreviates commits in subjects and tables.
pub(crate) fn short_sha(sha: &str) -> &str {
    sha.get(..10).unwrap_or(sha)
}

/// `Re: <subject>`, without doubling a `Re:` already there.
pub fn reply_subject(subject: &str) -> String {
    let s = subject.trim();
    let is_reply = s.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("re:"));
    if is_reply {
        s.to_owned()
    } else {
        format!("Re: {s}")
    }
}

pub fn render_subject(data: &ReportData) -> String {
    if let Some(posted) = &data.posted {
        return reply_subject(&posted.patch_subject);
    }
    let prefix = subject_prefix(&data.commit.subject)
        .map(|p| format!("[{p}] "))
        .unwrap_or_default();
    format!(
        "[{}:{}] {}{}: {} {:.1}% {}",
        data.tree,
        data.branch,
        prefix,
        short_sha(&data.commit.sha),
        data.metric,
        data.change_percent.abs(),
        data.kind.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_the_subsystem_tag() {
        assert_eq!(
            subject_prefix("fs/pipe: unify the page pools into a single per-pipe pool"),
            Some("fs/pipe")
        );
        assert_eq!(subject_prefix("mm, slab: fix x"), None);
        assert_eq!(subject_prefix("Revert \"llist: y\""), None);
        assert_eq!(subject_prefix("no prefix at all"), None);
    }

    #[test]
    fn a_reply_subject_has_one_re() {
        assert_eq!(
            reply_subject("[PATCH v2 3/5] pipe: x"),
            "Re: [PATCH v2 3/5] pipe: x"
        );
        assert_eq!(reply_subject("RE: [PATCH] y"), "RE: [PATCH] y");
    }

    #[test]
    fn short_sha_handles_short_input() {
        assert_eq!(short_sha("f7f4665dc520fd8b"), "f7f4665dc5");
        assert_eq!(short_sha("abc"), "abc");
    }
}
