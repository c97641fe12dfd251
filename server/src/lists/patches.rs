//! A series' posted mails as patches: their text, the paths they touch,
//! and `git am -3` of them on a base in the server's mirror.

use crate::error::Result;
use crate::repos::{self, git::Am, RepoRow};
use crate::state::AppState;

/// A stored mail as text with `\n` line ends, as `git am` and the
/// mboxrd writer take it.
pub fn mail_text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).replace("\r\n", "\n")
}

/// `git am -3` of the mails `texts`, in order, on `base` in the repo's
/// mirror, committed by the robot; the tip, or git am's words.
pub async fn apply(state: &AppState, repo: &RepoRow, base: &str, texts: &[String]) -> Result<Am> {
    let robot = &state.config.mail.report.robot_address;
    let mirror = repos::mirror_for(state, &repo.name);
    let paths = touched_paths(&texts.concat());
    Ok(mirror
        .am(base, mboxrd(texts)?, &paths, ("kbot", robot))
        .await?)
}

/// The patches as one mboxrd file, as `git am --patch-format=mboxrd` reads
/// it: each message through the report archive's own mboxrd writer.
pub fn mboxrd(messages: &[String]) -> Result<Vec<u8>> {
    let mut out = String::new();
    for m in messages {
        out.push_str(&kbot_core::report::mbox::mbox_entry(m, "kbot", 0)?);
    }
    Ok(out.into_bytes())
}

/// Every path a patch text names: in `diff --git a/X b/Y` lines, and in
/// `--- a/X` / `+++ b/Y` lines (a plain `diff -u` has only those).
pub fn touched_paths(text: &str) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut add = |p: &str| {
        let p = p.split('\t').next().unwrap_or(p).trim();
        if !p.is_empty() && seen.insert(p.to_owned()) {
            paths.push(p.to_owned());
        }
    };
    for line in text.lines() {
        if let Some((a, b)) = line
            .strip_prefix("diff --git a/")
            .and_then(|rest| rest.split_once(" b/"))
        {
            add(a);
            add(b);
        } else if let Some(p) = line
            .strip_prefix("--- a/")
            .or_else(|| line.strip_prefix("+++ b/"))
        {
            add(p);
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mboxrd_quotes_from_lines() {
        let out = mboxrd(&["Subject: x\n\nFrom here\n>From there\nend".to_owned()]).expect("mbox");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.starts_with("From kbot "));
        assert!(text.contains("\n>From here\n>>From there\nend\n\n"));
    }

    #[test]
    fn paths_come_from_plain_unified_diffs_too() {
        let p = "--- a/fs/pipe.c\n+++ b/fs/pipe.c\n@@ -1 +1 @@\n--- a/x.c\t2024\n+++ b/x.c\n";
        assert_eq!(touched_paths(p), ["fs/pipe.c", "x.c"]);
    }

    #[test]
    fn paths_come_from_diff_headers() {
        let raw = "diff --git a/fs/pipe.c b/fs/pipe.c\n--- a/fs/pipe.c\ndiff --git a/x b/y\n";
        assert_eq!(touched_paths(raw), ["fs/pipe.c", "x", "y"]);
    }
}
