//! The recipient columns, typed. `report_outbox.recipients` holds the
//! addresses a report went to, To first ([`Recipients`]);
//! `list_messages.recipients` and `posted_patches.recipients` hold a posted
//! mail's To and Cc with their names ([`Mailboxes`]). Both are one entry a
//! line; each type is the only reader and writer of its column, so no other
//! code splits or joins those lines.

use kbot_core::report::mbox::Mailbox;

/// Addresses, To first (`report_outbox.recipients`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recipients(pub Vec<String>);

impl Recipients {
    /// The column's text.
    pub fn stored(&self) -> String {
        self.0
            .iter()
            .map(|a| one_line(a))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The first address: a report's To.
    pub fn first(&self) -> Option<&str> {
        self.0.first().map(String::as_str)
    }

    /// Whether `address` is among them (case-insensitive, as mail compares).
    pub fn contains(&self, address: &str) -> bool {
        self.0
            .iter()
            .any(|a| a.eq_ignore_ascii_case(address.trim()))
    }

    /// Each address as a mailbox without a name.
    pub fn mailboxes(&self) -> impl Iterator<Item = Mailbox> + '_ {
        self.0.iter().map(|a| Mailbox::new("", a.as_str()))
    }
}

impl From<Vec<String>> for Recipients {
    fn from(addresses: Vec<String>) -> Recipients {
        Recipients(addresses)
    }
}

impl From<String> for Recipients {
    fn from(stored: String) -> Recipients {
        Recipients(
            stored
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    }
}

/// Names and addresses, in header order (`list_messages.recipients`,
/// `posted_patches.recipients`): `Name <address>` or a bare address a line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mailboxes(pub Vec<Mailbox>);

impl Mailboxes {
    /// The column's text. A control character in a name or address (a line
    /// break would start another recipient) is stored as a space.
    pub fn stored(&self) -> String {
        self.0
            .iter()
            .map(|m| match m.name.as_deref() {
                Some(name) => format!("{} <{}>", one_line(name), one_line(&m.address)),
                None => one_line(&m.address),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl From<Vec<Mailbox>> for Mailboxes {
    fn from(mailboxes: Vec<Mailbox>) -> Mailboxes {
        Mailboxes(mailboxes)
    }
}

impl From<String> for Mailboxes {
    fn from(stored: String) -> Mailboxes {
        Mailboxes(stored.lines().filter_map(stored_mailbox).collect())
    }
}

/// One stored line; the address is what follows the last `<`, so a name
/// may hold one.
fn stored_mailbox(line: &str) -> Option<Mailbox> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    Some(match line.rsplit_once('<') {
        Some((name, rest)) => {
            let address = rest.trim_end_matches('>').trim();
            Mailbox::new(name.trim().trim_matches('"'), address)
        }
        None => Mailbox::new("", line),
    })
}

fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailboxes_come_back_as_stored() {
        let people = Mailboxes(vec![
            Mailbox::new("Pat Pipe", "pat@example.org"),
            Mailbox::new("", "list@example.org"),
            Mailbox::new("Leitao, Breno", "leitao@example.org"),
            Mailbox::new("a <b", "c@example.org"),
        ]);
        assert_eq!(Mailboxes::from(people.stored()), people);
    }

    #[test]
    fn a_line_break_in_a_name_adds_no_recipient() {
        let people = Mailboxes(vec![Mailbox::new(
            "Eve\nevil@example.net",
            "eve@example.org",
        )]);
        let back = Mailboxes::from(people.stored());
        assert_eq!(back.0.len(), 1, "{back:?}");
        assert_eq!(back.0[0].address, "eve@example.org");
        assert_eq!(back.0[0].name.as_deref(), Some("Eve evil@example.net"));
    }

    #[test]
    fn lines_written_before_read_the_same() {
        let stored = "\"Pat Pipe\" <pat@example.org>\n\n  list@example.org \n".to_owned();
        let m = Mailboxes::from(stored).0;
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].name.as_deref(), m[0].address.as_str()),
            (Some("Pat Pipe"), "pat@example.org")
        );
        assert_eq!(
            (m[1].name.as_deref(), m[1].address.as_str()),
            (None, "list@example.org")
        );
    }

    #[test]
    fn recipients_keep_their_order() {
        let r = Recipients::from("dev@example.org\n\nList@Example.org\n".to_owned());
        assert_eq!(r.first(), Some("dev@example.org"));
        assert!(r.contains(" list@example.org"));
        assert_eq!(Recipients::from(r.stored()), r);
    }
}
