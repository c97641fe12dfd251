//! Patch series put together from the messages of a list, purely from
//! their stored metadata: no I/O, the same answer for the same messages in
//! any order.
//!
//! `git send-email` threads a series in one of three shapes: every patch a
//! reply to the cover letter (shallow, the default), each patch a reply to
//! the one before (deep, `--chain-reply-to`), or patches 2..n replies to
//! patch 1 when there is no cover letter. Each part is traced up its thread
//! through parts of the same series (same version and total, lower index)
//! to the cover letter, or to the top of the chain; parts that reach the
//! same place form one series. The author does not break a chain: `git
//! format-patch` writes the cover letter from the sender and each patch
//! from its author, and a maintainer posts patches of several authors. A
//! part whose thread leads to a message that is no part of it (not yet
//! stored, or a discussion it answers) is grouped under that message's id
//! and its author, so patches whose cover letter is missing still meet. A
//! new version posted in the thread of the old one differs in version and
//! so never joins it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::message::{capped, ListMessage};
use super::subject::{self, PatchSubject};

/// The most parts a series may have; a subject claiming more (`1/99999`)
/// is not a series the robot assembles.
pub const MAX_SERIES_LEN: u32 = 1000;

/// What assembly needs of one stored message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageMeta {
    pub message_id: String,
    pub in_reply_to: Option<String>,
    /// Oldest first, as [`ListMessage::references`].
    pub references: Vec<String>,
    pub subject: PatchSubject,
    pub from_address: String,
    /// When it was posted (or arrived), Unix milliseconds.
    pub date_ms: i64,
    /// The message carries a diff.
    pub has_patch: bool,
}

impl MessageMeta {
    /// The metadata of a parsed message, dated `date_ms` (its `Date`
    /// header, or when it arrived when that is missing or not believed).
    pub fn new(message: &ListMessage, date_ms: i64) -> MessageMeta {
        MessageMeta {
            message_id: message.message_id.clone(),
            in_reply_to: message.in_reply_to.clone(),
            references: message.references.clone(),
            subject: subject::parse(&message.subject),
            from_address: message.from.address.clone(),
            date_ms,
            has_patch: message.patch.is_some(),
        }
    }
}

/// A series as far as its parts have arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesDraft {
    /// Stable identity: the message id of the cover letter, else of patch
    /// 1, else of the lowest-numbered patch seen (the last two change when
    /// the missing parts arrive).
    pub key: String,
    pub version: u32,
    pub total: u32,
    /// Any part is marked RFC.
    pub rfc: bool,
    /// The cover letter's title, else patch 1's, else the lowest part's.
    pub title: String,
    /// The sender's address: the cover letter's, else that of the part
    /// the key names.
    pub author: String,
    /// The cover letter's message id.
    pub cover: Option<String>,
    /// Index -> message id of the patches (1..=total).
    pub patches: BTreeMap<u32, String>,
    pub first_date_ms: i64,
    pub last_date_ms: i64,
    /// Every id the series' messages refer to outside the series: the
    /// thread it was posted in (how a v2 names its v1).
    pub references: BTreeSet<String>,
}

impl SeriesDraft {
    /// All of 1..=total are present.
    pub fn complete(&self) -> bool {
        self.missing().is_empty()
    }

    /// The indexes of 1..=total not present.
    pub fn missing(&self) -> Vec<u32> {
        (1..=self.total)
            .filter(|i| !self.patches.contains_key(i))
            .collect()
    }
}

/// Whether `newer` replaces `older`: the same author, a higher version,
/// and the same title (case and blanks aside) or posted in `older`'s
/// thread.
pub fn supersedes(newer: &SeriesDraft, older: &SeriesDraft) -> bool {
    newer.version > older.version
        && newer.author.eq_ignore_ascii_case(&older.author)
        && (normal_title(&newer.title) == normal_title(&older.title)
            || newer.references.contains(&older.key))
}

fn normal_title(title: &str) -> String {
    title
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The series the messages hold, ordered by first date, then key.
pub fn assemble(messages: &[MessageMeta]) -> Vec<SeriesDraft> {
    let known = canonical(messages);
    let parts: HashMap<&str, Part<'_>> = known
        .values()
        .copied()
        .filter_map(Part::of)
        .map(|part| (part.meta.message_id.as_str(), part))
        .collect();
    let mut groups: BTreeMap<(PartKey, Root), Vec<&Part<'_>>> = BTreeMap::new();
    for part in parts.values() {
        let root = root(part, &parts, &known);
        groups
            .entry((part.key.clone(), root))
            .or_default()
            .push(part);
    }
    let mut drafts: Vec<SeriesDraft> = groups
        .into_values()
        .flat_map(split_collisions)
        .map(|members| draft(&members))
        .collect();
    drafts.sort_by(|a, b| (a.first_date_ms, &a.key).cmp(&(b.first_date_ms, &b.key)));
    drafts
}

/// One message per id, the same whatever the input order: of duplicates,
/// the first by a total order of their fields.
fn canonical(messages: &[MessageMeta]) -> BTreeMap<&str, &MessageMeta> {
    let mut sorted: Vec<&MessageMeta> = messages.iter().collect();
    sorted.sort_by_key(|m| order_key(m));
    let mut out = BTreeMap::new();
    for meta in sorted {
        out.entry(meta.message_id.as_str()).or_insert(meta);
    }
    out
}

type OrderKey<'a> = (
    &'a str,
    i64,
    &'a str,
    bool,
    &'a str,
    &'a Option<String>,
    &'a [String],
);

fn order_key(m: &MessageMeta) -> OrderKey<'_> {
    (
        &m.message_id,
        m.date_ms,
        &m.from_address,
        m.has_patch,
        &m.subject.title,
        &m.in_reply_to,
        &m.references,
    )
}

/// What parts of one series share.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct PartKey {
    version: u32,
    total: u32,
}

/// Where a series hangs: a message id, and the lowercase author when that
/// message is not a part of the series (others may hang from it too).
type Root = (String, Option<String>);

/// A message that is a part of a series.
#[derive(Debug)]
struct Part<'a> {
    meta: &'a MessageMeta,
    key: PartKey,
    /// 0 for the cover letter.
    index: u32,
}

impl<'a> Part<'a> {
    /// The part a message is: a patch subject, not a reply, a sane `m/n`
    /// (none is 1/1), and a diff unless it is the cover letter.
    fn of(meta: &'a MessageMeta) -> Option<Part<'a>> {
        let s = &meta.subject;
        if !s.is_patch || s.reply {
            return None;
        }
        let (index, total) = s.index.zip(s.total).unwrap_or((1, 1));
        if total == 0 || total > MAX_SERIES_LEN || index > total {
            return None;
        }
        if index >= 1 && !meta.has_patch {
            return None;
        }
        let key = PartKey {
            version: s.version,
            total,
        };
        Some(Part { meta, key, index })
    }

    fn id(&self) -> &'a str {
        &self.meta.message_id
    }
}

/// Where a walk up the thread stopped.
enum Stop<'a> {
    /// At a stored message that is not an earlier part of the series.
    Known(&'a str),
    /// Every message the part refers to is missing; the nearest one.
    Unknown(&'a str),
    /// The part refers to nothing.
    Top,
}

enum Step<'p, 'a> {
    Up(&'p Part<'a>),
    Stop(Stop<'a>),
}

/// Where a part's series hangs: its cover letter, the top of its chain
/// (patch 1 when there is no cover letter), or, with the top's author, the
/// message the chain replies to when that is missing or no part (patches
/// 2..n whose patch 1 or cover letter is not stored). Each step goes to a
/// lower index, so the walk ends; the visited set guards it anyway.
fn root(
    part: &Part<'_>,
    parts: &HashMap<&str, Part<'_>>,
    known: &BTreeMap<&str, &MessageMeta>,
) -> Root {
    let mut cur = part;
    let mut visited = BTreeSet::from([part.id()]);
    loop {
        if cur.index == 0 {
            return (cur.id().to_owned(), None);
        }
        let stop = match step(cur, parts, known) {
            Step::Up(next) if visited.insert(next.id()) => {
                cur = next;
                continue;
            }
            Step::Up(next) => Stop::Known(next.id()),
            Step::Stop(stop) => stop,
        };
        return match stop {
            Stop::Top => (cur.id().to_owned(), None),
            Stop::Known(_) if cur.index <= 1 => (cur.id().to_owned(), None),
            Stop::Unknown(parent) | Stop::Known(parent) => (
                parent.to_owned(),
                Some(cur.meta.from_address.trim().to_lowercase()),
            ),
        };
    }
}

/// One step up from `cur`: to the nearest stored message it refers to
/// (missing ones skipped), if that is an earlier part of its series.
fn step<'p, 'a>(
    cur: &Part<'a>,
    parts: &'p HashMap<&str, Part<'a>>,
    known: &BTreeMap<&str, &MessageMeta>,
) -> Step<'p, 'a> {
    let parents = parents(cur.meta);
    for &parent in &parents {
        if !known.contains_key(parent) {
            continue;
        }
        return match parts.get(parent) {
            Some(up) if up.key == cur.key && up.index < cur.index => Step::Up(up),
            _ => Step::Stop(Stop::Known(parent)),
        };
    }
    Step::Stop(parents.first().map_or(Stop::Top, |&p| Stop::Unknown(p)))
}

/// The ids a message refers to, nearest first: In-Reply-To, then the
/// References from the newest; without itself and without repeats. The
/// References are capped as when read ([`super::message::MAX_REFERENCES`]): rows stored
/// before the cap may hold more.
fn parents(meta: &MessageMeta) -> Vec<&str> {
    let references = capped(meta.references.iter().map(String::as_str).collect());
    let mut seen = HashSet::new();
    meta.in_reply_to
        .iter()
        .map(String::as_str)
        .chain(references.into_iter().rev())
        .filter(|&id| id != meta.message_id && seen.insert(id))
        .collect()
}

/// The members of one group as series with one part per index: a second
/// part at a taken index (a resend in the same thread, two patches with
/// one root) starts another series. Members go in date order, so the first
/// posting of an index keeps the first series.
fn split_collisions<'p, 'a>(mut members: Vec<&'p Part<'a>>) -> Vec<Vec<&'p Part<'a>>> {
    members.sort_by(|a, b| (a.meta.date_ms, a.id()).cmp(&(b.meta.date_ms, b.id())));
    let mut series: Vec<Vec<&Part<'_>>> = Vec::new();
    for part in members {
        let free = series
            .iter_mut()
            .find(|s| s.iter().all(|other| other.index != part.index));
        match free {
            Some(s) => s.push(part),
            None => series.push(vec![part]),
        }
    }
    series
}

/// The draft of one series' members (not empty, one per index).
fn draft(members: &[&Part<'_>]) -> SeriesDraft {
    let by_index: BTreeMap<u32, &Part<'_>> = members.iter().map(|p| (p.index, *p)).collect();
    // The cover (0), else patch 1, else the lowest: the first entry.
    let head = by_index.values().next().copied();
    let ids: BTreeSet<&str> = members.iter().map(|p| p.id()).collect();
    let references = members
        .iter()
        .flat_map(|p| parents(p.meta))
        .filter(|id| !ids.contains(id))
        .map(str::to_owned)
        .collect();
    let dates = members.iter().map(|p| p.meta.date_ms);
    SeriesDraft {
        key: head.map(|p| p.id().to_owned()).unwrap_or_default(),
        version: head.map_or(1, |p| p.key.version),
        total: head.map_or(1, |p| p.key.total),
        rfc: members.iter().any(|p| p.meta.subject.rfc),
        title: head
            .map(|p| p.meta.subject.title.clone())
            .unwrap_or_default(),
        author: head
            .map(|p| p.meta.from_address.trim().to_owned())
            .unwrap_or_default(),
        cover: by_index.get(&0).map(|p| p.id().to_owned()),
        patches: by_index
            .iter()
            .filter(|(i, _)| **i > 0)
            .map(|(i, p)| (*i, p.id().to_owned()))
            .collect(),
        first_date_ms: dates.clone().min().unwrap_or_default(),
        last_date_ms: dates.max().unwrap_or_default(),
        references,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A message `id` with `subject`, replying to `parent` whose own
    /// references are `thread`.
    fn msg(id: &str, subject: &str, parent: Option<&str>, date: i64) -> MessageMeta {
        MessageMeta {
            message_id: id.into(),
            in_reply_to: parent.map(Into::into),
            references: parent.map(|p| vec![p.to_owned()]).unwrap_or_default(),
            subject: subject::parse(subject),
            from_address: "ann@example.org".into(),
            date_ms: date,
            has_patch: !subject.contains(" 0/"),
        }
    }

    fn with_refs(mut m: MessageMeta, refs: &[&str]) -> MessageMeta {
        m.references = refs.iter().map(|r| (*r).to_owned()).collect();
        m
    }

    fn patches(d: &SeriesDraft) -> Vec<(u32, &str)> {
        d.patches.iter().map(|(i, id)| (*i, id.as_str())).collect()
    }

    #[test]
    fn shallow_series_with_cover() {
        let msgs = vec![
            msg("c", "[PATCH v2 0/3] the series", None, 1),
            msg("p1", "[PATCH v2 1/3] one", Some("c"), 2),
            msg("p2", "[PATCH v2 2/3] two", Some("c"), 3),
            msg("p3", "[PATCH v2 3/3] three", Some("c"), 4),
            msg("r", "Re: [PATCH v2 2/3] two", Some("p2"), 5),
        ];
        let drafts = assemble(&msgs);
        assert_eq!(drafts.len(), 1);
        let d = &drafts[0];
        assert_eq!((d.key.as_str(), d.version, d.total), ("c", 2, 3));
        assert_eq!(d.cover.as_deref(), Some("c"));
        assert_eq!(d.title, "the series");
        assert_eq!(patches(d), [(1, "p1"), (2, "p2"), (3, "p3")]);
        assert!(d.complete());
        assert_eq!((d.first_date_ms, d.last_date_ms), (1, 4));
    }

    #[test]
    fn deep_series_with_cover() {
        let msgs = vec![
            msg("c", "[PATCH 0/3] deep", None, 1),
            with_refs(msg("p1", "[PATCH 1/3] a", Some("c"), 2), &["c"]),
            with_refs(msg("p2", "[PATCH 2/3] b", Some("p1"), 3), &["c", "p1"]),
            with_refs(
                msg("p3", "[PATCH 3/3] c", Some("p2"), 4),
                &["c", "p1", "p2"],
            ),
        ];
        let drafts = assemble(&msgs);
        assert_eq!(drafts.len(), 1);
        assert_eq!(drafts[0].key, "c");
        assert!(drafts[0].complete());
    }

    #[test]
    fn no_cover_patches_reply_to_patch_one() {
        let msgs = vec![
            msg("p1", "[PATCH 1/2] first", None, 1),
            msg("p2", "[PATCH 2/2] second", Some("p1"), 2),
        ];
        let drafts = assemble(&msgs);
        assert_eq!(drafts.len(), 1);
        assert_eq!(
            (drafts[0].key.as_str(), drafts[0].title.as_str()),
            ("p1", "first")
        );
        assert_eq!(drafts[0].cover, None);
        assert!(drafts[0].complete());
    }

    #[test]
    fn a_single_patch_is_one_of_one() {
        let drafts = assemble(&[msg("s", "[PATCH] lone", None, 7)]);
        assert_eq!(drafts.len(), 1);
        assert_eq!((drafts[0].total, drafts[0].key.as_str()), (1, "s"));
        assert!(drafts[0].complete());
    }

    #[test]
    fn v2_in_reply_to_v1_is_its_own_series() {
        let msgs = vec![
            msg("c1", "[PATCH 0/2] thing", None, 1),
            msg("a1", "[PATCH 1/2] a", Some("c1"), 2),
            msg("b1", "[PATCH 2/2] b", Some("c1"), 3),
            with_refs(msg("c2", "[PATCH v2 0/2] thing", Some("c1"), 10), &["c1"]),
            with_refs(msg("a2", "[PATCH v2 1/2] a", Some("c2"), 11), &["c1", "c2"]),
            with_refs(msg("b2", "[PATCH v2 2/2] b", Some("c2"), 12), &["c1", "c2"]),
        ];
        let drafts = assemble(&msgs);
        assert_eq!(drafts.len(), 2);
        assert_eq!((drafts[0].key.as_str(), drafts[0].version), ("c1", 1));
        assert_eq!((drafts[1].key.as_str(), drafts[1].version), ("c2", 2));
        assert_eq!(patches(&drafts[1]), [(1, "a2"), (2, "b2")]);
        assert!(supersedes(&drafts[1], &drafts[0]));
        assert!(!supersedes(&drafts[0], &drafts[1]));
    }

    #[test]
    fn v2_with_no_cover_in_reply_to_v1_patch() {
        let msgs = vec![
            msg("a1", "[PATCH 1/2] a", None, 1),
            msg("b1", "[PATCH 2/2] b", Some("a1"), 2),
            msg("a2", "[PATCH v2 1/2] a", Some("a1"), 3),
            with_refs(msg("b2", "[PATCH v2 2/2] b", Some("a2"), 4), &["a1", "a2"]),
        ];
        let drafts = assemble(&msgs);
        let keys: Vec<&str> = drafts.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(keys, ["a1", "a2"]);
        assert!(drafts.iter().all(SeriesDraft::complete));
    }

    #[test]
    fn a_missing_cover_still_joins_its_patches() {
        let msgs = vec![
            msg("p2", "[PATCH 2/3] b", Some("gone"), 2),
            msg("p3", "[PATCH 3/3] c", Some("gone"), 3),
        ];
        let drafts = assemble(&msgs);
        assert_eq!(drafts.len(), 1);
        assert_eq!(drafts[0].key, "p2");
        assert_eq!(drafts[0].missing(), [1]);
        assert!(!drafts[0].complete());
    }

    #[test]
    fn a_missing_middle_patch_of_a_deep_thread_is_skipped() {
        let msgs = vec![
            msg("c", "[PATCH 0/3] x", None, 1),
            with_refs(msg("p1", "[PATCH 1/3] a", Some("c"), 2), &["c"]),
            with_refs(
                msg("p3", "[PATCH 3/3] c", Some("p2"), 4),
                &["c", "p1", "p2"],
            ),
        ];
        let drafts = assemble(&msgs);
        assert_eq!(drafts.len(), 1);
        assert_eq!(drafts[0].missing(), [2]);
    }

    #[test]
    fn non_parts_stay_apart() {
        let mut no_diff = msg("p2", "[PATCH 2/2] b", Some("c"), 4);
        no_diff.has_patch = false;
        let msgs = vec![
            msg("c", "[PATCH 0/2] x", None, 1),
            msg("p1", "[PATCH 1/2] a", Some("c"), 2),
            no_diff,
            msg("big", "[PATCH 1/5000] a", None, 5),
            msg("odd", "[PATCH 3/2] a", None, 6),
            msg("talk", "what about this", Some("c"), 7),
        ];
        let drafts = assemble(&msgs);
        assert_eq!(drafts.len(), 1);
        assert_eq!(drafts[0].key, "c");
        assert_eq!(drafts[0].missing(), [2]);
    }

    /// `git format-patch` writes the cover from the sender, the patches
    /// from their authors: the thread holds them together.
    #[test]
    fn patches_of_several_authors_under_one_cover() {
        let mut cover = msg("c", "[PATCH 0/2] x", None, 1);
        cover.from_address = "Maint@example.org".into();
        let mut bob = msg("p2", "[PATCH 2/2] b", Some("p1"), 3);
        bob.from_address = "bob@example.org".into();
        let msgs = vec![cover, msg("p1", "[PATCH 1/2] a", Some("c"), 2), bob];
        let drafts = assemble(&msgs);
        assert_eq!(drafts.len(), 1);
        assert!(drafts[0].complete());
        assert_eq!(drafts[0].author, "Maint@example.org");
    }

    /// Without a stored part to hang from, the author keeps two posters
    /// apart.
    #[test]
    fn authors_split_parts_answering_one_missing_message() {
        let mut bob = msg("b3", "[PATCH 3/3] c", Some("gone"), 3);
        bob.from_address = "bob@example.org".into();
        let msgs = vec![msg("a2", "[PATCH 2/3] b", Some("gone"), 2), bob];
        let drafts = assemble(&msgs);
        let keys: Vec<(&str, &str)> = drafts
            .iter()
            .map(|d| (d.key.as_str(), d.author.as_str()))
            .collect();
        assert_eq!(keys, [("a2", "ann@example.org"), ("b3", "bob@example.org")]);
    }

    #[test]
    fn two_lone_patches_in_one_thread_are_two_series() {
        let msgs = vec![
            msg("bug", "crash in foo", None, 1),
            msg("fix1", "[PATCH] foo: fix", Some("bug"), 2),
            msg("fix2", "[PATCH] foo: other fix", Some("bug"), 3),
            msg("again", "[PATCH] foo: other fix", Some("fix2"), 4),
        ];
        let drafts = assemble(&msgs);
        let keys: Vec<&str> = drafts.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(keys, ["fix1", "fix2", "again"]);
    }

    #[test]
    fn reference_loops_end() {
        let msgs = vec![
            with_refs(msg("a", "[PATCH 2/3] a", Some("b"), 1), &["c", "b"]),
            with_refs(msg("b", "[PATCH 3/3] b", Some("a"), 2), &["a"]),
            with_refs(msg("c", "[PATCH 1/3] c", Some("c"), 3), &["a", "b", "c"]),
        ];
        let drafts = assemble(&msgs);
        let total: usize = drafts.iter().map(|d| d.patches.len()).sum();
        assert_eq!(total, 3);
    }

    #[test]
    fn supersedes_needs_author_version_and_title_or_thread() {
        let v1 = assemble(&[msg("a", "[PATCH] Fix  Foo", None, 1)]).remove(0);
        let mut v2 = assemble(&[msg("b", "[PATCH v2] fix foo", None, 2)]).remove(0);
        assert!(supersedes(&v2, &v1));
        v2.title = "something else".into();
        assert!(!supersedes(&v2, &v1));
        v2.references.insert("a".into());
        assert!(supersedes(&v2, &v1));
        v2.author = "bob@example.org".into();
        assert!(!supersedes(&v2, &v1));
    }

    /// Messages over a small id pool with random links (loops included),
    /// subjects, authors and diffs; unique ids.
    fn messages() -> impl Strategy<Value = Vec<MessageMeta>> {
        let one = (
            0usize..12,
            proptest::option::of(0usize..14),
            proptest::collection::vec(0usize..14, 0..4),
            0u32..4,
            1u32..4,
            0u32..3,
            any::<bool>(),
            any::<bool>(),
            0i64..5,
            any::<bool>(),
        );
        proptest::collection::vec(one, 0..12).prop_map(|specs| {
            let mut seen = BTreeSet::new();
            specs
                .into_iter()
                .filter(|s| seen.insert(s.0))
                .map(
                    |(id, parent, refs, index, total, version, reply, alice, date, diff)| {
                        let name = |n: usize| format!("m{n}@x");
                        let subject = format!(
                            "{}[PATCH v{} {}/{}] t",
                            if reply { "Re: " } else { "" },
                            version + 1,
                            index,
                            total
                        );
                        MessageMeta {
                            message_id: name(id),
                            in_reply_to: parent.map(name),
                            references: refs.into_iter().map(name).collect(),
                            subject: subject::parse(&subject),
                            from_address: if alice { "a@x" } else { "b@x" }.into(),
                            date_ms: date,
                            has_patch: diff,
                        }
                    },
                )
                .collect()
        })
    }

    proptest! {
        #[test]
        fn every_part_lands_in_exactly_one_series(msgs in messages()) {
            let drafts = assemble(&msgs);
            let mut placed: Vec<&str> = drafts
                .iter()
                .flat_map(|d| d.cover.iter().chain(d.patches.values()))
                .map(String::as_str)
                .collect();
            placed.sort_unstable();
            let mut parts: Vec<&str> = msgs
                .iter()
                .filter(|m| Part::of(m).is_some())
                .map(|m| m.message_id.as_str())
                .collect();
            parts.sort_unstable();
            prop_assert_eq!(placed, parts);
            for d in &drafts {
                prop_assert!(d.cover.as_ref() == Some(&d.key) || d.patches.values().next() == Some(&d.key));
                prop_assert!(d.patches.keys().all(|i| (1..=d.total).contains(i)));
            }
        }

        #[test]
        fn input_order_does_not_matter(
            (msgs, shuffled) in messages().prop_flat_map(|m| (Just(m.clone()), Just(m).prop_shuffle()))
        ) {
            prop_assert_eq!(assemble(&msgs), assemble(&shuffled));
        }
    }
}
