//! Delivery of one stored message over SMTP with lettre, one command at a
//! time so the sender can record the hand-off just before DATA.

use std::future::Future;

use lettre::address::Envelope;
use lettre::transport::smtp::authentication::{Credentials, DEFAULT_MECHANISMS};
use lettre::transport::smtp::client::{AsyncSmtpConnection, TlsParameters};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt};
use lettre::transport::smtp::extension::{ClientId, Extension, MailBodyParameter, MailParameter};
use lettre::Address;

use crate::config::mail::SmtpSettings;

type SmtpError = lettre::transport::smtp::Error;

/// What became of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    /// Worth retrying: 4xx, connection refused or reset, timeout, all before
    /// the relay could have accepted the message.
    Transient(String),
    /// The relay refused for good (5xx), or the message cannot be sent as stored.
    Permanent(String),
    /// The whole message went out but no verdict came back (the connection
    /// broke or timed out waiting for it): the relay may have accepted it, so
    /// it is not sent again by itself.
    Uncertain(String),
}

/// Sends `message` (`\n` line ends; sent as CRLF) to `recipients` from `envelope_from`.
pub async fn deliver(
    settings: &SmtpSettings,
    envelope_from: &str,
    recipients: &[String],
    message: &str,
) -> Delivery {
    deliver_with_handoff(settings, envelope_from, recipients, message, async {
        Ok(())
    })
    .await
}

/// [`deliver`], awaiting `before_data` once the relay has taken the envelope
/// and just before the DATA command: the sender records there, durably, that
/// the message is being handed over. An `Err` from it ends the session
/// without DATA (nothing was sent) as a transient failure.
///
/// A fresh connection per attempt: reports are rare, and a pooled connection
/// the relay dropped during an outage would only cost an attempt.
pub async fn deliver_with_handoff(
    settings: &SmtpSettings,
    envelope_from: &str,
    recipients: &[String],
    message: &str,
    before_data: impl Future<Output = Result<(), String>>,
) -> Delivery {
    let envelope = match envelope(envelope_from, recipients) {
        Ok(e) => e,
        Err(why) => return Delivery::Permanent(why),
    };
    let wire = kbot_core::report::mbox::to_wire(message);
    // lettre ends DATA with CRLF "." CRLF itself; a final CRLF of ours would
    // arrive as an extra empty line.
    let wire = wire.strip_suffix(b"\r\n").unwrap_or(&wire);
    let mut conn = match connect(settings).await {
        Ok(c) => c,
        Err(e) => return refused(&e),
    };
    let delivery = match send_envelope(&mut conn, &envelope, wire).await {
        Err(e) => refused(&e),
        Ok(()) => match before_data.await {
            Err(why) => Delivery::Transient(why),
            Ok(()) => send_data(&mut conn, wire).await,
        },
    };
    conn.abort().await;
    delivery
}

/// Connects, says EHLO, STARTTLS and AUTH as configured.
async fn connect(s: &SmtpSettings) -> Result<AsyncSmtpConnection, SmtpError> {
    let hello = ClientId::default();
    let mut conn = AsyncSmtpConnection::connect_tokio1(
        (s.host.as_str(), s.port),
        Some(s.timeout),
        &hello,
        None,
        None,
    )
    .await?;
    if s.starttls {
        let tls = TlsParameters::new(s.host.clone())?;
        conn.starttls(tls, &hello).await?;
    }
    if let Some((user, password)) = &s.credentials {
        let credentials = Credentials::new(user.clone(), password.clone());
        conn.auth(DEFAULT_MECHANISMS, &credentials).await?;
    }
    Ok(conn)
}

/// MAIL FROM (with SMTPUTF8 / 8BITMIME as lettre's own `send` asks for them)
/// and one RCPT TO per recipient.
async fn send_envelope(
    conn: &mut AsyncSmtpConnection,
    envelope: &Envelope,
    wire: &[u8],
) -> Result<(), SmtpError> {
    let mut options = Vec::new();
    let non_ascii = |a: &Address| !AsRef::<str>::as_ref(a).is_ascii();
    if envelope.from().is_some_and(non_ascii) || envelope.to().iter().any(non_ascii) {
        options.push(MailParameter::SmtpUtfEight);
    }
    if !wire.is_ascii() && conn.server_info().supports_feature(Extension::EightBitMime) {
        options.push(MailParameter::Body(MailBodyParameter::EightBitMime));
    }
    conn.command(Mail::new(envelope.from().cloned(), options))
        .await?;
    for to in envelope.to() {
        conn.command(Rcpt::new(to.clone(), Vec::new())).await?;
    }
    Ok(())
}

/// DATA and the message. A refusal with a reply code is definite; any other
/// failure once the body is on its way leaves the outcome unknown.
async fn send_data(conn: &mut AsyncSmtpConnection, wire: &[u8]) -> Delivery {
    if let Err(e) = conn.command(Data).await {
        return refused(&e);
    }
    match conn.message(wire).await {
        Ok(_) => Delivery::Sent,
        Err(e) if e.status().is_some() => refused(&e),
        Err(e) => Delivery::Uncertain(format!("no reply to the message's end: {}", error_text(&e))),
    }
}

/// A failure at which the relay cannot have accepted the message.
fn refused(e: &SmtpError) -> Delivery {
    if e.is_permanent() {
        Delivery::Permanent(error_text(e))
    } else {
        Delivery::Transient(error_text(e))
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
