//! The stable Message-ID: `<YYYYMMDDHHMM.<8hex>-<domain>>`, as 0-day's.
//!
//! Both parts derive from the regression itself (when it was recorded and a key
//! of its identity), never from the send time or a random number, so rendering
//! the same report again, on any replica, gives the same id and a retried
//! delivery is recognisably the same mail.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// A Message-ID without its angle brackets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageId(String);

impl MessageId {
    /// `recorded_at_ms`: when the regression was recorded (Unix ms, UTC).
    /// `identity_key`: anything that names the regression uniquely.
    /// `domain`: what follows the dash, e.g. `kbot@example.org`.
    pub fn derive(recorded_at_ms: i64, identity_key: &str, domain: &str) -> Result<MessageId> {
        let at = timestamp(recorded_at_ms)?;
        if domain.is_empty() || domain.contains(['<', '>', ' ', '\r', '\n']) {
            return Err(Error::InvalidReport {
                reason: format!("message-id domain {domain:?} is empty or has <, >, or spaces"),
            });
        }
        let digest = Sha256::digest(identity_key.as_bytes());
        let hex8: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        Ok(MessageId(format!(
            "{}.{hex8}-{domain}",
            at.format("%Y%m%d%H%M")
        )))
    }

    /// Wraps an id read back from storage (no brackets).
    pub fn from_stored(id: impl Into<String>) -> MessageId {
        MessageId(id.into().trim_matches(['<', '>']).to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `<id>`, as in the `Message-ID:` header.
    pub fn bracketed(&self) -> String {
        format!("<{}>", self.0)
    }

    /// The `YYYYMMDD` day the id was stamped with (the archive directory).
    pub fn day(&self) -> &str {
        self.0.get(..8).unwrap_or("")
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) fn timestamp(ms: i64) -> Result<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp_millis(ms).ok_or_else(|| Error::InvalidReport {
        reason: format!("timestamp {ms} ms is out of range"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-11-04 14:04:30 UTC
    const AT: i64 = 1_793_801_070_000;

    #[test]
    fn same_regression_same_id() {
        let a = MessageId::derive(AT, "repo/pair/job/metric", "kbot@example.org")
            .expect("valid test input");
        let b = MessageId::derive(AT, "repo/pair/job/metric", "kbot@example.org")
            .expect("valid test input");
        assert_eq!(a, b);
        assert!(a.as_str().starts_with("202611041404."), "{a}");
        assert!(a.as_str().ends_with("-kbot@example.org"), "{a}");
        assert_eq!(
            a.as_str().len(),
            "202611041404.".len() + 8 + "-kbot@example.org".len()
        );
        assert_eq!(a.day(), "20261104");
        assert_eq!(a.bracketed(), format!("<{a}>"));
    }

    #[test]
    fn different_regression_different_id() {
        let a = MessageId::derive(AT, "pair-1", "k@x").expect("valid test input");
        let b = MessageId::derive(AT, "pair-2", "k@x").expect("valid test input");
        assert_ne!(a, b);
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(MessageId::derive(i64::MAX, "k", "k@x").is_err());
        assert!(MessageId::derive(AT, "k", "").is_err());
        assert!(MessageId::derive(AT, "k", "a b@x").is_err());
    }

    #[test]
    fn stored_ids_lose_brackets() {
        assert_eq!(MessageId::from_stored("<a.b-c@d>").as_str(), "a.b-c@d");
    }
}
