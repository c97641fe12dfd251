//! The kernel profile of a QEMU guest run: a static `perf` in the initramfs
//! records one extra execution of each invocation system-wide with call
//! chains, after the measured executions and the monitors' last snapshot (so
//! neither the KPI nor the monitors see the sampling interrupts), and
//! `perf script`, folded into stacks in the guest ([`FOLD_AWK`]), goes back
//! over the results channel. Here the stacks become the result's profile and
//! LKP's `perf-profile.self.*` and `perf-profile.children.*` rows
//! ([`metrics`]).
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
pub const SAMPLE_HZ: u32 = 1000;
/// The name the static perf has in the initramfs.
pub const GUEST_PATH: &str = "bin/perf";
/// Where [`FOLD_AWK`] is in the initramfs.
pub const FOLD_AWK_PATH: &str = "fold.awk";

/// The shell function /init folds a perf.data file with.
pub const FOLD_FN: &str = "fold() { perf script -i \"$1\" -F comm,ip,sym | awk -f /fold.awk; }\n";

/// `perf record` and `perf script` as /init runs them for invocation `i`
/// (`argv` already quoted): the record's stderr in `perf-record.<i>`, the
/// samples folded by [`FOLD_AWK`] in `perf-fold.<i>`. Folding in the guest
/// keeps what crosses the results channel to one line per distinct stack
/// (a long workload's raw samples run to tens of MB).
pub fn script_lines(i: usize, argv: &str) -> String {
    format!(
        "perf record -q -a -g -e {EVENT} -F {SAMPLE_HZ} -o /tmp/perf.{i}.data -- {argv} >/dev/null 2>/tmp/perf.{i}.err\n\
         section perf-record.{i} cat /tmp/perf.{i}.err\n\
         section perf-fold.{i} fold /tmp/perf.{i}.data\n\
         rm -f /tmp/perf.{i}.data\n"
    )
}

/// Folds `perf script -F comm,ip,sym` output (a sample: its comm alone on a
/// line, then one `\tADDRESS SYMBOL` line per frame, leaf first, then a
/// blank line) into `comm;root;...;leaf COUNT` lines. A thread's comm loses
/// its `/N` suffix (`swapper/1`, `kworker/0:1`) so per-CPU threads share a
/// root; runs of frames perf could not name (user code of a static binary:
/// the guest's perf reads no ELF symbols) become one `[unknown]`. Busybox
/// awk runs it in the guest ([`FOLD_FN`]).
pub const FOLD_AWK: &str = r#"function flush() { if (open) n[comm stack]++; open = 0 }
/^[^ \t]/ { flush(); comm = $0; sub(/[ \t]+$/, "", comm); sub(/\/.*/, "", comm); gsub(/;/, ":", comm); stack = ""; last = ""; open = 1; next }
/^[ \t]/ { if (!open) next; sym = $2; for (f = 3; f <= NF; f++) sym = sym " " $f; if (sym == "") sym = "[unknown]"; if (sym == "[unknown]" && last == "[unknown]") next; stack = ";" sym stack; last = sym; next }
{ flush() }
END { flush(); for (s in n) print s, n[s] }"#;

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

/// The profile of a run from its `perf-fold.<i>` section bodies (folded
/// stacks) and its sample count, or `None` when there were no samples or a
/// line is not folded.
pub fn from_folded<'a>(folded: impl Iterator<Item = &'a str>) -> Option<(FoldedProfile, u64)> {
    let merged = Profile::merged(folded).ok()?;
    let profile = FoldedProfile {
        event: EVENT.to_string(),
        folded: merged.folded(),
    };
    (!merged.is_empty()).then_some((profile, merged.total()))
}

/// Where the result notes how its profile was taken, or why it has none.
pub const TUNING_KEY: &str = "perf_profile";

/// The run's profile from the guest's `perf-fold.<i>` sections, with the
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
    let profile = from_folded(of(sections, "perf-fold").map(|s| s.body.as_str()));
    let note = match &profile {
        Some((_, samples)) => {
            format!(
                "{EVENT} at {SAMPLE_HZ} Hz with call chains: {samples} samples of one extra \
                 execution per invocation, after the measured ones"
            )
        }
        None => {
            let said: Vec<&str> = of(sections, "perf-record")
                .chain(of(sections, "perf-fold"))
                .map(|s| s.body.trim())
                .filter(|b| !b.is_empty())
                .collect();
            format!("none: perf recorded no samples ({})", said.join("; "))
        }
    };
    (profile.map(|(p, _)| p), note)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = "kbot-bench \n\tffffffff8162abb6 clear_page_erms\n\tffffffff816e73c7 pipe_write\n\tffffffff816d8e90 vfs_write\n\t  20ca3 [unknown]\n\t   80c5 [unknown]\n\nkbot-bench \n\tffffffff816e73c7 pipe_write\n\tffffffff816d8e90 vfs_write\n\t  20ca3 [unknown]\n\nswapper/1 \n\tffffffff81000001 default_idle.isra.0\n\nkbot-bench \n\tffffffff8162abb6 clear_page_erms\n\tffffffff816e73c7 pipe_write\n\tffffffff816d8e90 vfs_write\n\t 1 [unknown]\n\nswapper/0 \n\tffffffff81000001 default_idle.isra.0\n";

    /// The guest's awk, run here by the host's busybox (the same program).
    fn fold(script: &str) -> String {
        let busybox = std::path::Path::new("/bin/busybox");
        assert!(
            busybox.is_file() || std::env::var_os("CI").is_none(),
            "busybox is not installed (scripts/install-test-deps)"
        );
        let mut child = std::process::Command::new(busybox)
            .args(["awk", FOLD_AWK])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("busybox awk");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("write");
        let out = child.wait_with_output().expect("awk");
        assert!(out.status.success());
        let mut lines: Vec<String> = String::from_utf8(out.stdout)
            .expect("utf-8")
            .lines()
            .map(str::to_string)
            .collect();
        lines.sort();
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn samples_fold_root_first_with_counts() {
        if !std::path::Path::new("/bin/busybox").is_file() {
            crate::process::skip_outside_ci("busybox is not installed (scripts/install-test-deps)");
            return;
        }
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
        let folded = "kbot-bench;[unknown];vfs_write;pipe_write 1\n\
             kbot-bench;[unknown];vfs_write;pipe_write;clear_page_erms 2\n\
             swapper;default_idle.isra.0 2\n";
        let (p, samples) = from_folded([folded, folded].into_iter()).expect("samples");
        assert_eq!(samples, 10);
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
        assert!(l.starts_with("perf record -q -a -g -e cpu-clock -F 1000 -o /tmp/perf.1.data -- 'kbot-bench' 'sched-pipe' >/dev/null"));
        assert!(
            l.contains("section perf-fold.1 fold /tmp/perf.1.data\n"),
            "{l}"
        );
    }
}
