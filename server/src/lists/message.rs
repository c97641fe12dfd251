//! One raw list message (RFC 5322, MIME) read into what the robot needs:
//! its thread links, its people, its text, the diff it carries, and the
//! commands a maintainer wrote to the robot in it.
//!
//! Parsing is mail-parser's (RFC 2047 words, charsets, transfer encodings,
//! multipart); this module picks the fields and finds the patch the way
//! `git mailinfo` would: inline after the commit message, or in the first
//! attachment that is a patch.

use std::collections::HashSet;

pub use kbot_core::report::mbox::Mailbox;

use mail_parser::{
    Address, HeaderName, HeaderValue, Message, MessageParser, MimeHeaders, PartType,
};

/// Why an archived mail is not read: the archive's content, not anyone's
/// request (the reader records it as a `bad_message` event and goes on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unparsable(pub String);

/// The largest message read: the kernel lists refuse far smaller ones, so a
/// larger one is not a list message and is not worth the memory.
pub const MAX_MESSAGE_BYTES: usize = 8 << 20;

/// A message id longer than this is not one (a header line is at most 998).
const MAX_ID_LEN: usize = 998;

/// Most thread ids kept of a message's `References` (the first and the last
/// 63): real threads are far shallower, and each id costs every pass that
/// assembles series.
pub const MAX_REFERENCES: usize = 64;

/// What the robot reads of one list message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListMessage {
    /// Without angle brackets.
    pub message_id: String,
    pub in_reply_to: Option<String>,
    /// The thread's ids, oldest first, without angle brackets, without
    /// duplicates and without the message's own id; ends with
    /// `in_reply_to` when `References` lacked it.
    pub references: Vec<String>,
    /// Decoded and unfolded.
    pub subject: String,
    pub from: Mailbox,
    pub to: Vec<Mailbox>,
    pub cc: Vec<Mailbox>,
    /// The `Date` header in Unix milliseconds, when it is a valid date.
    pub date_ms: Option<i64>,
    /// The first text part, decoded.
    pub body: String,
    /// The unified diff the message carries, inline or attached.
    pub patch: Option<String>,
    /// The `base-commit:` line `git format-patch --base` writes.
    pub base_commit: Option<String>,
    /// The `prerequisite-patch-id:` lines, in order.
    pub prerequisite_patch_ids: Vec<String>,
    /// b4's `change-id:` line: the same on every version of a series.
    pub change_id: Option<String>,
}

/// Parses one raw message; refuses one larger than [`MAX_MESSAGE_BYTES`],
/// one that is not a mail, and one without a usable Message-ID (the id is
/// what threads and stores it).
pub fn parse(raw: &[u8]) -> Result<ListMessage, Unparsable> {
    if raw.len() > MAX_MESSAGE_BYTES {
        return Err(bad(format!(
            "message of {} bytes is larger than {MAX_MESSAGE_BYTES}",
            raw.len()
        )));
    }
    let message = MessageParser::default()
        .parse(without_mbox_line(raw))
        .ok_or_else(|| bad("not a mail: no header found".into()))?;
    let message_id = message
        .header(HeaderName::MessageId)
        .map(ids_of)
        .unwrap_or_default()
        .into_iter()
        .next()
        .ok_or_else(|| bad("no usable Message-ID".into()))?;
    let in_reply_to = ids_of(message.in_reply_to()).into_iter().next();
    let references = references(&message, &message_id, in_reply_to.as_deref());
    let body = first_text(&message);
    let patch = diff_in(&body).or_else(|| attached_patch(&message));
    let base_commit = trailer_hashes(&body, "base-commit:").into_iter().next();
    let prerequisite_patch_ids = trailer_hashes(&body, "prerequisite-patch-id:");
    let change_id = change_id(&body);
    Ok(ListMessage {
        message_id,
        in_reply_to,
        references,
        subject: unfold(message.subject().unwrap_or_default()),
        from: message
            .from()
            .and_then(Address::first)
            .map(mailbox)
            .unwrap_or_default(),
        to: mailboxes(message.to()),
        cc: mailboxes(message.cc()),
        date_ms: message
            .date()
            .filter(|d| d.is_valid())
            .and_then(|d| d.to_timestamp().checked_mul(1000)),
        body,
        patch,
        base_commit,
        prerequisite_patch_ids,
        change_id,
    })
}

/// The message without the mbox `From <sha> <date>` line `git
/// format-patch` (and an mbox) puts before the headers.
fn without_mbox_line(raw: &[u8]) -> &[u8] {
    if !raw.starts_with(b"From ") {
        return raw;
    }
    raw.iter()
        .position(|&b| b == b'\n')
        .map_or(&[][..], |end| &raw[end + 1..])
}

fn bad(why: String) -> Unparsable {
    Unparsable(why)
}

/// The usable ids of an id header's value, in order.
fn ids_of(value: &HeaderValue<'_>) -> Vec<String> {
    let texts: Vec<&str> = match value {
        HeaderValue::Text(text) => vec![text.as_ref()],
        HeaderValue::TextList(list) => list.iter().map(AsRef::as_ref).collect(),
        _ => Vec::new(),
    };
    texts
        .into_iter()
        .flat_map(str::split_whitespace)
        .filter_map(clean_id)
        .collect()
}

/// An id without angle brackets and blanks, if it looks like
/// `something@something`.
pub fn clean_id(text: &str) -> Option<String> {
    let id = text.trim().trim_start_matches('<').trim_end_matches('>');
    let (local, domain) = id.split_once('@')?;
    let plausible = !local.is_empty()
        && !domain.is_empty()
        && id.len() <= MAX_ID_LEN
        && !id
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>'));
    plausible.then(|| id.to_owned())
}

/// `References` oldest first, then `In-Reply-To` if missing, deduplicated,
/// without the message itself. A header of thousands of ids is cut to
/// [`MAX_REFERENCES`] before deduplication: the thread's root and its
/// nearest ids are what threading uses.
fn references(message: &Message<'_>, own: &str, in_reply_to: Option<&str>) -> Vec<String> {
    let mut listed = ids_of(message.references());
    listed.extend(in_reply_to.map(str::to_owned));
    let mut seen = HashSet::new();
    capped(listed)
        .into_iter()
        .filter(|id| id != own && seen.insert(id.clone()))
        .collect()
}

/// The first and the last `MAX_REFERENCES - 1` of `ids`.
pub fn capped<T>(mut ids: Vec<T>) -> Vec<T> {
    if ids.len() > MAX_REFERENCES {
        ids.drain(1..ids.len() - (MAX_REFERENCES - 1));
    }
    ids
}

fn unfold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One name and address of a From, To or Cc header; a blank name is none.
fn mailbox(addr: &mail_parser::Addr<'_>) -> Mailbox {
    Mailbox::new(
        addr.name().map(unfold).unwrap_or_default(),
        addr.address().unwrap_or_default().trim(),
    )
}

fn mailboxes(address: Option<&Address<'_>>) -> Vec<Mailbox> {
    address
        .map(|a| a.iter().map(mailbox).collect())
        .unwrap_or_default()
}

/// The first text part (text/plain, or text made of the first HTML part).
fn first_text(message: &Message<'_>) -> String {
    message
        .body_text(0)
        .map(|text| text.into_owned())
        .unwrap_or_default()
}

/// The first attachment (or later inline part) that is a patch: type
/// text/x-patch or text/x-diff, or text/plain named `*.patch`/`*.diff`.
fn attached_patch(message: &Message<'_>) -> Option<String> {
    let first_text = message.text_body.first().copied();
    message
        .parts
        .iter()
        .enumerate()
        .filter(|(i, _)| u32::try_from(*i).ok() != first_text && *i != 0)
        .filter(|(_, part)| is_patch_part(part))
        .find_map(|(_, part)| match &part.body {
            PartType::Text(text) => diff_in(text),
            PartType::Binary(bytes) | PartType::InlineBinary(bytes) => {
                diff_in(&String::from_utf8_lossy(bytes))
            }
            _ => None,
        })
}

fn is_patch_part(part: &mail_parser::MessagePart<'_>) -> bool {
    if part.is_content_type("text", "x-patch") || part.is_content_type("text", "x-diff") {
        return true;
    }
    let named_patch = part.attachment_name().is_some_and(|name| {
        let name = name.to_ascii_lowercase();
        name.ends_with(".patch") || name.ends_with(".diff")
    });
    named_patch && (part.is_content_type("text", "plain") || part.content_type().is_none())
}

/// The unified diff in `text`: from the first `diff --git ` line, or the
/// first `--- a/` line followed by a `+++ b/` line, to the end of the text
/// or to the `-- ` signature line that `git format-patch` ends with (one
/// followed by a version line, or the last line).
pub fn diff_in(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let start = (0..lines.len()).find(|&i| starts_diff(&lines, i))?;
    let end = (start + 1..lines.len())
        .find(|&i| is_signature(&lines, i))
        .unwrap_or(lines.len());
    Some(lines[start..end].concat())
}

fn bare(line: &str) -> &str {
    line.trim_end_matches(['\n', '\r'])
}

fn starts_diff(lines: &[&str], i: usize) -> bool {
    let line = bare(lines[i]);
    line.starts_with("diff --git ")
        || (line.starts_with("--- a/") && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ b/")))
}

/// `-- ` followed by nothing or by a version line (`2.43.0`).
fn is_signature(lines: &[&str], i: usize) -> bool {
    if bare(lines[i]) != "-- " {
        return false;
    }
    match lines.get(i + 1) {
        None => true,
        Some(next) => bare(next).starts_with(|c: char| c.is_ascii_digit()),
    }
}

/// The 40-hex values of the unquoted lines `key <hex>` of a body.
/// b4 writes `change-id: 20240101-topic-0123456789ab`; anything of at most
/// 100 letters, digits, `.`, `_` and `-` is taken.
fn change_id(body: &str) -> Option<String> {
    body.lines()
        .filter_map(|line| line.trim().strip_prefix("change-id:"))
        .map(str::trim)
        .find(|v| {
            (1..=100).contains(&v.len())
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        })
        .map(str::to_owned)
}

fn trailer_hashes(body: &str, key: &str) -> Vec<String> {
    body.lines()
        .filter_map(|line| line.trim().strip_prefix(key))
        .map(str::trim)
        .filter(|v| v.len() == 40 && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_ascii_lowercase)
        .collect()
}

/// A command to the robot, written on a line of its own in a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `#kbot test [REPO [BRANCH|COMMIT]]`: test the series (again) on a
    /// base the writer names, or the one the robot chose.
    Test {
        repo: Option<String>,
        rev: Option<String>,
    },
    /// `#kbot retest`: run the series' tests again.
    Retest,
    /// `#kbot invalid`: the report this answers is wrong.
    Invalid,
    /// `#kbot dup: REGRESSION`: the report's regressions duplicate another
    /// (its number, or its report's Message-ID or archive link, as written).
    Dup(String),
    /// `#kbot fix: SUBJECT`: the commit that fixes the report.
    Fix(String),
    /// A `#kbot` line the robot does not understand: the text after
    /// `#kbot`, to answer with.
    Unknown(String),
}

/// The robot's commands in a body: unquoted lines (not starting with `>`)
/// that start with `#kbot` (any case, after blanks).
pub fn commands(body: &str) -> Vec<Command> {
    body.lines().filter_map(command).collect()
}

fn command(line: &str) -> Option<Command> {
    let line = line.trim();
    let head = line.get(..5)?;
    if !head.eq_ignore_ascii_case("#kbot") {
        return None;
    }
    let rest = &line[5..];
    if !(rest.is_empty() || rest.starts_with(char::is_whitespace)) {
        return None;
    }
    Some(command_words(rest.trim()))
}

fn command_words(text: &str) -> Command {
    let (verb, args) = text
        .split_once(|c: char| c.is_whitespace() || c == ':')
        .unwrap_or((text, ""));
    let args = args.trim_start_matches(':').trim();
    match verb.to_ascii_lowercase().as_str() {
        "test" => {
            let mut words = args.split_whitespace().map(str::to_owned);
            Command::Test {
                repo: words.next(),
                rev: words.next(),
            }
        }
        "retest" if args.is_empty() => Command::Retest,
        "invalid" if args.is_empty() => Command::Invalid,
        "dup" if !args.is_empty() => Command::Dup(args.to_owned()),
        "fix" if !args.is_empty() => Command::Fix(args.to_owned()),
        _ => Command::Unknown(text.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PATCH_MAIL: &str = "From: =?UTF-8?Q?J=C3=B6rg?= Dev <jorg@example.org>\r
To: linux-kernel@vger.kernel.org, \"Maint, Ainer\" <m@example.org>\r
Cc: netdev@vger.kernel.org\r
Subject: [PATCH v2 2/3] net: fix\r
 the thing\r
Date: Tue, 2 Jan 2024 10:00:00 +0100\r
Message-ID: <20240102.2-jorg@example.org>\r
In-Reply-To: <20240102.0-jorg@example.org>\r
References: <20240101.0-jorg@example.org>\r
\t<20240102.0-jorg@example.org> <20240102.2-jorg@example.org>\r
\r
The thing was broken.\r
\r
Signed-off-by: Jörg Dev <jorg@example.org>\r
---\r
 net/a.c | 2 +-\r
 1 file changed, 1 insertion(+), 1 deletion(-)\r
\r
diff --git a/net/a.c b/net/a.c\r
index 1111111..2222222 100644\r
--- a/net/a.c\r
+++ b/net/a.c\r
@@ -1 +1 @@\r
-old\r
+new\r
\r
base-commit: 0123456789abcdef0123456789abcdef01234567\r
prerequisite-patch-id: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r
prerequisite-patch-id: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\r
change-id: 20240101-thing-fix-0123456789ab\r
-- \r
2.43.0\r
\r
";

    #[test]
    fn a_send_email_patch() {
        let m = parse(PATCH_MAIL.as_bytes()).expect("parses");
        assert_eq!(m.message_id, "20240102.2-jorg@example.org");
        assert_eq!(
            m.in_reply_to.as_deref(),
            Some("20240102.0-jorg@example.org")
        );
        assert_eq!(
            m.references,
            ["20240101.0-jorg@example.org", "20240102.0-jorg@example.org"]
        );
        assert_eq!(m.subject, "[PATCH v2 2/3] net: fix the thing");
        assert_eq!(m.from.name.as_deref(), Some("Jörg Dev"));
        assert_eq!(m.from.address, "jorg@example.org");
        assert_eq!(m.to.len(), 2);
        assert_eq!(m.to[1].name.as_deref(), Some("Maint, Ainer"));
        assert_eq!(m.cc[0].address, "netdev@vger.kernel.org");
        assert_eq!(m.date_ms, Some(1_704_186_000_000));
        assert!(m.body.contains("Signed-off-by: Jörg"));
        let patch = m.patch.expect("a patch");
        assert!(patch.starts_with("diff --git a/net/a.c b/net/a.c"));
        assert!(patch.contains("+new"));
        assert!(!patch.contains("2.43.0"));
        assert!(!patch.contains("-- \r\n"));
        assert_eq!(
            m.base_commit.as_deref(),
            Some("0123456789abcdef0123456789abcdef01234567")
        );
        assert_eq!(m.prerequisite_patch_ids.len(), 2);
        assert_eq!(
            m.change_id.as_deref(),
            Some("20240101-thing-fix-0123456789ab")
        );
    }

    #[test]
    fn change_ids_are_tokens() {
        assert_eq!(
            change_id("change-id: a b\nchange-id: v1.x_y-z\n").as_deref(),
            Some("v1.x_y-z")
        );
        assert_eq!(
            change_id(&format!("change-id: {}\n", "x".repeat(101))),
            None
        );
        assert_eq!(change_id("change-id: <script>\n"), None);
    }

    #[test]
    fn refused_messages() {
        let no_id = "From: a@b\r\nSubject: x\r\n\r\nbody\r\n";
        assert_eq!(
            parse(no_id.as_bytes()),
            Err(Unparsable("no usable Message-ID".into()))
        );
        let bad_id = "Message-ID: <no-at-sign>\r\nSubject: x\r\n\r\nbody\r\n";
        assert!(parse(bad_id.as_bytes()).is_err());
        assert!(parse(b"").is_err());
        let mut huge = b"Message-ID: <a@b>\r\n\r\n".to_vec();
        huge.resize(MAX_MESSAGE_BYTES + 1, b'x');
        assert!(parse(&huge).is_err());
    }

    #[test]
    fn a_bare_id_and_a_missing_from() {
        let m = parse(b"Message-Id: a@b\nSubject: =?utf-8?b?w6k=?=\n\nhi\n").expect("parses");
        assert_eq!(m.message_id, "a@b");
        assert_eq!(m.subject, "é");
        assert_eq!(m.from, Mailbox::default());
        assert_eq!(m.body, "hi\n");
        assert_eq!((m.patch, m.date_ms), (None, None));
    }

    #[test]
    fn in_reply_to_joins_the_references_once() {
        let raw = "Message-ID: <c@x>\nIn-Reply-To: <b@x>\nReferences: <a@x> <c@x> <a@x>\n\n.\n";
        let m = parse(raw.as_bytes()).expect("parses");
        assert_eq!(m.references, ["a@x", "b@x"]);
    }

    /// A References header of 2 MiB (about 150,000 ids) parses in bounded
    /// time and keeps the thread's root and its 63 nearest ids.
    #[test]
    fn a_huge_references_header_is_capped() {
        let mut raw = String::from("Message-ID: <own@x>\nIn-Reply-To: <parent@x>\nReferences:");
        let mut n = 0;
        while raw.len() < 2 << 20 {
            raw.push_str(&format!(" <r{n}@x>\n"));
            n += 1;
        }
        raw.push_str("\nbody\n");
        let started = std::time::Instant::now();
        let m = parse(raw.as_bytes()).expect("parses");
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(2), "{took:?}");
        assert!(
            m.references.len() <= MAX_REFERENCES,
            "{}",
            m.references.len()
        );
        assert_eq!(m.references[0], "r0@x");
        let nearest = format!("r{}@x", n - 1);
        assert_eq!(m.references[MAX_REFERENCES - 2], nearest);
        assert_eq!(m.references.last().map(String::as_str), Some("parent@x"));
    }

    #[test]
    fn an_attached_patch() {
        let raw = "Message-ID: <att@x>\r
Subject: [PATCH] attached\r
MIME-Version: 1.0\r
Content-Type: multipart/mixed; boundary=\"XX\"\r
\r
--XX\r
Content-Type: text/plain; charset=utf-8\r
\r
Please apply.\r
--XX\r
Content-Type: text/plain; name=\"fix.patch\"\r
Content-Disposition: attachment; filename=\"fix.patch\"\r
Content-Transfer-Encoding: base64\r
\r
LS0tIGEvZgorKysgYi9mCkBAIC0xICsxIEBACi1hCitiCg==\r
--XX--\r
";
        let m = parse(raw.as_bytes()).expect("parses");
        assert_eq!(m.body.trim(), "Please apply.");
        assert_eq!(
            m.patch.as_deref(),
            Some("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n")
        );
    }

    #[test]
    fn an_x_patch_part() {
        let raw = "Message-ID: <xp@x>\n\
Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nSee attached.\n\
--b\nContent-Type: text/x-patch\n\ndiff --git a/f b/f\n--- a/f\n+++ b/f\n--b--\n";
        let m = parse(raw.as_bytes()).expect("parses");
        assert!(m.patch.expect("patch").starts_with("diff --git a/f b/f"));
    }

    #[test]
    fn a_reply_quoting_a_patch_quotes_no_diff() {
        let raw = "Message-ID: <r@x>\n\n> diff --git a/f b/f\n> --- a/f\n> +++ b/f\nLooks good.\n\
> base-commit: 0123456789abcdef0123456789abcdef01234567\n";
        let m = parse(raw.as_bytes()).expect("parses");
        assert_eq!((m.patch, m.base_commit), (None, None));
    }

    #[test]
    fn diff_ends_at_signature_only_before_a_version() {
        let text = "x\n--- a/f\n+++ b/f\n@@ -1,2 +1 @@\n-- \n-b\n+c\n-- \n2.1.0\n";
        assert_eq!(
            diff_in(text).as_deref(),
            Some("--- a/f\n+++ b/f\n@@ -1,2 +1 @@\n-- \n-b\n+c\n")
        );
        assert_eq!(diff_in("no diff here\n--- a/x\nnot plus\n"), None);
    }

    #[test]
    fn command_lines() {
        let body = "Thanks!\n\
#kbot test\n\
  #KBOT test linux-next next-20240102\n\
> #kbot retest\n\
#kbot retest\n\
#kbot invalid\n\
#kbot dup: https://lore.kernel.org/r/abc@x\n\
#kbot dup <abc@x>\n\
#kbot fix: mm: fix the leak\n\
#kbot frobnicate now\n\
#kbotx test\n\
#kbot\n\
see #kbot test\n";
        assert_eq!(
            commands(body),
            vec![
                Command::Test {
                    repo: None,
                    rev: None
                },
                Command::Test {
                    repo: Some("linux-next".into()),
                    rev: Some("next-20240102".into())
                },
                Command::Retest,
                Command::Invalid,
                Command::Dup("https://lore.kernel.org/r/abc@x".into()),
                Command::Dup("<abc@x>".into()),
                Command::Fix("mm: fix the leak".into()),
                Command::Unknown("frobnicate now".into()),
                Command::Unknown(String::new()),
            ]
        );
    }

    fn mime_soup() -> impl Strategy<Value = Vec<u8>> {
        let pieces = prop_oneof![
            Just(b"Message-ID: <a@b>\r\n".to_vec()),
            Just(b"Content-Type: multipart/mixed; boundary=\"q\"\r\n".to_vec()),
            Just(b"Content-Type: text/x-patch; name=a.patch\r\n".to_vec()),
            Just(b"Content-Transfer-Encoding: base64\r\n".to_vec()),
            Just(b"Content-Transfer-Encoding: quoted-printable\r\n".to_vec()),
            Just(b"Subject: =?utf-8?q?=C3=A9?= =?bogus?x?==?=\r\n".to_vec()),
            Just(b"References: <x@y> <\r\n".to_vec()),
            Just(b"Date: Mon, 99 Foo 99999 99:99:99 +9999\r\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"--q\r\n".to_vec()),
            Just(b"--q--\r\n".to_vec()),
            Just(b"diff --git a/f b/f\r\n--- a/f\r\n+++ b/f\r\n".to_vec()),
            Just(b"-- \r\n".to_vec()),
            Just(b"=C3=\r\nQUJD\r\n".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..20),
        ];
        proptest::collection::vec(pieces, 0..30).prop_map(|p| p.concat())
    }

    proptest! {
        #[test]
        fn never_panics_on_bytes(raw in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse(&raw);
        }

        #[test]
        fn never_panics_on_malformed_mime(raw in mime_soup()) {
            if let Ok(m) = parse(&raw) {
                prop_assert!(!m.references.contains(&m.message_id));
                prop_assert!(!m.message_id.contains('<'));
            }
        }

        #[test]
        fn commands_never_panic(body in "(\\PC{0,20}\n){0,5}#[kK][bB][oO][tT]\\PC{0,30}") {
            let _ = commands(&body);
        }
    }
}
