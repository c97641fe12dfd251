//! Kernel profiles as folded call stacks (`root;caller;...;leaf COUNT`, one
//! distinct stack a line, as `inferno`'s and Brendan Gregg's collapsers
//! write them): the runs of one side of a pair merged into one
//! [`Profile`], each symbol's share of the samples ([`Share`]), and the
//! symbols whose share moved most between two sides ([`top_movers`]).
//!
//! Shares are percent of a side's samples, like the agent's
//! `perf-profile.self.*` and `perf-profile.children.*` metrics: *self* counts
//! the samples whose leaf frame is the symbol, *children* the samples whose
//! stack holds the symbol anywhere (once per stack, however often a
//! recursive symbol appears in it).

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};

/// The stacks of one or more profiles of the same event, their counts
/// summed per distinct stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    stacks: BTreeMap<String, u64>,
    total: u64,
}

/// Which share of a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// Samples whose leaf frame is the symbol.
    SelfTime,
    /// Samples whose stack holds the symbol at any depth.
    Children,
}

/// A symbol whose share differs between the two sides.
#[derive(Debug, Clone, PartialEq)]
pub struct Mover {
    pub symbol: String,
    /// Percent of the base side's samples.
    pub base_pct: f64,
    /// Percent of the head side's samples.
    pub head_pct: f64,
}

impl Mover {
    /// `head_pct - base_pct`, in percentage points.
    pub fn change(&self) -> f64 {
        self.head_pct - self.base_pct
    }
}

impl Profile {
    pub fn new() -> Profile {
        Profile::default()
    }

    /// Adds the stacks of one profile's folded text (blank lines are
    /// skipped); on a malformed line nothing of `folded` is added.
    pub fn add_folded(&mut self, folded: &str) -> Result<()> {
        let parsed = parse(folded)?;
        for (stack, count) in parsed {
            *self.stacks.entry(stack.to_owned()).or_insert(0) += count;
            self.total = self.total.saturating_add(count);
        }
        Ok(())
    }

    /// The merge of several profiles' folded texts.
    pub fn merged<'a>(folded: impl IntoIterator<Item = &'a str>) -> Result<Profile> {
        let mut profile = Profile::new();
        for text in folded {
            profile.add_folded(text)?;
        }
        Ok(profile)
    }

    /// All samples.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether there is no sample at all.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The merged stacks as folded text, one `stack COUNT` line each, in
    /// the stacks' order.
    pub fn folded(&self) -> String {
        let mut out = String::new();
        for (stack, count) in &self.stacks {
            out.push_str(stack);
            out.push(' ');
            out.push_str(&count.to_string());
            out.push('\n');
        }
        out
    }

    /// Samples per symbol, as `share` counts them.
    pub fn counts(&self, share: Share) -> BTreeMap<&str, u64> {
        let mut out: BTreeMap<&str, u64> = BTreeMap::new();
        for (stack, &count) in &self.stacks {
            let mut frames = stack.split(';').filter(|f| !f.is_empty());
            match share {
                Share::SelfTime => {
                    if let Some(leaf) = frames.next_back() {
                        *out.entry(leaf).or_insert(0) += count;
                    }
                }
                Share::Children => {
                    let distinct: BTreeSet<&str> = frames.collect();
                    for frame in distinct {
                        *out.entry(frame).or_insert(0) += count;
                    }
                }
            }
        }
        out
    }

    /// Percent of all samples per symbol, as `share` counts them; empty for
    /// a profile without samples.
    pub fn percents(&self, share: Share) -> BTreeMap<&str, f64> {
        if self.total == 0 {
            return BTreeMap::new();
        }
        let total = self.total as f64;
        self.counts(share)
            .into_iter()
            .map(|(symbol, n)| (symbol, 100.0 * n as f64 / total))
            .collect()
    }
}

/// The `limit` symbols whose `share` changed most between `base` and
/// `head`, the largest absolute change first (ties by name); a symbol seen
/// on one side only has 0% on the other. Symbols that did not move are
/// left out.
pub fn top_movers(base: &Profile, head: &Profile, share: Share, limit: usize) -> Vec<Mover> {
    let before = base.percents(share);
    let after = head.percents(share);
    let symbols: BTreeSet<&str> = before.keys().chain(after.keys()).copied().collect();
    let mut movers: Vec<Mover> = symbols
        .into_iter()
        .map(|symbol| Mover {
            symbol: symbol.to_owned(),
            base_pct: before.get(symbol).copied().unwrap_or(0.0),
            head_pct: after.get(symbol).copied().unwrap_or(0.0),
        })
        .filter(|m| m.change() != 0.0)
        .collect();
    movers.sort_by(|a, b| {
        b.change()
            .abs()
            .total_cmp(&a.change().abs())
            .then_with(|| a.symbol.cmp(&b.symbol))
    });
    movers.truncate(limit);
    movers
}

/// The (stack, count) lines of folded text: the count is the last
/// space-separated field; blank lines are skipped.
pub fn parse(folded: &str) -> Result<Vec<(&str, u64)>> {
    folded
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (stack, count) = l
                .rsplit_once(' ')
                .ok_or_else(|| Error::Profile(format!("no sample count in folded line {l:?}")))?;
            let count = count
                .parse::<u64>()
                .map_err(|_| Error::Profile(format!("bad sample count in folded line {l:?}")))?;
            Ok((stack, count))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "\
main;sys_write;pipe_write;copy_page 30
main;sys_read;pipe_read;copy_page 30
main;sys_read;pipe_read 20
main;schedule 20
";

    /// `pipe_read` grows (its own time and its callee's), `schedule` shrinks.
    const HEAD: &str = "\
main;sys_write;pipe_write;copy_page 30
main;sys_read;pipe_read;copy_page 40
main;sys_read;pipe_read 50
main;schedule 10

";

    fn pct(map: &BTreeMap<&str, f64>, symbol: &str) -> f64 {
        map.get(symbol).copied().unwrap_or(f64::NAN)
    }

    #[test]
    fn merging_sums_each_stack_and_the_total() {
        let p = Profile::merged([BASE, "main;schedule 5\nmain;idle 1\n"]).expect("folded");
        assert_eq!(p.total(), 106);
        assert!(p.folded().contains("main;schedule 25\n"), "{}", p.folded());
        assert!(p.folded().contains("main;idle 1\n"), "{}", p.folded());
        assert_eq!(p.folded().lines().count(), 5);
    }

    #[test]
    fn self_share_counts_the_leaf_frame() {
        let p = Profile::merged([BASE]).expect("folded");
        let self_ = p.percents(Share::SelfTime);
        assert_eq!(pct(&self_, "copy_page"), 60.0);
        assert_eq!(pct(&self_, "pipe_read"), 20.0);
        assert_eq!(pct(&self_, "schedule"), 20.0);
        assert!(!self_.contains_key("main"));
    }

    #[test]
    fn children_share_counts_a_frame_once_per_stack() {
        let p = Profile::merged(["a;b;a;b 3\na;c 1\n"]).expect("folded");
        let children = p.percents(Share::Children);
        assert_eq!(pct(&children, "a"), 100.0);
        assert_eq!(pct(&children, "b"), 75.0);
        assert_eq!(pct(&children, "c"), 25.0);
    }

    #[test]
    fn top_movers_put_the_largest_change_first() {
        let base = Profile::merged([BASE]).expect("base");
        let head = Profile::merged([HEAD]).expect("head");
        let movers = top_movers(&base, &head, Share::SelfTime, 15);
        // Base 100 samples, head 130: pipe_read self 20% -> 38.46%.
        assert_eq!(movers[0].symbol, "pipe_read");
        assert_eq!(movers[0].base_pct, 20.0);
        assert!((movers[0].change() - (5000.0 / 130.0 - 20.0)).abs() < 1e-9);
        let names: Vec<&str> = movers.iter().map(|m| m.symbol.as_str()).collect();
        assert_eq!(names, ["pipe_read", "schedule", "copy_page"]);
        for pair in movers.windows(2) {
            assert!(pair[0].change().abs() >= pair[1].change().abs());
        }
        assert_eq!(top_movers(&base, &head, Share::SelfTime, 1).len(), 1);
    }

    #[test]
    fn children_movers_see_callers() {
        let base = Profile::merged([BASE]).expect("base");
        let head = Profile::merged([HEAD]).expect("head");
        let movers = top_movers(&base, &head, Share::Children, 15);
        let sys_read = movers
            .iter()
            .find(|m| m.symbol == "sys_read")
            .expect("sys_read moved");
        assert_eq!(sys_read.base_pct, 50.0);
        assert!((sys_read.head_pct - 9000.0 / 130.0).abs() < 1e-9);
        // In every stack on both sides: it did not move.
        assert!(movers.iter().all(|m| m.symbol != "main"));
    }

    #[test]
    fn a_symbol_of_one_side_only_has_zero_on_the_other() {
        let base = Profile::merged(["main;old 10\n"]).expect("base");
        let head = Profile::merged(["main;new 10\n"]).expect("head");
        let movers = top_movers(&base, &head, Share::SelfTime, 15);
        assert_eq!(
            movers,
            vec![
                Mover {
                    symbol: "new".into(),
                    base_pct: 0.0,
                    head_pct: 100.0
                },
                Mover {
                    symbol: "old".into(),
                    base_pct: 100.0,
                    head_pct: 0.0
                },
            ]
        );
    }

    #[test]
    fn an_empty_profile_has_no_shares() {
        let empty = Profile::new();
        assert!(empty.is_empty());
        assert!(empty.percents(Share::Children).is_empty());
        let head = Profile::merged(["main;x 4\n"]).expect("head");
        let movers = top_movers(&empty, &head, Share::SelfTime, 15);
        assert_eq!(movers.len(), 1);
        assert_eq!(movers[0].head_pct, 100.0);
    }

    #[test]
    fn malformed_lines_are_refused_whole() {
        let mut p = Profile::merged(["main;x 4\n"]).expect("folded");
        for bad in ["main;x 4\nmain;y\n", "main;y many\n", "main;y -3\n"] {
            let err = p.add_folded(bad).expect_err(bad);
            assert!(matches!(err, Error::Profile(_)), "{err:?}");
        }
        assert_eq!(p.total(), 4, "nothing of a refused text was added");
    }
}
