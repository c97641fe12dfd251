//! Whether a command mail's From is vouched for by its domain: a DKIM
//! signature (RFC 6376) that passes, signs the whole body (no `l=` limit,
//! behind which anyone may append command lines) and whose signing domain
//! aligns with the From domain (the same domain or a parent of it, DMARC's
//! relaxed alignment). Keys come from DNS through mail-auth's resolver, or
//! from the keys pinned in the settings (`KBOT_MAIL_DKIM_KEYS`), which are
//! asked first.

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use mail_auth::common::parse::TxtRecordParser;
use mail_auth::common::verify::DomainKey;
use mail_auth::{
    AuthenticatedMessage, DkimResult, MessageAuthenticator, Parameters, ResolverCache, Txt,
};

use crate::config::mail::{DkimKeys, MailConfig};

/// How the From line of a command mail was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seal {
    /// A DKIM signature passed with a domain aligned with the From.
    Pass,
    /// No DKIM signature at all, on a list that accepts that.
    UnsignedAccepted,
    /// No aligned passing signature: the From may be anyone's.
    Unverified,
}

/// How the From address `from` of the raw mail `raw` is sealed.
pub async fn seal(config: &MailConfig, raw: &[u8], from: &str, accept_unsigned: bool) -> Seal {
    let Some(message) = AuthenticatedMessage::parse(raw) else {
        return Seal::Unverified;
    };
    if message.dkim_headers.is_empty() {
        return if accept_unsigned {
            Seal::UnsignedAccepted
        } else {
            Seal::Unverified
        };
    }
    let Some(authenticator) = authenticator() else {
        return Seal::Unverified;
    };
    let Some((_, from_domain)) = from.rsplit_once('@') else {
        return Seal::Unverified;
    };
    let pinned = Pinned(&config.dkim_keys);
    let outputs = authenticator
        .verify_dkim(Parameters::new(&message).with_txt_cache(&pinned))
        .await;
    let vouched = outputs.iter().any(|o| {
        o.result() == &DkimResult::Pass
            && o.signature()
                .is_some_and(|s| s.l == 0 && aligned(&s.d, from_domain))
    });
    if vouched {
        Seal::Pass
    } else {
        tracing::info!(from, "no aligned DKIM pass for a command mail");
        Seal::Unverified
    }
}

/// The signing domain is the From domain or one of its parents (never a
/// bare top-level name).
pub fn aligned(signer: &str, from_domain: &str) -> bool {
    let signer = signer.trim().trim_end_matches('.').to_ascii_lowercase();
    let from = from_domain
        .trim()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    signer.contains('.') && (from == signer || from.ends_with(&format!(".{signer}")))
}

/// One DNS resolver for the server's life (the system's configuration);
/// none when it cannot be made, and then no signature passes.
fn authenticator() -> Option<&'static MessageAuthenticator> {
    static ONE: OnceLock<Option<MessageAuthenticator>> = OnceLock::new();
    ONE.get_or_init(|| match MessageAuthenticator::new_system_conf() {
        Ok(a) => Some(a),
        Err(e) => {
            tracing::error!(error = %e, "no DNS resolver for DKIM keys: no command mail verifies");
            None
        }
    })
    .as_ref()
}

/// The pinned keys as mail-auth's TXT cache: a pinned name never reaches
/// DNS; nothing looked up is kept (every mail asks DNS afresh).
struct Pinned<'a>(&'a DkimKeys);

impl ResolverCache<Box<str>, Txt> for Pinned<'_> {
    fn get<Q>(&self, name: &Q) -> Option<Txt>
    where
        Box<str>: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.0 .0.iter().find_map(|(pinned, record)| {
            let key: Box<str> = format!("{}.", pinned.trim_end_matches('.')).into();
            (<Box<str> as Borrow<Q>>::borrow(&key) == name).then(|| {
                match DomainKey::parse(record.as_bytes()) {
                    Ok(k) => Txt::DomainKey(Arc::new(k)),
                    Err(e) => Txt::Error(e),
                }
            })
        })
    }

    fn remove<Q>(&self, _: &Q) -> Option<Txt>
    where
        Box<str>: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        None
    }

    fn insert(&self, _: Box<str>, _: Txt, _: Instant) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_is_the_domain_or_a_parent() {
        assert!(aligned("example.org", "example.org"));
        assert!(aligned("Example.org.", "mail.example.org"));
        assert!(!aligned("example.org", "example.net"));
        assert!(!aligned("ample.org", "example.org"));
        assert!(!aligned("org", "example.org"));
    }
}
