//! Text cut to a byte budget at a character boundary (log tails and
//! details that the store and the pages bound), and text made fit to leave
//! a server (URLs without their credentials).

/// At most the first `max` bytes of `text`.
pub fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// At most the last `max` bytes of `text`.
pub fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// `word` single-quoted for a POSIX shell: the guest's /init and a run's
/// reproduction script pass arguments through it.
pub fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The last `lines` lines of `text`, joined by newlines.
pub fn last_lines(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Text as it may leave the server: every URL in it without the
/// `user:password@` of a private archive or repository. Text that holds no
/// URL (a path) is kept. It works on free text, not on one parsed URL, so
/// that git's error output and event texts that quote a URL are cut the
/// same way as the URL itself, and the rest of the text is kept byte for
/// byte.
pub fn without_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The authority ends where the path, query or fragment starts, or
        // where the URL ends in the surrounding text.
        let end = after
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '\'' | '"' | '<' | '>' | '`') || c.is_whitespace()
            })
            .unwrap_or(after.len());
        let authority = &after[..end];
        // The last `@` ends the user info, as URL parsers read it.
        out.push_str(
            authority
                .rfind('@')
                .map_or(authority, |i| &authority[i + 1..]),
        );
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_between_characters() {
        assert_eq!(head("abcdef", 3), "abc");
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(head("éa", 1), "");
        assert_eq!(tail("aé", 1), "");
        assert_eq!(head("short", 10), "short");
        assert_eq!(tail("short", 10), "short");
        assert_eq!(sh_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn credentials_are_cut_from_urls_only() {
        assert_eq!(
            without_credentials("https://bot:s3cret@lore.example.org/netdev/"),
            "https://lore.example.org/netdev/"
        );
        assert_eq!(
            without_credentials("https://token@example.org/x.git"),
            "https://example.org/x.git"
        );
        assert_eq!(
            without_credentials("https://a:p@ss@example.org"),
            "https://example.org"
        );
        assert_eq!(
            without_credentials(
                "git clone failed: fatal: unable to access 'https://bot:s3cret@git.example.org/x/': \
                 refused; see https://u:v@b.example/ and ssh://git@c.example/y"
            ),
            "git clone failed: fatal: unable to access 'https://git.example.org/x/': \
             refused; see https://b.example/ and ssh://c.example/y"
        );
        for kept in [
            "https://lore.kernel.org/all/",
            "https://lore.kernel.org/r/abc@x/",
            "git@example.org:x.git",
            "",
            "/srv/inbox/netdev",
            "netdev.mbox",
        ] {
            assert_eq!(without_credentials(kept), kept);
        }
    }
}
