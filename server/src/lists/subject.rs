//! The subject line of a list message, as the kernel lists write it:
//! `Re: [RFC PATCH net-next v3 02/12] net: do a thing`.
//!
//! The bracket groups say whether a mail is a patch, of which version, and
//! which part of a series; the series assembly ([`super::assemble`]) groups
//! parts by them. The grammar is the one `git format-patch` and
//! `git send-email` write, with the variations people type by hand
//! (`PATCHv2`, `1/3 v2`, groups split in two, list tags in front); anything
//! else is kept as a prefix or left in the title, never refused.

/// What a subject says about the mail.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PatchSubject {
    /// The subject starts with a reply prefix (`Re:`, `RE:`, `Aw:`, ...),
    /// possibly after list tags, before the PATCH group: an answer, not a
    /// posting. `Fwd:` is not a
    /// reply, but the bracket groups after it are not read either: a
    /// forwarded patch is not a new posting of it.
    pub reply: bool,
    /// Every word of the leading bracket groups except the version and the
    /// `m/n` part, in order, as written (`["RFC", "PATCH", "net-next"]`).
    pub prefixes: Vec<String>,
    /// A bracket group holds the word `PATCH` (any case).
    pub is_patch: bool,
    /// A bracket group holds the word `RFC` (any case).
    pub rfc: bool,
    /// `vN` or `VN`; 1 when no group says; the first one when several do.
    pub version: u32,
    /// `m` of `m/n`: 0 is the cover letter.
    pub index: Option<u32>,
    /// `n` of `m/n`.
    pub total: Option<u32>,
    /// The rest of the subject, trimmed, whitespace runs folded to a space.
    pub title: String,
}

/// Reply prefixes, lowercase, with their colon: English, German,
/// Scandinavian and Dutch mailers.
const REPLY_PREFIXES: [&str; 4] = ["re:", "aw:", "sv:", "antw:"];

/// Parses a subject; never fails: a subject with no bracket group is a
/// title with `is_patch` false.
pub fn parse(subject: &str) -> PatchSubject {
    let unfolded = unfold(subject);
    let mut out = PatchSubject::default();
    let mut version = None;
    let mut rest = unfolded.as_str();
    loop {
        rest = rest.trim_start();
        // After the PATCH group a `Re:` belongs to the title.
        let reply = (!out.is_patch).then(|| strip_reply(rest)).flatten();
        if let Some(after) = reply {
            out.reply = true;
            rest = after;
        } else if let Some((group, after)) = bracket_group(rest) {
            read_group(group, &mut out, &mut version);
            rest = after;
        } else {
            break;
        }
    }
    out.version = version.unwrap_or(1);
    out.title = rest.trim().to_owned();
    out
}

/// `Re: <original>`, without doubling a reply prefix the original has.
pub fn reply_subject(original: &str) -> String {
    let unfolded = unfold(original);
    let mut rest = unfolded.as_str();
    while let Some(after) = strip_reply(rest) {
        rest = after.trim_start();
    }
    format!("Re: {}", rest.trim())
}

/// A folded header (`\r\n\t` inside) as one line: every whitespace run is
/// one space.
fn unfold(subject: &str) -> String {
    subject.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text after a leading reply prefix, if `text` starts with one.
fn strip_reply(text: &str) -> Option<&str> {
    REPLY_PREFIXES.iter().find_map(|prefix| {
        let head = text.get(..prefix.len())?;
        head.eq_ignore_ascii_case(prefix)
            .then(|| &text[prefix.len()..])
    })
}

/// The inside of a leading `[...]` group and the text after it.
fn bracket_group(text: &str) -> Option<(&str, &str)> {
    let inner = text.strip_prefix('[')?;
    let end = inner.find(']')?;
    Some((&inner[..end], &inner[end + 1..]))
}

/// Reads the words of one bracket group into `out`; `version` keeps the
/// first version given (`[PATCH v2] [PATCH v3 1/2]` is v2).
fn read_group(group: &str, out: &mut PatchSubject, version: &mut Option<u32>) {
    for word in group
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
    {
        read_word(word, out, version);
    }
}

fn read_word(word: &str, out: &mut PatchSubject, version: &mut Option<u32>) {
    if let Some(v) = version_of(word) {
        version.get_or_insert(v);
    } else if let Some((m, n)) = part_of(word) {
        if out.index.is_none() {
            out.index = Some(m);
            out.total = Some(n);
        }
    } else if let Some((name, v)) = glued_version(word) {
        // `PATCHv2`, `RFCv3`: a keyword with its version glued on.
        read_word(name, out, version);
        version.get_or_insert(v);
    } else if let Some((a, b)) = slashed_keywords(word) {
        // `RFC/PATCH`, `PATCH/RFC`.
        read_word(a, out, version);
        read_word(b, out, version);
    } else {
        out.is_patch |= word.eq_ignore_ascii_case("PATCH");
        out.rfc |= word.eq_ignore_ascii_case("RFC");
        out.prefixes.push(word.to_owned());
    }
}

/// `v2`, `V10`: the number.
fn version_of(word: &str) -> Option<u32> {
    let digits = word.strip_prefix(['v', 'V'])?;
    number(digits)
}

/// `3/12`, `03/12`: index and total.
fn part_of(word: &str) -> Option<(u32, u32)> {
    let (m, n) = word.split_once('/')?;
    Some((number(m)?, number(n)?))
}

/// `PATCHv2` -> (`PATCH`, 2), for the keywords PATCH and RFC only.
fn glued_version(word: &str) -> Option<(&str, u32)> {
    ["PATCH", "RFC"].iter().find_map(|keyword| {
        let head = word.get(..keyword.len())?;
        if !head.eq_ignore_ascii_case(keyword) {
            return None;
        }
        Some((head, version_of(&word[keyword.len()..])?))
    })
}

/// `RFC/PATCH` -> (`RFC`, `PATCH`), when both sides are keywords.
fn slashed_keywords(word: &str) -> Option<(&str, &str)> {
    let (a, b) = word.split_once('/')?;
    let keyword = |w: &str| w.eq_ignore_ascii_case("PATCH") || w.eq_ignore_ascii_case("RFC");
    (keyword(a) && keyword(b)).then_some((a, b))
}

/// A decimal number of ASCII digits only (no sign, no blank).
fn number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn a_plain_patch_is_version_one_without_parts() {
        let s = parse("[PATCH] mm: fix a leak");
        assert!(s.is_patch && !s.reply && !s.rfc);
        assert_eq!((s.version, s.index, s.total), (1, None, None));
        assert_eq!(s.prefixes, words(&["PATCH"]));
        assert_eq!(s.title, "mm: fix a leak");
    }

    #[test]
    fn version_and_part() {
        let s = parse("[PATCH v2 3/5] sched: x");
        assert_eq!((s.version, s.index, s.total), (2, Some(3), Some(5)));
        assert_eq!(s.prefixes, words(&["PATCH"]));
        assert_eq!(s.title, "sched: x");
    }

    #[test]
    fn rfc_cover_letter() {
        let s = parse("[RFC PATCH v3 0/7] a series");
        assert!(s.rfc && s.is_patch);
        assert_eq!((s.version, s.index, s.total), (3, Some(0), Some(7)));
        assert_eq!(s.prefixes, words(&["RFC", "PATCH"]));
    }

    #[test]
    fn tree_name_is_a_prefix() {
        let s = parse("[PATCH net-next v2 1/3] net: y");
        assert_eq!(s.prefixes, words(&["PATCH", "net-next"]));
        assert_eq!((s.version, s.index, s.total), (2, Some(1), Some(3)));
    }

    #[test]
    fn part_before_version() {
        let s = parse("[PATCH 1/3 v2] z");
        assert_eq!((s.version, s.index, s.total), (2, Some(1), Some(3)));
    }

    #[test]
    fn several_groups() {
        let s = parse("[PATCH v2] [PATCH 1/2] two groups");
        assert_eq!((s.version, s.index, s.total), (2, Some(1), Some(2)));
        assert_eq!(s.prefixes, words(&["PATCH", "PATCH"]));
        assert_eq!(s.title, "two groups");
    }

    #[test]
    fn list_tag_before_the_patch_group() {
        let s = parse("[Intel-gfx] [PATCH 2/4] drm/i915: w");
        assert!(s.is_patch);
        assert_eq!(s.prefixes, words(&["Intel-gfx", "PATCH"]));
        assert_eq!(s.title, "drm/i915: w");
    }

    #[test]
    fn replies() {
        for subject in [
            "Re: [PATCH v2 1/2] a",
            "RE: [PATCH v2 1/2] a",
            "Re: Re: [PATCH v2 1/2] a",
            "re:[PATCH v2 1/2] a",
            "Aw: [PATCH v2 1/2] a",
            "[netdev] Re: [PATCH v2 1/2] a",
        ] {
            let s = parse(subject);
            assert!(s.reply && s.is_patch, "{subject}");
            assert_eq!(
                (s.version, s.index, s.total),
                (2, Some(1), Some(2)),
                "{subject}"
            );
            assert_eq!(s.title, "a", "{subject}");
        }
    }

    #[test]
    fn a_re_after_the_patch_group_is_title() {
        let s = parse("[PATCH] Re: the old bug");
        assert!(!s.reply && s.is_patch);
        assert_eq!(s.title, "Re: the old bug");
    }

    #[test]
    fn a_forward_is_neither_reply_nor_patch() {
        let s = parse("Fwd: [PATCH] a");
        assert!(!s.reply && !s.is_patch);
        assert_eq!(s.title, "Fwd: [PATCH] a");
    }

    #[test]
    fn resend() {
        let s = parse("[PATCH RESEND v2 2/2] b");
        assert_eq!(s.prefixes, words(&["PATCH", "RESEND"]));
        assert_eq!((s.version, s.index, s.total), (2, Some(2), Some(2)));
    }

    #[test]
    fn stable_tree_version_is_a_prefix() {
        let s = parse("[PATCH 6.1 12/40] c");
        assert_eq!(s.prefixes, words(&["PATCH", "6.1"]));
        assert_eq!((s.version, s.index, s.total), (1, Some(12), Some(40)));
        let s = parse("[PATCH 5.15 v2 001/200] c");
        assert_eq!(s.prefixes, words(&["PATCH", "5.15"]));
        assert_eq!((s.version, s.index, s.total), (2, Some(1), Some(200)));
    }

    #[test]
    fn glued_and_slashed_keywords() {
        let s = parse("[PATCHv4 2/3] d");
        assert_eq!((s.version, s.index), (4, Some(2)));
        assert_eq!(s.prefixes, words(&["PATCH"]));
        let s = parse("[RFC/PATCH] e");
        assert!(s.rfc && s.is_patch);
        assert_eq!(s.prefixes, words(&["RFC", "PATCH"]));
        let s = parse("[patch V3] f");
        assert!(s.is_patch);
        assert_eq!(s.version, 3);
    }

    #[test]
    fn whitespace_and_folding() {
        let s = parse("  \t[PATCH v2 01/12]\r\n\t  a folded\r\n subject  \n");
        assert_eq!((s.version, s.index, s.total), (2, Some(1), Some(12)));
        assert_eq!(s.title, "a folded subject");
    }

    #[test]
    fn not_a_patch() {
        let s = parse("Linux 6.9-rc1");
        assert!(!s.is_patch && !s.reply);
        assert_eq!(s.title, "Linux 6.9-rc1");
        let s = parse("[GIT PULL] net for 6.9");
        assert!(!s.is_patch);
        assert_eq!(s.prefixes, words(&["GIT", "PULL"]));
        let s = parse("[PATCH unterminated");
        assert!(!s.is_patch);
        assert_eq!(s.title, "[PATCH unterminated");
        assert_eq!(parse("").title, "");
    }

    #[test]
    fn reply_subjects_are_not_doubled() {
        assert_eq!(reply_subject("[PATCH] a"), "Re: [PATCH] a");
        assert_eq!(reply_subject("Re: [PATCH] a"), "Re: [PATCH] a");
        assert_eq!(reply_subject("RE: re: [PATCH]\n\ta"), "Re: [PATCH] a");
    }

    fn prefix_word() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("RFC".to_owned()),
            Just("RESEND".to_owned()),
            Just("net-next".to_owned()),
            Just("6.1".to_owned()),
            Just("bpf".to_owned()),
        ]
    }

    proptest! {
        #[test]
        fn never_panics(subject in "\\PC{0,80}") {
            let _ = parse(&subject);
            let _ = reply_subject(&subject);
        }

        #[test]
        fn never_panics_on_bracket_soup(subject in "[\\[\\] vV0-9/a-zA-Z:\t\r\n,é]{0,60}") {
            let s = parse(&subject);
            prop_assert!(s.index.is_some() == s.total.is_some());
        }

        #[test]
        fn generated_forms_round_trip(
            before in proptest::collection::vec(prefix_word(), 0..3),
            after in proptest::collection::vec(prefix_word(), 0..2),
            version in 1u32..40,
            total in 1u32..300,
            index_seed in 0u32..300,
            zero_pad in any::<bool>(),
            part_first in any::<bool>(),
            replies in 0usize..3,
            title in "[a-z][a-z :/_-]{0,30}",
        ) {
            let index = index_seed % (total + 1);
            let part = if zero_pad { format!("{index:03}/{total:03}") } else { format!("{index}/{total}") };
            let version_word = format!("v{version}");
            let mut inside = before.clone();
            inside.push("PATCH".to_owned());
            inside.extend(after.iter().cloned());
            if part_first {
                inside.extend([part, version_word]);
            } else {
                inside.extend([version_word, part]);
            }
            let subject = format!("{}[{}] {}", "Re: ".repeat(replies), inside.join(" "), title);
            let s = parse(&subject);
            prop_assert!(s.is_patch);
            prop_assert_eq!(s.reply, replies > 0);
            prop_assert_eq!((s.version, s.index, s.total), (version, Some(index), Some(total)));
            prop_assert_eq!(s.title, title.split_whitespace().collect::<Vec<_>>().join(" "));
            let mut expected = before;
            expected.push("PATCH".to_owned());
            expected.extend(after);
            prop_assert_eq!(s.prefixes, expected);
        }
    }
}
