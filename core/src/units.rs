//! The one grammar for the values a user writes: sizes, durations, counts
//! and percentages, in job files (program options, `test_memory_size`,
//! `need_memory`, `need_page_size`) and in the agent's guest settings.
//!
//! # Numbers
//!
//! A value is a number, optionally followed by a unit; blanks around the
//! value and between number and unit are ignored. The number is a
//! non-negative decimal (`512`, `1.5`, `.5`, `+4`). A whole number is
//! scaled exactly; a fraction is scaled and then truncated to an integer
//! (`1.5k` is 1536 bytes, `0.3k` is 307). A result that does not fit in 64
//! bits is refused, never wrapped or saturated.
//!
//! # Sizes ([`size`])
//!
//! Bytes, with binary multiples as LKP's `to_byte` means them:
//!
//! | unit | bytes |
//! |---|---|
//! | none, `b` | 1 |
//! | `k` | 1024 |
//! | `m` | 1024² |
//! | `g` | 1024³ |
//! | `t` | 1024⁴ |
//!
//! Units are case-insensitive, and the multiplier letter may be followed by
//! `b`, `i` or `ib`: `512k`, `512K`, `512KB`, `512Ki` and `512KiB` are all
//! 524288 bytes. `KB` is 1024 bytes, not 1000: kernel and LKP usage, not SI.
//! (The hardware-need parser this grammar replaced ignored any trailing run
//! of `i` and `b` letters after the multiplier; so does this one, so that
//! nothing it accepted is refused now.)
//!
//! # Durations ([`seconds`])
//!
//! Seconds, with LKP's `to_seconds` units, lowercase only: none or `s`
//! (seconds), `m` (minutes), `h` (hours), `d` (days). `300`, `300s` and
//! `5m` are the same duration.
//!
//! # Counts ([`Count`]) and percentages ([`percent`])
//!
//! A task or thread count is a whole number (`8`), `N%` of the machine's
//! logical CPUs (`20%`) or `Nc`, N times the cores of one socket (`1c`), as
//! LKP's `params/nr_threads`; it resolves against a machine to at least 1.
//! A plain integer option may carry a trailing unit word that is ignored
//! (`loops: 10000000ops`, [`leading_integer`]).
//!
//! # Not here
//!
//! `kbot-bench` (`workloads/`) parses its own command-line sizes with the
//! grammar of the upstream tool it mirrors (lmbench's `k`/`m` suffixes, for
//! instance) and depends on nothing of kbot, so it keeps its own parser.

/// Bytes of a size (see the module doc): `65536`, `64k`, `64K`, `64KB`,
/// `64KiB`, `1.5m`, `2GiB`. `None` for anything else, including negative
/// numbers and sizes of 2⁶⁴ bytes or more.
pub fn size(text: &str) -> Option<u64> {
    let (number, unit) = number_and_unit(text)?;
    let unit = unit.to_ascii_lowercase();
    let (shift, rest) = match unit.chars().next() {
        Some('k') => (10, &unit[1..]),
        Some('m') => (20, &unit[1..]),
        Some('g') => (30, &unit[1..]),
        Some('t') => (40, &unit[1..]),
        _ => (0, unit.as_str()),
    };
    if !rest.chars().all(|c| c == 'i' || c == 'b') {
        return None;
    }
    scale(number, 1u64 << shift)
}

/// The largest unit that divides `bytes` exactly: `64K`, `4G`, `1536`.
/// [`size`] reads every result back into `bytes`.
pub fn human_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes != 0 && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// Seconds of a duration (see the module doc): `90`, `90s`, `5m`, `2h`,
/// `1d`, `1.5m`. `None` for anything else.
pub fn seconds(text: &str) -> Option<u64> {
    let (number, unit) = number_and_unit(text)?;
    let factor = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return None,
    };
    scale(number, factor)
}

/// `N%` as N: a finite, non-negative number followed by `%`.
pub fn percent(text: &str) -> Option<f64> {
    let n: f64 = text.trim().strip_suffix('%')?.trim_end().parse().ok()?;
    (n.is_finite() && n >= 0.0).then_some(n)
}

/// A whole number optionally followed by letters that are ignored (`8`,
/// `10000000ops`), as LKP's `/(\d+)[a-z]+$/` rule.
pub fn leading_integer(text: &str) -> Option<u64> {
    let digits = text
        .trim()
        .trim_end_matches(|c: char| c.is_ascii_alphabetic());
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A task or thread count as written, before it meets a machine (the forms
/// LKP's `params/nr_threads` accepts).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Count {
    /// `8`: that many.
    Fixed(u64),
    /// `20%`: that share of the logical CPUs.
    PercentOfCpus(f64),
    /// `2c`: that many times the cores of one socket.
    TimesCoresPerSocket(f64),
}

impl Count {
    /// Reads `8`, `20%`, `1c` or `0.5c`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Count> {
        if let Some(p) = percent(text) {
            return Some(Count::PercentOfCpus(p));
        }
        if let Some(c) = text.trim().strip_suffix('c') {
            let n: f64 = c.trim_end().parse().ok()?;
            return (n.is_finite() && n >= 0.0).then_some(Count::TimesCoresPerSocket(n));
        }
        leading_integer(text).map(Count::Fixed)
    }

    /// The count on a machine with `cpus` logical CPUs and
    /// `cores_per_socket` cores per socket, truncated, and at least 1: LKP
    /// truncates `20%` of 2 CPUs to 0, but a count of 0 cannot run.
    pub fn resolve(self, cpus: u32, cores_per_socket: u32) -> u64 {
        let n = match self {
            Count::Fixed(n) => n,
            Count::PercentOfCpus(p) => (p * f64::from(cpus) / 100.0) as u64,
            Count::TimesCoresPerSocket(c) => (c * f64::from(cores_per_socket)) as u64,
        };
        n.max(1)
    }
}

/// Splits a trimmed value at its first letter into the number (trimmed)
/// and the unit.
fn number_and_unit(text: &str) -> Option<(&str, &str)> {
    let text = text.trim();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    Some((number.trim(), unit))
}

/// `number` times `factor` as a whole number: exactly for whole numbers,
/// truncated for fractions; `None` when it is not a non-negative number or
/// the product reaches 2⁶⁴.
fn scale(number: &str, factor: u64) -> Option<u64> {
    if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
        return number.parse::<u64>().ok()?.checked_mul(factor);
    }
    let n: f64 = number.parse().ok()?;
    let product = n * factor as f64;
    (n.is_finite() && n >= 0.0 && product < u64::MAX as f64).then_some(product as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_size_unit_in_every_spelling() {
        for (letter, shift) in [("", 0), ("k", 10), ("m", 20), ("g", 30), ("t", 40)] {
            let upper = letter.to_ascii_uppercase();
            let mut spellings = vec![
                letter.to_string(),
                upper.clone(),
                format!("{letter}b"),
                format!("{upper}B"),
            ];
            if !letter.is_empty() {
                spellings.extend([
                    format!("{upper}i"),
                    format!("{upper}iB"),
                    format!("{letter}ib"),
                    format!("{upper}IB"),
                ]);
            }
            for unit in spellings {
                assert_eq!(size(&format!("3{unit}")), Some(3 << shift), "3{unit}");
                assert_eq!(size(&format!(" 3 {unit} ")), Some(3 << shift), "3 {unit}");
            }
        }
        assert_eq!(size("2GiB"), Some(2 << 30));
        assert_eq!(size("512k"), Some(512 << 10));
        assert_eq!(size("512KiB"), Some(512 << 10));
        assert_eq!(size("4096"), Some(4096));
        assert_eq!(size("1.5m"), Some(1_572_864));
        assert_eq!(size(".5k"), Some(512));
        assert_eq!(size("+4k"), Some(4096));
        assert_eq!(size("0.3k"), Some(307), "fractions truncate");
    }

    #[test]
    fn sizes_that_do_not_fit_are_refused() {
        assert_eq!(size("18446744073709551615"), Some(u64::MAX));
        assert_eq!(size("18446744073709551616"), None);
        assert_eq!(size("16777215T"), Some(16_777_215 << 40));
        assert_eq!(size("16777216T"), None, "2^64 bytes");
        assert_eq!(size("16777216.0T"), None);
        assert_eq!(size("1e400"), None);
        assert_eq!(size("99999999999999999999999999g"), None);
    }

    #[test]
    fn garbage_is_not_a_size() {
        for bad in [
            "", " ", "k", "KiB", "-1k", "-1", "5x", "5kx", "5 k b x", "1.2.3k", "1,5k", "nan",
            "inf", "infinity", "NaNk", "5%", "5e3", "0x10", "k5", "5kk", "5km", "five",
        ] {
            assert_eq!(size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_duration_unit() {
        assert_eq!(seconds("90"), Some(90));
        assert_eq!(seconds("300s"), Some(300));
        assert_eq!(seconds("5m"), Some(300));
        assert_eq!(seconds("2h"), Some(7200));
        assert_eq!(seconds("1d"), Some(86400));
        assert_eq!(seconds("1.5m"), Some(90));
        assert_eq!(seconds(" 8 s "), Some(8));
        for bad in ["", "s", "1w", "5M", "5S", "-5s", "5ms", "1e3", "inf", "5 x"] {
            assert_eq!(seconds(bad), None, "{bad:?}");
        }
        assert_eq!(
            seconds("213503982334601d"),
            Some(213_503_982_334_601 * 86400)
        );
        assert_eq!(seconds("213503982334602d"), None, "overflows");
    }

    #[test]
    fn counts_percentages_and_integers() {
        assert_eq!(Count::parse("8"), Some(Count::Fixed(8)));
        assert_eq!(Count::parse("20%"), Some(Count::PercentOfCpus(20.0)));
        assert_eq!(Count::parse("1c"), Some(Count::TimesCoresPerSocket(1.0)));
        assert_eq!(Count::parse("0.5c"), Some(Count::TimesCoresPerSocket(0.5)));
        for bad in ["", "inf%", "nan%", "-5%", "-1c", "infc", "1.5", "x", "%"] {
            assert_eq!(Count::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Count::PercentOfCpus(20.0).resolve(224, 56), 44);
        assert_eq!(Count::PercentOfCpus(20.0).resolve(2, 2), 1, "at least 1");
        assert_eq!(Count::TimesCoresPerSocket(1.0).resolve(224, 56), 56);
        assert_eq!(Count::Fixed(0).resolve(8, 4), 1);
        assert_eq!(leading_integer("10000000ops"), Some(10_000_000));
        assert_eq!(leading_integer("8"), Some(8));
        assert_eq!(leading_integer("ops"), None);
        assert_eq!(leading_integer("1.5"), None);
        assert_eq!(leading_integer("99999999999999999999"), None);
        assert_eq!(percent("20%"), Some(20.0));
        assert_eq!(percent("20"), None);
    }

    /// The job model's unit checks, from before the grammar moved here.
    #[test]
    fn lkp_unit_conversions() {
        assert_eq!(size("64k"), Some(65536));
        assert_eq!(size("1.5m"), Some(1_572_864));
        assert_eq!(size("2G"), Some(2 << 30));
        assert_eq!(size("512"), Some(512));
        assert_eq!(size("5x"), None);
        assert_eq!(size("k"), None);
        assert_eq!(size("-1k"), None);
        assert_eq!(seconds("300s"), Some(300));
        assert_eq!(seconds("5m"), Some(300));
        assert_eq!(seconds("2h"), Some(7200));
        assert_eq!(seconds("1d"), Some(86400));
        assert_eq!(seconds("90"), Some(90));
        assert_eq!(seconds("1w"), None);
        assert_eq!(leading_integer("10000000ops"), Some(10_000_000));
        assert_eq!(leading_integer("ops"), None);
        assert_eq!(leading_integer("1.5"), None);
        assert!(percent("20%").is_some_and(|p| p == 20.0));
        assert!(percent("nan%").is_none());
        assert!(percent("-5%").is_none());
        assert!(Count::parse("inf%").is_none());
        assert!(size("1e400").is_none());
    }

    /// The hardware needs' size checks, from before the grammar moved here.
    #[test]
    fn sizes_read_as_lkp_writes_them() {
        assert_eq!(size("512"), Some(512));
        assert_eq!(size("64K"), Some(64 << 10));
        assert_eq!(size("4G"), Some(4 << 30));
        assert_eq!(size("300MB"), Some(300 << 20));
        assert_eq!(size("2GiB"), Some(2 << 30));
        assert_eq!(size("1.5M"), Some(1536 << 10));
        assert_eq!(size("lots"), None);
        assert_eq!(size("-1G"), None);
        assert_eq!(human_size(65536), "64K");
        assert_eq!(human_size(4 << 30), "4G");
        assert_eq!(human_size(1536), "1536");
    }

    #[test]
    fn human_sizes_pick_the_largest_exact_unit() {
        assert_eq!(human_size(65536), "64K");
        assert_eq!(human_size(4 << 30), "4G");
        assert_eq!(human_size(3 << 40), "3T");
        assert_eq!(human_size(1536), "1536");
        assert_eq!(human_size(0), "0");
    }

    /// The size parsers this grammar replaced, kept verbatim as oracles:
    /// everything they accepted must still mean the same bytes.
    mod before {
        /// The job model's `to_bytes` (LKP's `to_byte`).
        pub fn job_to_bytes(v: &str) -> Option<u64> {
            let (n, suffix) = number_and_suffix(v)?;
            let unit: f64 = match suffix.to_ascii_lowercase().as_str() {
                "" | "b" => 1.0,
                "k" | "kb" => 1024.0,
                "m" | "mb" => 1024.0 * 1024.0,
                "g" | "gb" => 1024.0 * 1024.0 * 1024.0,
                "t" | "tb" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
                _ => return None,
            };
            let bytes = n * unit;
            (bytes < u64::MAX as f64).then_some(bytes as u64)
        }

        /// The job model's `to_seconds` (LKP's `to_seconds`).
        pub fn job_to_seconds(v: &str) -> Option<u64> {
            let (n, suffix) = number_and_suffix(v)?;
            let unit = match suffix {
                "" | "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                "d" => 86400.0,
                _ => return None,
            };
            let secs = n * unit;
            (secs < u64::MAX as f64).then_some(secs as u64)
        }

        fn number_and_suffix(v: &str) -> Option<(f64, &str)> {
            let split = v
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(v.len());
            let (num, suffix) = v.split_at(split);
            let n: f64 = num.parse().ok()?;
            (n.is_finite() && n >= 0.0).then_some((n, suffix))
        }

        /// The hardware needs' `size` (`need_memory`, `need_page_size`).
        pub fn needs_size(text: &str) -> Option<u64> {
            let text = text.trim();
            let split = text
                .find(|c: char| c.is_ascii_alphabetic())
                .unwrap_or(text.len());
            let (number, unit) = text.split_at(split);
            let shift = match unit.to_ascii_uppercase().trim_end_matches(['B', 'I']) {
                "" => 0,
                "K" => 10,
                "M" => 20,
                "G" => 30,
                "T" => 40,
                _ => return None,
            };
            let value: f64 = number.trim().parse().ok()?;
            let bytes = value * (1u64 << shift) as f64;
            (value.is_finite() && value >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
        }

        /// The agent's guest page size, before its power-of-two check.
        pub fn agent_page_size(s: &str) -> Option<u64> {
            let t = s.trim();
            let (digits, mult) = match t.strip_suffix(['K', 'k']) {
                Some(d) => (d, 1024),
                None => (t, 1),
            };
            digits.parse::<u64>().ok()?.checked_mul(mult)
        }
    }

    /// Values that look like sizes and durations, with every unit spelling
    /// and the slips a user makes (signs, blanks, doubled letters).
    fn plausible() -> impl Strategy<Value = String> {
        "[ ]?[+-]?[0-9]{0,7}(\\.[0-9]{0,3})?[ ]?[kKmMgGtTbBiIsShHdD%x]{0,4}[ ]?"
    }

    proptest! {
        #[test]
        fn sizes_accepted_before_are_accepted_alike(text in plausible()) {
            for (name, old) in [
                ("job", before::job_to_bytes(&text)),
                ("needs", before::needs_size(&text)),
                ("agent", before::agent_page_size(&text)),
            ] {
                if let Some(bytes) = old {
                    prop_assert_eq!(size(&text), Some(bytes), "{} accepted {:?}", name, text);
                }
            }
        }

        #[test]
        fn durations_accepted_before_are_accepted_alike(text in plausible()) {
            if let Some(secs) = before::job_to_seconds(&text) {
                prop_assert_eq!(seconds(&text), Some(secs), "{:?}", text);
            }
        }

        #[test]
        fn every_size_reads_back_from_its_human_form(bytes in any::<u64>()) {
            prop_assert_eq!(size(&human_size(bytes)), Some(bytes));
        }

        #[test]
        fn whole_sizes_round_trip_in_every_unit(n in 0u64..(1 << 24), shift in 0usize..5) {
            let units = ["", "K", "M", "G", "T"];
            let text = format!("{n}{}", units[shift]);
            prop_assert_eq!(size(&text), Some(n << (10 * shift)));
            if shift > 0 {
                prop_assert_eq!(size(&format!("{text}iB")), Some(n << (10 * shift)));
            }
        }

        #[test]
        fn whole_durations_scale_exactly(n in 0u64..(1 << 40)) {
            prop_assert_eq!(seconds(&format!("{n}m")), Some(n * 60));
            prop_assert_eq!(seconds(&format!("{n}d")), Some(n * 86400));
        }

        #[test]
        fn any_text_is_read_without_panicking(text in any::<String>()) {
            let _ = (size(&text), seconds(&text), Count::parse(&text), leading_integer(&text));
        }
    }
}
