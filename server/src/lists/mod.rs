//! Lists: the robot reads the kernel's mailing lists, puts the patch
//! series posted there together, tests them, and answers in their threads.
//!
//! The pure layers are here: a subject's bracket words ([`subject`]), one
//! raw message's fields, diff and robot commands ([`message`]), and series
//! from the messages' metadata ([`assemble`]); [`archive`] reads new
//! messages from a public-inbox repository, an mbox or a Maildir.

pub mod archive;
pub mod assemble;
pub mod message;
pub mod subject;

#[cfg(test)]
mod tests {
    use super::assemble::{assemble, MessageMeta};
    use super::message;
    use std::path::Path;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "Ann Author")
            .env("GIT_AUTHOR_EMAIL", "ann@example.org")
            .env("GIT_COMMITTER_NAME", "Cid Sender")
            .env("GIT_COMMITTER_EMAIL", "cid@example.org")
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Commits a file per subject; the last commit.
    fn commit_each(repo: &Path, subjects: &[&str]) -> String {
        for subject in subjects {
            std::fs::write(repo.join(subject.replace(' ', "_")), subject).expect("write");
            git(repo, &["add", "."]);
            git(repo, &["commit", "-q", "-m", subject]);
        }
        git(repo, &["rev-parse", "HEAD"])
    }

    /// `git format-patch -v2 --cover-letter --thread=shallow --base=...`
    /// output, parsed and assembled: one complete series with its cover
    /// letter and base.
    #[test]
    fn a_format_patch_series_assembles() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = tmp.path().join("repo");
        std::fs::create_dir(&repo).expect("mkdir");
        git(&repo, &["init", "-q", "-b", "main"]);
        let base = commit_each(&repo, &["base"]);
        commit_each(&repo, &["mm: one", "mm: two", "mm: three"]);
        let out = tmp.path().join("out");
        let (base_arg, out_arg) = (format!("--base={base}"), out.display().to_string());
        let args = [
            "format-patch",
            "-q",
            "-v2",
            "--cover-letter",
            "--thread=shallow",
        ];
        git(
            &repo,
            &[
                &args[..],
                &[base_arg.as_str(), "-o", out_arg.as_str(), "HEAD~3"],
            ]
            .concat(),
        );
        let mut files: Vec<_> = std::fs::read_dir(&out)
            .expect("patches")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        let parsed: Vec<_> = files
            .iter()
            .map(|f| message::parse(&std::fs::read(f).expect("read")).expect("parses"))
            .collect();
        let metas: Vec<_> = parsed.iter().map(|m| MessageMeta::new(m, 1)).collect();
        let drafts = assemble(&metas);
        assert_eq!(drafts.len(), 1, "{drafts:#?}");
        let series = &drafts[0];
        assert!(series.complete());
        assert_eq!((series.version, series.total), (2, 3));
        assert_eq!(series.cover.as_ref(), Some(&parsed[0].message_id));
        assert_eq!(series.key, parsed[0].message_id);
        // The cover letter is the sender's (the committer), the patches
        // the author's.
        assert_eq!(series.author, "cid@example.org");
        assert_eq!(parsed[1].from.address, "ann@example.org");
        assert_eq!(parsed[0].base_commit.as_deref(), Some(base.as_str()));
        assert_eq!(parsed[0].patch, None);
        assert_eq!(parsed[2].subject, "[PATCH v2 2/3] mm: two");
        let patch = parsed[2].patch.as_deref().expect("a diff");
        assert!(
            patch.starts_with("diff --git a/mm:_two b/mm:_two"),
            "{patch}"
        );
        assert!(!patch.contains("\n-- \n"), "{patch}");
    }
}
