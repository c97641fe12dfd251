//! Text cut to a byte budget at a character boundary: log tails and
//! details that the store and the pages bound.

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
}
