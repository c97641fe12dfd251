//! Delivery of one stored message over SMTP with lettre.

use lettre::address::Envelope;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{Address, AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use super::config::SmtpSettings;

/// What became of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    /// Worth retrying: 4xx, connection refused or reset, timeout.
    Transient(String),
    /// The relay refused for good (5xx), or the message cannot be sent as stored.
    Permanent(String),
}

/// Sends `message` (`\n` line ends; sent as CRLF) to `recipients` from `envelope_from`.
///
/// A fresh connection per attempt: reports are rare, and a pooled connection
/// the relay dropped during an outage would only cost an attempt.
pub async fn deliver(
    settings: &SmtpSettings,
    envelope_from: &str,
    recipients: &[String],
    message: &str,
) -> Delivery {
    let envelope = match envelope(envelope_from, recipients) {
        Ok(e) => e,
        Err(why) => return Delivery::Permanent(why),
    };
    let transport = match transport(settings) {
        Ok(t) => t,
        Err(why) => return Delivery::Transient(why),
    };
    let wire = kbot_core::report::mbox::to_wire(message);
    // lettre ends DATA with CRLF "." CRLF itself; a final CRLF of ours would
    // arrive as an extra empty line.
    let wire = wire.strip_suffix(b"\r\n").unwrap_or(&wire);
    match transport.send_raw(&envelope, wire).await {
        Ok(_) => Delivery::Sent,
        Err(e) if e.is_permanent() => Delivery::Permanent(error_text(&e)),
        Err(e) => Delivery::Transient(error_text(&e)),
    }
}

fn envelope(from: &str, recipients: &[String]) -> Result<Envelope, String> {
    let parse = |a: &str| -> Result<Address, String> {
        a.parse::<Address>()
            .map_err(|e| format!("bad address {a:?}: {e}"))
    };
    let to = recipients
        .iter()
        .map(|r| parse(r))
        .collect::<Result<Vec<_>, _>>()?;
    Envelope::new(Some(parse(from)?), to).map_err(|e| format!("bad envelope: {e}"))
}

fn transport(s: &SmtpSettings) -> Result<AsyncSmtpTransport<Tokio1Executor>, String> {
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&s.host)
        .port(s.port)
        .timeout(Some(s.timeout));
    if s.starttls {
        let tls = TlsParameters::new(s.host.clone()).map_err(|e| format!("TLS setup: {e}"))?;
        builder = builder.tls(Tls::Required(tls));
    }
    if let Some((user, password)) = &s.credentials {
        builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
    }
    Ok(builder.build())
}

/// lettre's error with its sources, on one line.
fn error_text(e: &lettre::transport::smtp::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
