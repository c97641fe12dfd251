//! A rendered report as an RFC 5322 message, and messages as an mbox file.
//!
//! The message is written by lettre's message builder (the crate the server
//! sends with): it quotes and encodes names and subjects (RFC 2047) and folds
//! long header lines. kbot adds what a report from text it does not control
//! needs: control characters out of header text, lengths bounded, addresses
//! and thread ids checked, body lines within SMTP's limit, sent as 8bit.
//!
//! The message is built once, when the report is queued, and stored; the sender
//! delivers those exact bytes and the mbox download serves them, so what was
//! sent, what is shown and what is downloaded never differ.

use std::time::{Duration, SystemTime};

use lettre::message::header::{ContentTransferEncoding, ContentType, MIME_VERSION_1_0};
use lettre::message::{Body, Message};

use super::message_id::timestamp;
use super::RenderedReport;
use crate::{Error, Result};

/// A name and an address, e.g. `kernel test robot <kbot@example.org>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mailbox {
    pub name: Option<String>,
    pub address: String,
}

impl Mailbox {
    pub fn new(name: impl Into<String>, address: impl Into<String>) -> Mailbox {
        let name = name.into();
        Mailbox {
            name: (!name.trim().is_empty()).then_some(name),
            address: address.into(),
        }
    }

    /// lettre's mailbox: the name made header-safe (`header_text`; lettre
    /// quotes and encodes it), the address checked.
    fn to_lettre(&self) -> Result<lettre::message::Mailbox> {
        self.check()?;
        let address = self
            .address
            .parse::<lettre::Address>()
            .map_err(|e| invalid(format!("bad address <{}>: {e}", self.address)))?;
        let name = self
            .name
            .as_deref()
            .map(|n| header_text(n, MAX_NAME_BYTES))
            .filter(|n| !n.trim().is_empty());
        Ok(lettre::message::Mailbox::new(name, address))
    }

    /// An address SMTP can carry and a header cannot be smuggled through;
    /// the name needs no check: [`Mailbox::to_lettre`] makes it safe.
    fn check(&self) -> Result<()> {
        let addr_ok = self.address.contains('@')
            && self.address.len() <= MAX_ADDRESS_BYTES
            && !self
                .address
                .contains(|c: char| c.is_control() || "<> ,\"".contains(c));
        if addr_ok {
            Ok(())
        } else {
            Err(invalid(format!("bad address <{}>", self.address)))
        }
    }
}

/// RFC 5321's limit on a forward path.
const MAX_ADDRESS_BYTES: usize = 254;
/// Display names are cut here: a commit's author name can be anything.
const MAX_NAME_BYTES: usize = 200;
/// An ASCII subject is cut here, so `Subject: ...` stays within SMTP's 998.
const MAX_SUBJECT_BYTES: usize = 900;
/// SMTP's line limit (RFC 5321 4.5.3.1.6), without the CRLF.
const MAX_LINE_BYTES: usize = 998;

/// Text kbot does not control (commit subjects, author names) as a header
/// value: every control character (CR, LF, NUL, tab, ...) becomes a space,
/// so nothing can start a header line of its own, and the text is cut to
/// `max` bytes at a character boundary.
fn header_text(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
    }
    out
}

/// Who a report goes to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Addressing {
    pub from: Mailbox,
    pub to: Vec<Mailbox>,
    pub cc: Vec<Mailbox>,
    /// The `Date:` header (Unix ms): when the report was queued, fixed from then on.
    pub date_ms: i64,
    /// A reply's `In-Reply-To:` and `References:` (ids without `<>`,
    /// oldest first, the parent last).
    pub in_reply_to: Option<String>,
    pub references: Vec<String>,
}

impl Addressing {
    /// Every recipient address, To then Cc, each once.
    pub fn recipients(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for m in self.to.iter().chain(&self.cc) {
            if !out.iter().any(|a| a.eq_ignore_ascii_case(&m.address)) {
                out.push(m.address.clone());
            }
        }
        out
    }
}

/// The message with `\n` line ends (convert with [`to_wire`] for SMTP).
pub fn message(report: &RenderedReport, addressing: &Addressing) -> Result<String> {
    if addressing.to.is_empty() && addressing.cc.is_empty() {
        return Err(invalid("a report needs at least one recipient".into()));
    }
    let date_ms = u64::try_from(addressing.date_ms)
        .map_err(|_| invalid(format!("bad date {}", addressing.date_ms)))?;
    // The headers in 0-day's order: who, the thread, what, when.
    let mut builder = Message::builder().from(addressing.from.to_lettre()?);
    for m in &addressing.to {
        builder = builder.to(m.to_lettre()?);
    }
    for m in &addressing.cc {
        builder = builder.cc(m.to_lettre()?);
    }
    // As written, 8bit: lettre would re-encode any line of 76 characters or
    // more as quoted-printable, and a report's tables and links are longer
    // (0-day's are plain text too). `body_lines` gives what 8bit needs:
    // CRLF ends, no bare CR or NUL, no line over SMTP's 998 bytes.
    let crlf = body_lines(&report.body).replace('\n', "\r\n");
    let body = Body::dangerous_pre_encoded(crlf.into_bytes(), ContentTransferEncoding::EightBit);
    let (in_reply_to, references) = thread_ids(addressing)?;
    if let Some(parent) = in_reply_to {
        builder = builder.in_reply_to(parent);
    }
    if let Some(references) = references {
        builder = builder.references(references);
    }
    let message = builder
        .subject(header_text(&report.subject, MAX_SUBJECT_BYTES))
        .date(SystemTime::UNIX_EPOCH + Duration::from_millis(date_ms))
        .message_id(Some(report.message_id.bracketed()))
        .header(MIME_VERSION_1_0)
        .header(ContentType::TEXT_PLAIN)
        .body(body)
        .map_err(|e| invalid(format!("the message does not build: {e}")))?;
    let text = String::from_utf8(message.formatted())
        .map_err(|e| invalid(format!("the message is not UTF-8: {e}")))?;
    Ok(text.replace("\r\n", "\n"))
}

/// The body with `\n` line ends: a bare CR ends a line too (left alone it
/// could smuggle an end of DATA past a lenient relay), and a line longer
/// than SMTP allows is broken, not refused, so a long commit subject cannot
/// stop a report.
fn body_lines(body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 1);
    let body = body
        .replace("\r\n", "\n")
        .replace('\r', "\n")
        .replace('\0', " ");
    for line in body.lines() {
        let mut rest = line;
        while rest.len() > MAX_LINE_BYTES {
            let mut cut = MAX_LINE_BYTES;
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push_str(&rest[..cut]);
            out.push('\n');
            rest = &rest[cut..];
        }
        out.push_str(rest);
        out.push('\n');
    }
    out
}

/// `In-Reply-To:` and `References:` (ids in `<>`, space-separated); an
/// In-Reply-To id that could break a header is refused, not sent, and such
/// a References id dropped.
fn thread_ids(addressing: &Addressing) -> Result<(Option<String>, Option<String>)> {
    let ok = |id: &str| {
        !id.is_empty()
            && id.len() <= 998
            && id.contains('@')
            && !id.contains(|c: char| c.is_whitespace() || c.is_control() || c == '<' || c == '>')
    };
    let parent = match &addressing.in_reply_to {
        Some(parent) if !ok(parent) => {
            return Err(invalid(format!("bad In-Reply-To id {parent:?}")));
        }
        Some(parent) => Some(format!("<{parent}>")),
        None => None,
    };
    let refs: Vec<String> = addressing
        .references
        .iter()
        .filter(|id| ok(id))
        .map(|id| format!("<{id}>"))
        .collect();
    Ok((parent, (!refs.is_empty()).then(|| refs.join(" "))))
}

/// `\n` to `\r\n`, as SMTP's DATA wants; a bare CR ends a line too, so
/// the wire form has no bare CR or LF.
pub fn to_wire(message: &str) -> Vec<u8> {
    message
        .replace("\r\n", "\n")
        .replace('\r', "\n")
        .replace('\n', "\r\n")
        .into_bytes()
}

/// One mbox (mboxrd) entry: the `From ` separator line, the message with body
/// lines matching `>*From ` quoted by one more `>`, and a blank line.
pub fn mbox_entry(message: &str, envelope_from: &str, date_ms: i64) -> Result<String> {
    let date = timestamp(date_ms)?.format("%a %b %e %H:%M:%S %Y");
    let mut out = format!("From {envelope_from} {date}\n");
    for line in message.replace("\r\n", "\n").lines() {
        if line.trim_start_matches('>').starts_with("From ") {
            out.push('>');
        }
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Ok(out)
}

fn invalid(reason: String) -> Error {
    Error::InvalidReport { reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::MessageId;

    fn report() -> RenderedReport {
        RenderedReport {
            subject: "[t:b] [x] 0123456789: m 1.0% regression".into(),
            body: "Hello,\n\nFrom the start\n>From quoted\n".into(),
            message_id: MessageId::from_stored("202611041404.befe64cd-kbot@example.org"),
        }
    }

    fn addressing() -> Addressing {
        Addressing {
            from: Mailbox::new("kernel test robot", "kbot@example.org"),
            to: vec![Mailbox::new("Leitao, Breno", "leitao@debian.org")],
            cc: vec![
                Mailbox::new("", "oe-lkp@lists.example.org"),
                Mailbox::new("B", "LEITAO@debian.org"),
            ],
            date_ms: 1_793_801_070_000,
            in_reply_to: None,
            references: Vec::new(),
        }
    }

    #[test]
    fn headers_and_body() {
        let msg = message(&report(), &addressing()).expect("valid test input");
        let head = msg.split("\n\n").next().expect("headers");
        let names: Vec<&str> = head
            .lines()
            .filter_map(|l| l.split_once(": ").map(|(name, _)| name))
            .collect();
        assert_eq!(
            names,
            [
                "From",
                "To",
                "Cc",
                "Subject",
                "Date",
                "Message-ID",
                "MIME-Version",
                "Content-Type",
                "Content-Transfer-Encoding"
            ],
            "{msg}"
        );
        assert!(
            msg.starts_with("From: \"kernel test robot\" <kbot@example.org>\n"),
            "{msg}"
        );
        // lettre quotes a name of words; one with other punctuation it
        // encodes (RFC 2047), which every mail reader shows as written.
        let parsed = mail_parser::MessageParser::default()
            .parse(msg.as_bytes())
            .expect("parses");
        let to = parsed.to().and_then(|to| to.first()).expect("a To");
        assert_eq!(to.name(), Some("Leitao, Breno"), "{msg}");
        assert_eq!(to.address(), Some("leitao@debian.org"), "{msg}");
        let mut a = addressing();
        a.to = vec![Mailbox::new("Paul E. McKenney", "paulmck@kernel.org")];
        let plain = message(&report(), &a).expect("a report");
        assert!(
            plain.contains("To: \"Paul E. McKenney\" <paulmck@kernel.org>\n"),
            "{plain}"
        );
        assert!(
            msg.contains("Cc: oe-lkp@lists.example.org, B <LEITAO@debian.org>\n"),
            "{msg}"
        );
        assert!(
            msg.contains("Date: Wed, 04 Nov 2026 14:04:30 +0000\n"),
            "{msg}"
        );
        assert!(msg.contains("Message-ID: <202611041404.befe64cd-kbot@example.org>\n"));
        assert!(
            msg.contains("Content-Type: text/plain; charset=utf-8\n"),
            "{msg}"
        );
        assert!(msg.contains("Content-Transfer-Encoding: 8bit\n"), "{msg}");
        assert!(
            msg.ends_with("\n\nHello,\n\nFrom the start\n>From quoted\n"),
            "{msg}"
        );
        assert_eq!(
            addressing().recipients(),
            vec!["leitao@debian.org", "oe-lkp@lists.example.org"]
        );
    }

    #[test]
    fn header_injection_is_refused_or_made_harmless() {
        let mut a = addressing();
        a.to[0].address = "x@y\r\nBcc: evil@z".into();
        assert!(message(&report(), &a).is_err());
        // A hostile subject or author name is still reported, on one line.
        let mut r = report();
        r.subject.push_str("\r\nBcc: evil@z");
        let mut a = addressing();
        a.to[0].name = Some("Evil\r\nBcc: evil@z".into());
        let msg = message(&r, &a).expect("a report");
        assert!(!msg.contains("\nBcc:"), "{msg}");
        let parsed = mail_parser::MessageParser::default()
            .parse(msg.as_bytes())
            .expect("parses");
        assert!(
            parsed
                .subject()
                .is_some_and(|s| s.ends_with("regression  Bcc: evil@z")),
            "{msg}"
        );
        let to = parsed.to().and_then(|to| to.first()).expect("a To");
        assert_eq!(to.name(), Some("Evil  Bcc: evil@z"), "{msg}");
        assert!(parsed.bcc().is_none(), "{msg}");
        let mut a = addressing();
        a.to.clear();
        a.cc.clear();
        assert!(message(&report(), &a).is_err());
    }

    #[test]
    fn mbox_quotes_from_lines() {
        let msg = message(&report(), &addressing()).expect("valid test input");
        let entry =
            mbox_entry(&msg, "kbot@example.org", 1_793_801_070_000).expect("valid test input");
        assert!(entry.starts_with("From kbot@example.org Wed Nov  4 14:04:30 2026\nFrom: "));
        assert!(entry.contains("\n>From the start\n>>From quoted\n\n"));
    }

    #[test]
    fn wire_form_uses_crlf() {
        assert_eq!(to_wire("a\nb\r\nc\n"), b"a\r\nb\r\nc\r\n");
        assert_eq!(to_wire("a\r.\rb"), b"a\r\n.\r\nb");
    }

    #[test]
    fn non_ascii_headers_are_encoded() {
        let mut a = addressing();
        a.to = vec![Mailbox::new("Jörg", "j@x.example")];
        let msg = message(&report(), &a).expect("a report");
        assert!(
            msg.contains("To: =?utf-8?b?SsO2cmc=?= <j@x.example>\n"),
            "{msg}"
        );
        // A long subject: words of at most 75 characters on folded lines
        // within 76 columns, which decode back to the subject.
        let mut r = report();
        r.subject = "pipe: Schreibvorgänge über die Röhre ".repeat(6);
        let msg = message(&r, &addressing()).expect("a report");
        let header = msg
            .split("\nDate:")
            .next()
            .and_then(|h| h.split("Subject: ").nth(1))
            .expect("a Subject");
        assert!(header.lines().count() > 2, "{header}");
        for (i, line) in header.lines().enumerate() {
            let column = if i == 0 { "Subject: ".len() } else { 0 };
            assert!(column + line.len() <= 76, "{line}");
            assert!(i == 0 || line.starts_with(' '), "a folded line: {line:?}");
        }
        let parsed = mail_parser::MessageParser::default()
            .parse(msg.as_bytes())
            .expect("parses");
        assert_eq!(parsed.subject(), Some(r.subject.trim_end()));
    }
}
