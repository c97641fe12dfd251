//! The lines of a kernel build log worth showing, picked by fixed forms
//! only: the compiler's diagnostics (`file:line:col: error:`) with the
//! source excerpt gcc prints under each, the `In function` and `In file
//! included from` lines that lead to one, and make's `*** ... Error` lines.
//! Everything else in a log is whatever the patch's build printed, and a
//! posted patch is a stranger's: the agent puts these lines in a failed
//! build's detail, the server quotes them in its answer.

/// Which diagnostics [`pick`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Errors only (`error:`, `fatal error:`) with their context: what a
    /// failed build's detail leads with, so warnings cannot crowd it out.
    Errors,
    /// Errors, warnings and notes with their context, and make's
    /// `*** ... Error` lines: what an answer quotes.
    Diagnostics,
}

/// The lines of `log` that `keep` asks for, in the log's order, from
/// anywhere in it: under `make -j` the error can stand far above the tail.
pub fn pick(log: &str, keep: Keep) -> Vec<&str> {
    let lines: Vec<&str> = log.lines().collect();
    let mut kept = vec![false; lines.len()];
    for (i, line) in lines.iter().enumerate() {
        if is_wanted(line, keep) {
            kept[i] = true;
            lines[..i]
                .iter()
                .rev()
                .take_while(|l| is_lead_in(l))
                .enumerate()
                .for_each(|(back, _)| kept[i - 1 - back] = true);
            lines[i + 1..]
                .iter()
                .take(2)
                .take_while(|l| is_source_excerpt(l))
                .enumerate()
                .for_each(|(ahead, _)| kept[i + 1 + ahead] = true);
        } else if keep == Keep::Diagnostics && is_make_error(line) {
            kept[i] = true;
        }
    }
    lines
        .into_iter()
        .zip(kept)
        .filter_map(|(line, k)| k.then_some(line))
        .collect()
}

fn is_wanted(line: &str, keep: Keep) -> bool {
    let errors = [": error:", ": fatal error:"];
    let others = [": warning:", ": note:"];
    errors.iter().any(|d| line.contains(d))
        || (keep == Keep::Diagnostics && others.iter().any(|d| line.contains(d)))
}

/// gcc's `file.c: In function 'f':` and `In file included from ...` lines.
fn is_lead_in(line: &str) -> bool {
    line.contains(": In function")
        || line.trim_start().starts_with("In file included from")
        || line.trim_start().starts_with("from ")
}

/// The ` 2844 |  code` and `      |  ^~~` lines gcc prints under a diagnostic.
fn is_source_excerpt(line: &str) -> bool {
    let t = line.trim_start();
    let number = t.trim_start_matches(|c: char| c.is_ascii_digit());
    number.trim_start().starts_with('|')
}

fn is_make_error(line: &str) -> bool {
    line.contains("***") && line.contains("Error")
}

#[cfg(test)]
mod tests {
    use super::{pick, Keep};

    const LOG: &str = "  CC      kernel/sys.o\n\
        ../kernel/sys.c: In function 'kbot_e2e_helper':\n\
        ../kernel/sys.c:10:9: error: 'kbot_e2e_limit' undeclared\n\
        \x20  10 |  return kbot_e2e_limit;\n\
        \x20     |         ^~~~~~~~~~~~~~\n\
        \x20 CC      arch/x86/kernel/smp.o\n\
        fs/pipe.c:3:1: warning: unused variable 'x'\n\
        \x20   3 | int x;\n\
        .config:1303:warning: override: reassigning to symbol 64BIT\n\
        make[1]: Entering directory '/w/objs'\n\
        make: *** [Makefile:250: __sub-make] Error 2\n";

    /// An error comes with the line that leads to it and its excerpt, from
    /// above unrelated lines; warnings and make's lines stay out.
    #[test]
    fn errors_carry_their_context_and_nothing_else() {
        assert_eq!(
            pick(LOG, Keep::Errors),
            [
                "../kernel/sys.c: In function 'kbot_e2e_helper':",
                "../kernel/sys.c:10:9: error: 'kbot_e2e_limit' undeclared",
                "   10 |  return kbot_e2e_limit;",
                "      |         ^~~~~~~~~~~~~~",
            ]
        );
        assert!(pick("  CC      a.o\nmake: *** Error 2", Keep::Errors).is_empty());
    }

    /// Diagnostics add warnings with their excerpts and make's error line,
    /// never kconfig's override chatter (no `: warning:` form) or make's
    /// directory lines.
    #[test]
    fn diagnostics_add_warnings_and_make_errors() {
        let got = pick(LOG, Keep::Diagnostics);
        assert_eq!(got.len(), 7, "{got:?}");
        assert_eq!(got[4], "fs/pipe.c:3:1: warning: unused variable 'x'");
        assert_eq!(got[5], "    3 | int x;");
        assert_eq!(got[6], "make: *** [Makefile:250: __sub-make] Error 2");
    }

    /// A log of free text has nothing of a known form.
    #[test]
    fn free_text_is_not_picked() {
        assert!(pick("#kbot invalid\nBUY NOW http://x\n", Keep::Diagnostics).is_empty());
    }
}
