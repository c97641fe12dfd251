//! A rendered report as an RFC 5322 message, and messages as an mbox file.
//!
//! The message is built once, when the report is queued, and stored; the sender
//! delivers those exact bytes and the mbox download serves them, so what was
//! sent, what is shown and what is downloaded never differ.

use email_encoding::headers::rfc2047;
use email_encoding::headers::writer::EmailWriter;

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

    /// The header form: the name made header-safe (`header_text`), quoted
    /// when it holds RFC 5322 specials, encoded when it is not ASCII.
    pub fn header_form(&self) -> String {
        let name = self
            .name
            .as_deref()
            .map(|n| header_text(n, MAX_NAME_BYTES))
            .filter(|n| !n.trim().is_empty());
        match name {
            None => self.address.clone(),
            Some(name) if !name.is_ascii() => {
                format!("{} <{}>", encode_words(&name, 0), self.address)
            }
            Some(name) if name.contains(SPECIALS) => {
                let escaped = name.replace('\\', "\\\\").replace('"', "\\\"");
                format!("\"{escaped}\" <{}>", self.address)
            }
            Some(name) => format!("{name} <{}>", self.address),
        }
    }

    /// An address SMTP can carry and a header cannot be smuggled through;
    /// the name needs no check: [`Mailbox::header_form`] makes it safe.
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

const SPECIALS: [char; 13] = [
    '(', ')', '<', '>', '[', ']', ':', ';', '@', '\\', ',', '.', '"',
];

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
    addressing.from.check()?;
    if addressing.to.is_empty() && addressing.cc.is_empty() {
        return Err(invalid("a report needs at least one recipient".into()));
    }
    for m in addressing.to.iter().chain(&addressing.cc) {
        m.check()?;
    }
    let date = timestamp(addressing.date_ms)?.to_rfc2822();
    let mut out = format!("From: {}\n", addressing.from.header_form());
    push_list(&mut out, "To", &addressing.to);
    push_list(&mut out, "Cc", &addressing.cc);
    push_thread(&mut out, addressing)?;
    let subject = if report.subject.is_ascii() {
        header_text(&report.subject, MAX_SUBJECT_BYTES)
    } else {
        encode_words(
            &header_text(&report.subject, MAX_SUBJECT_BYTES * 4),
            "Subject: ".len(),
        )
    };
    out.push_str(&format!(
        "Subject: {subject}\nDate: {date}\nMessage-ID: {}\nMIME-Version: 1.0\n\
         Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n",
        report.message_id.bracketed()
    ));
    push_body(&mut out, &report.body);
    Ok(out)
}

/// The body with `\n` line ends: a bare CR ends a line too (left alone it
/// could smuggle an end of DATA past a lenient relay), and a line longer
/// than SMTP allows is broken, not refused, so a long commit subject cannot
/// stop a report.
fn push_body(out: &mut String, body: &str) {
    for line in body.replace("\r\n", "\n").replace('\r', "\n").lines() {
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
}

/// `In-Reply-To:` and `References:`; an id that could break a header is
/// refused, not sent.
fn push_thread(out: &mut String, addressing: &Addressing) -> Result<()> {
    let ok = |id: &str| {
        !id.is_empty()
            && id.len() <= 998
            && id.contains('@')
            && !id.contains(|c: char| c.is_whitespace() || c.is_control() || c == '<' || c == '>')
    };
    if let Some(parent) = &addressing.in_reply_to {
        if !ok(parent) {
            return Err(invalid(format!("bad In-Reply-To id {parent:?}")));
        }
        out.push_str(&format!("In-Reply-To: <{parent}>\n"));
    }
    let refs: Vec<String> = addressing
        .references
        .iter()
        .filter(|id| ok(id))
        .map(|id| format!("<{id}>"))
        .collect();
    if !refs.is_empty() {
        out.push_str(&format!("References: {}\n", refs.join("\n\t")));
    }
    Ok(())
}

fn push_list(out: &mut String, header: &str, boxes: &[Mailbox]) {
    if boxes.is_empty() {
        return;
    }
    let list: Vec<String> = boxes.iter().map(Mailbox::header_form).collect();
    out.push_str(&format!("{header}: {}\n", list.join(",\n\t")));
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

/// RFC 2047 `=?utf-8?b?...?=` words for a non-ASCII header value, by
/// `email-encoding` (lettre's encoder): each word within the 75 characters
/// RFC 2047 allows, lines folded at 76 columns, `column` of the first line
/// taken already (by `Subject: `, say).
fn encode_words(text: &str, column: usize) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = rfc2047::encode(text, &mut EmailWriter::new(&mut out, column, 0, false));
    out.replace("\r\n", "\n")
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
        assert!(msg.starts_with("From: kernel test robot <kbot@example.org>\n"));
        assert!(msg.contains("To: \"Leitao, Breno\" <leitao@debian.org>\n"));
        assert!(msg.contains("Cc: oe-lkp@lists.example.org,\n\tB <LEITAO@debian.org>\n"));
        assert!(msg.contains("Date: Wed, 4 Nov 2026 14:04:30 +0000\n"));
        assert!(msg.contains("Message-ID: <202611041404.befe64cd-kbot@example.org>\n"));
        assert!(msg.ends_with("\n\nHello,\n\nFrom the start\n>From quoted\n"));
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
        assert!(msg.contains("regression  Bcc: evil@z\n"), "{msg}");
        assert!(msg.contains("To: \"Evil  Bcc: evil@z\" <"), "{msg}");
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
        let m = Mailbox::new("Jörg", "j@x");
        assert_eq!(m.header_form(), "=?utf-8?b?SsO2cmc=?= <j@x>");
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
        assert_eq!(parsed.subject(), Some(r.subject.as_str()));
    }
}
