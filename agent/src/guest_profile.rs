//! The kernel profile of a QEMU guest run: a static `perf` in the initramfs
//! records one extra execution of each invocation system-wide with call
//! chains, after the measured executions and the monitors' last snapshot (so
//! neither the KPI nor the monitors see the sampling interrupts), and
//! `perf script` sends the samples back over the results channel. Here they
//! become folded stacks ([`fold`]) and LKP's `perf-profile.self.*` and
//! `perf-profile.children.*` rows ([`metrics`]).
//!
//! The guest has no PMU under TCG, so the event is `cpu-clock` (an hrtimer
//! per CPU). Under the instruction-counted clock those timers fire at the
//! same instruction counts on every boot of the same kernel, which makes the
//! profile as repeatable as the KPI.

use std::collections::{BTreeMap, BTreeSet};

use kbot_api::agent::FoldedProfile;
use kbot_core::parsers::Metrics;
use kbot_core::profile::{Profile, Share};

use crate::console::Section;
use crate::perf::lkp_symbol;

/// The sampling event (software: no PMU in a TCG guest).
pub const EVENT: &str = "cpu-clock";
/// Samples per second of guest time and CPU.
pub const SAMPLE_HZ: u32 = 4000;
/// The name the static perf has in the initramfs.
pub const GUEST_PATH: &str = "bin/perf";

/// `perf record` and `perf script` as /init runs them for invocation `i`
/// (`argv` already quoted): the record's stderr in `perf-record.<i>`, the
/// samples in `perf-script.<i>`.
pub fn script_lines(i: usize, argv: &str) -> String {
    format!(
        "perf record -q -a -g -e {EVENT} -F {SAMPLE_HZ} -o /tmp/perf.{i}.data -- {argv} >/dev/null 2>/tmp/perf.{i}.err\n\
         section perf-record.{i} cat /tmp/perf.{i}.err\n\
         section perf-script.{i} perf script -i /tmp/perf.{i}.data -F comm,ip,sym\n\
         rm -f /tmp/perf.{i}.data\n"
    )
}

/// Folds `perf script -F comm,ip,sym` output: one `comm;root;...;leaf COUNT`
/// line per distinct stack, sorted. A thread's comm loses its `/N` suffix
/// (`swapper/1`, `kworker/0:1`) so per-CPU threads share a root; runs of
/// frames perf could not name (user code of a static binary without a
/// symbol reader) become one `[unknown]`.
pub fn fold(script: &str) -> String {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut sample: Option<(String, Vec<&str>)> = None;
    let mut flush = |sample: &mut Option<(String, Vec<&str>)>| {
        if let Some((comm, frames)) = sample.take() {
            let mut stack = comm;
            for f in frames.iter().rev() {
                stack.push(';');
                stack.push_str(f);
            }
            *counts.entry(stack).or_insert(0) += 1;
        }
    };
    for line in script.lines() {
        if line.trim().is_empty() {
            flush(&mut sample);
        } else if line.starts_with(char::is_whitespace) {
            let Some((_, frames)) = sample.as_mut() else {
                continue;
            };
            let frame = line.trim_start();
            let sym = frame.split_once(' ').map_or("[unknown]", |(_, s)| s.trim());
            let sym = if sym.is_empty() { "[unknown]" } else { sym };
            if !(sym == "[unknown]" && frames.last() == Some(&"[unknown]")) {
                frames.push(sym);
            }
        } else {
            flush(&mut sample);
            let comm = line.trim();
            let comm = comm.split_once('/').map_or(comm, |(c, _)| c);
            sample = Some((comm.replace(';', ":"), Vec::new()));
        }
    }
    flush(&mut sample);
    counts
        .into_iter()
        .map(|(stack, n)| format!("{stack} {n}\n"))
        .collect()
}

/// LKP's `perf-profile.self.<event>.<symbol>` (the share of samples whose
/// leaf is the symbol) and `perf-profile.children.<event>.<symbol>` (the
/// share whose stack holds it), in percent, as [`kbot_core::profile`]
/// counts them for the dashboard, symbols named as LKP names them
/// ([`lkp_symbol`], clones summed); shares under 0.05% are dropped, as LKP
/// does, and so are unnamed frames and the comm roots.
pub fn metrics(profile: &FoldedProfile) -> Metrics {
    let Ok(merged) = Profile::merged([profile.folded.as_str()]) else {
        return Metrics::new();
    };
    let roots: BTreeSet<&str> = profile
        .folded
        .lines()
        .filter_map(|l| l.split(';').next())
        .collect();
    let mut m = Metrics::new();
    for (kind, share) in [("self", Share::SelfTime), ("children", Share::Children)] {
        let mut sums: BTreeMap<String, f64> = BTreeMap::new();
        for (sym, pct) in merged.percents(share) {
            if sym != "[unknown]" && !roots.contains(sym) {
                *sums.entry(lkp_symbol(sym)).or_insert(0.0) += pct;
            }
        }
        for (sym, pct) in sums {
            let name = format!("perf-profile.{kind}.{}.{sym}", profile.event);
            if pct >= 0.05 && kbot_core::metrics::is_storable_name(&name) {
                m.insert(name, pct);
            }
        }
    }
    m
}

/// The profile of a run from its `perf-script.<i>` section bodies, or
/// `None` when there were no samples.
pub fn from_scripts<'a>(scripts: impl Iterator<Item = &'a str>) -> Option<FoldedProfile> {
    let folded: Vec<String> = scripts.map(fold).collect();
    let merged = Profile::merged(folded.iter().map(String::as_str)).ok()?;
    (!merged.is_empty()).then(|| FoldedProfile {
        event: EVENT.to_string(),
        folded: merged.folded(),
    })
}

/// Where the result notes how its profile was taken, or why it has none.
pub const TUNING_KEY: &str = "perf_profile";

/// The run's profile from the guest's `perf-script.<i>` sections, with the
/// note the result records: how it was taken, or what perf said instead.
pub fn from_sections(sections: &BTreeMap<String, Section>) -> (Option<FoldedProfile>, String) {
    fn of<'a>(
        sections: &'a BTreeMap<String, Section>,
        kind: &'a str,
    ) -> impl Iterator<Item = &'a Section> {
        sections
            .iter()
            .filter(move |(name, _)| name.split_once('.').is_some_and(|(k, _)| k == kind))
            .map(|(_, s)| s)
    }
    let profile = from_scripts(of(sections, "perf-script").map(|s| s.body.as_str()));
    let note = match &profile {
        Some(p) => {
            let samples = Profile::merged([p.folded.as_str()]).map_or(0, |m| m.total());
            format!(
                "{EVENT} at {SAMPLE_HZ} Hz with call chains: {samples} samples of one extra \
                 execution per invocation, after the measured ones"
            )
        }
        None => {
            let said: Vec<&str> = of(sections, "perf-record")
                .chain(of(sections, "perf-script"))
                .map(|s| s.body.trim())
                .filter(|b| !b.is_empty())
                .collect();
            format!("none: perf recorded no samples ({})", said.join("; "))
        }
    };
    (profile, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = "kbot-bench \n\tffffffff8162abb6 clear_page_erms\n\tffffffff816e73c7 pipe_write\n\tffffffff816d8e90 vfs_write\n\t  20ca3 [unknown]\n\t   80c5 [unknown]\n\nkbot-bench \n\tffffffff816e73c7 pipe_write\n\tffffffff816d8e90 vfs_write\n\t  20ca3 [unknown]\n\nswapper/1 \n\tffffffff81000001 default_idle.isra.0\n\nkbot-bench \n\tffffffff8162abb6 clear_page_erms\n\tffffffff816e73c7 pipe_write\n\tffffffff816d8e90 vfs_write\n\t 1 [unknown]\n\nswapper/0 \n\tffffffff81000001 default_idle.isra.0\n";

    #[test]
    fn samples_fold_root_first_with_counts() {
        assert_eq!(
            fold(SCRIPT),
            "kbot-bench;[unknown];vfs_write;pipe_write 1\n\
             kbot-bench;[unknown];vfs_write;pipe_write;clear_page_erms 2\n\
             swapper;default_idle.isra.0 2\n"
        );
        assert_eq!(fold(""), "");
    }

    #[test]
    fn self_and_children_shares_as_lkp_names_them() {
        let p = from_scripts([SCRIPT, SCRIPT].into_iter()).expect("samples");
        assert!(
            p.folded.contains("swapper;default_idle.isra.0 4\n"),
            "{}",
            p.folded
        );
        let m = metrics(&p);
        let get = |k: &str| m.get(k).copied();
        assert_eq!(
            get("perf-profile.self.cpu-clock.clear_page_erms"),
            Some(40.0)
        );
        assert_eq!(get("perf-profile.self.cpu-clock.pipe_write"), Some(20.0));
        assert_eq!(get("perf-profile.self.cpu-clock.default_idle"), Some(40.0));
        assert_eq!(
            get("perf-profile.children.cpu-clock.pipe_write"),
            Some(60.0)
        );
        assert_eq!(get("perf-profile.children.cpu-clock.vfs_write"), Some(60.0));
        assert!(m
            .keys()
            .all(|k| !k.contains("unknown") && !k.contains("kbot-bench")));
        assert_eq!(m.len(), 7, "{m:?}");
    }

    #[test]
    fn the_guest_lines_record_after_and_script_by_name() {
        let l = script_lines(1, "'kbot-bench' 'sched-pipe'");
        assert!(l.starts_with("perf record -q -a -g -e cpu-clock -F 4000 -o /tmp/perf.1.data -- 'kbot-bench' 'sched-pipe' >/dev/null"));
        assert!(
            l.contains("section perf-script.1 perf script -i /tmp/perf.1.data -F comm,ip,sym\n")
        );
    }
}
