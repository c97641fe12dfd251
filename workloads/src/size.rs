//! Size arguments with lmbench's suffixes (lib_timing.c `bytes()`).

use crate::error::{BenchError, Result};

/// Parses "65536", "64k", "64K", "10m", "10M": k = 1024, m = 1048576, as
/// lmbench's `bytes()` does. Unlike lmbench, anything else is an error rather
/// than a silent 0.
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let bad = || {
        BenchError::usage(format!(
            "bad size '{s}' (digits with an optional k or m suffix)"
        ))
    };
    let (digits, mult) = match t.as_bytes().last() {
        Some(b'k' | b'K') => (&t[..t.len() - 1], 1024u64),
        Some(b'm' | b'M') => (&t[..t.len() - 1], 1024 * 1024),
        Some(_) => (t, 1),
        None => return Err(bad()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(mult).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_binary() {
        assert_eq!(parse_size("64k").ok(), Some(65536));
        assert_eq!(parse_size("10M").ok(), Some(10 * 1024 * 1024));
        assert_eq!(parse_size("32678").ok(), Some(32678));
    }

    #[test]
    fn garbage_is_rejected() {
        for s in ["", "k", "1.5m", "-3", "12g", "99999999999999999999"] {
            assert!(parse_size(s).is_err(), "{s}");
        }
    }
}
