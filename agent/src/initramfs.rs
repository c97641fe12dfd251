//! The guest's initramfs: an uncompressed newc cpio archive holding a static
//! busybox (shell, mount, reboot), the static kbot-bench and an /init script
//! that runs the workload and sends everything back over the results channel
//! (the second serial port ttyS1 on x86_64, the virtio console hvc0 on
//! aarch64) in [`crate::console`] sections.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use kbot_core::programs::{Invocation, Repeat};
use kbot_core::text::sh_quote;

use crate::console::{BEGIN, DONE_MARKER, END, INIT_MARKER, MEASURE_MARKER};
use crate::error::{AgentError, Result};
use crate::guest_profile;

/// Busybox applets /init uses, installed as symlinks in /bin.
const APPLETS: &[&str] = &[
    "sh", "mount", "cat", "uname", "reboot", "grep", "cut", "sleep", "mkdir", "poweroff", "od",
    "awk", "rm",
];

/// Prints the page size the kernel runs with: `AT_PAGESZ` (6) of the
/// auxiliary vector, read as native 8-byte words (busybox has no getconf).
const PAGESIZE_FN: &str = "pagesize() { set -- $(od -An -tu8 -v /proc/self/auxv); \
while [ $# -gt 1 ]; do [ \"$1\" = 6 ] && { echo \"$2\"; return 0; }; shift 2; done; return 1; }\n";

/// `snap before|after`: the uptime and the monitors' files
/// ([`crate::monitors::Snapshot`]) as `<file>.<when>` sections; the gauges only
/// after the runs, and counters first after them so that what the gauges'
/// output costs stays out of the counted interval. A file the kernel lacks
/// gives no section.
fn snap_fn() -> String {
    use crate::monitors::Snapshot;
    format!(
        "snap() {{ g=; [ $1 = after ] && g=\"{}\"; for f in uptime {} $g; do \
         [ -e /proc/$f ] && section $f.$1 cat /proc/$f; done; }}\n",
        Snapshot::GAUGES.join(" "),
        Snapshot::COUNTERS.join(" ")
    )
}

/// Turns schedstats on where the kernel has them (CONFIG_SCHEDSTATS), for
/// warm-up and measured runs alike: /proc/schedstat's event counters stay 0
/// without it.
const SCHEDSTATS_ON: &str =
    "[ -e /proc/sys/kernel/sched_schedstats ] && echo 1 >/proc/sys/kernel/sched_schedstats\n";

/// The /init shell script for a workload: `warmup` executions of each
/// invocation first (their output in `warmup.<i>.<n>` sections, which are
/// not parsed), then the monitors' `before` snapshot and the measured runs.
/// Everything but the progress markers goes to `results` (the guest's
/// results channel device), beginning with the guest's `uname -m` and page
/// size, which the agent checks against its fingerprint. With `profile`, one
/// more execution of each invocation runs under perf after the monitors'
/// last snapshot ([`crate::guest_profile`]), outside what is measured.
pub fn init_script(plan: &[Invocation], warmup: u32, results: &str, profile: bool) -> String {
    let mut s = String::from(
        "#!/bin/sh\n\
         export PATH=/bin\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sysfs /sys\n\
         mount -t devtmpfs devtmpfs /dev 2>/dev/null\n\
         mount -t tmpfs tmpfs /tmp 2>/dev/null\n",
    );
    s.push_str(&format!("echo {INIT_MARKER}\n"));
    // A virtio console's hvc0 appears a moment after /init starts (its
    // port is announced by the host) and cannot be opened until then; a
    // serial port is there at once. Up to 10 s of guest time, then the
    // console takes the results (the agent then finds no sections and says
    // so). The trial open is in a subshell: a failed redirection of `:` (a
    // special builtin) ends a non-interactive shell, here /init.
    s.push_str(&format!(
        "R={results}\n\
         i=0; while ! {{ [ -c $R ] && ( : >$R ) 2>/dev/null; }} && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\n\
         [ -c $R ] || R=/dev/console\n"
    ));
    s.push_str(&format!(
        "section() {{ name=$1; shift; echo \"{BEGIN}$name\"; \"$@\"; rc=$?; echo \"{END}$name rc=$rc\"; }}\n\
         secs() {{ cut -d. -f1 /proc/uptime; }}\n\
         quiet() {{ \"$@\" >/dev/null 2>&1; }}\n"
    ));
    s.push_str(&snap_fn());
    s.push_str(SCHEDSTATS_ON);
    s.push_str(PAGESIZE_FN);
    s.push_str(
        "{\nsection uname uname -r\nsection machine uname -m\nsection page_size pagesize\n\
         section nproc grep -c ^processor /proc/cpuinfo\n",
    );
    if warmup > 0 {
        for (i, inv) in plan.iter().enumerate() {
            s.push_str(&warmup_lines(i, inv, warmup));
        }
    }
    s.push_str(&format!(
        "echo {MEASURE_MARKER} >/dev/console\nsnap before\n"
    ));
    for (i, inv) in plan.iter().enumerate() {
        s.push_str(&run_lines(i, inv));
    }
    s.push_str("snap after\n");
    if profile {
        s.push_str(guest_profile::FOLD_FN);
        for (i, inv) in plan.iter().enumerate() {
            s.push_str(&guest_profile::script_lines(i, &argv(inv)));
        }
    }
    s.push_str("} > $R 2>&1\n");
    s.push_str(&format!("echo {DONE_MARKER}\nreboot -f\n"));
    s
}

/// The shell lines that run invocation `i` as its [`Repeat`] says, each
/// execution in its own `output.<i>.<n>` section (stderr in `stderr.<i>.<n>`,
/// or in the output where the tool reports there,
/// [`Invocation::output_includes_stderr`]).
fn run_lines(i: usize, inv: &Invocation) -> String {
    let stderr = if inv.output_includes_stderr() {
        "2>&1".to_string()
    } else {
        format!("2>/tmp/err.{i}.$n")
    };
    let once = format!(
        "section output.{i}.$n {} {stderr}\nsection stderr.{i}.$n cat /tmp/err.{i}.$n\nn=$((n+1))\n",
        argv(inv)
    );
    match inv.repeat {
        Repeat::Times(times) => format!("n=0\nwhile [ $n -lt {} ]; do\n{once}done\n", times.max(1)),
        Repeat::ForSeconds(secs) => format!(
            "n=0\nstart=$(secs)\nwhile :; do\n{once}[ $(( $(secs) - start )) -ge {secs} ] && break\ndone\n"
        ),
    }
}

/// `times` discarded executions of invocation `i`, whatever its [`Repeat`].
fn warmup_lines(i: usize, inv: &Invocation, times: u32) -> String {
    format!(
        "n=0\nwhile [ $n -lt {times} ]; do\nsection warmup.{i}.$n quiet {}\nn=$((n+1))\ndone\n",
        argv(inv)
    )
}

fn argv(inv: &Invocation) -> String {
    std::iter::once(inv.program.as_str())
        .chain(inv.args.iter().map(String::as_str))
        .map(sh_quote)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The programs the initramfs carries besides /init.
pub struct Binaries<'a> {
    pub busybox: &'a Path,
    pub kbot_bench: &'a Path,
    /// The static perf of the profiled execution, when there is one.
    pub perf: Option<&'a Path>,
    /// The stress-ng tree ([`stress_ng_tree`]), copied to the archive's root
    /// as it is laid out: `bin/stress-ng`, its libraries and the loader.
    pub stress_ng: Option<&'a Path>,
}

/// Where the stress-ng binary is in its tree, and so in the guest (on /init's
/// `PATH`).
pub const STRESS_NG_BIN: &str = "bin/stress-ng";

/// The stress-ng tree a plan needs: none unless an invocation runs
/// stress-ng, whose ~30 MiB of binary and libraries would otherwise slow
/// every boot; an error when one does and the agent has no tree.
pub fn stress_ng_tree<'a>(plan: &[Invocation], tree: Option<&'a Path>) -> Result<Option<&'a Path>> {
    if !plan.iter().any(|inv| inv.program == "stress-ng") {
        return Ok(None);
    }
    tree.map(Some).ok_or_else(|| {
        AgentError::Config(
            "the job runs stress-ng, and this agent has no guest stress-ng: install one with \
             scripts/build-guest-stress-ng and give its directory in --guest-stress-ng \
             (KBOT_GUEST_STRESS_NG)"
                .to_string(),
        )
    })
}

/// Every entry of `root`, parents before children, as (path relative to
/// `root`, metadata), symlinks not followed.
fn tree_entries(root: &Path) -> Result<Vec<(std::path::PathBuf, std::fs::Metadata)>> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let io = |e| AgentError::io(format!("reading {}", dir.display()), e);
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .map_err(io)?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()
            .map_err(io)?;
        names.sort();
        for path in names {
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| AgentError::io(format!("reading {}", path.display()), e))?;
            if meta.is_dir() {
                todo.push(path.clone());
            }
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            out.push((rel, meta));
        }
    }
    // Parents first: the kernel's unpacker does not create missing directories.
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Adds the stress-ng tree under the archive's root, keeping the
/// directories the archive already has.
fn add_tree<W: Write>(cpio: &mut Cpio<W>, root: &Path, have: &[&str]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for (rel, meta) in tree_entries(root)? {
        let name = rel
            .to_str()
            .ok_or_else(|| AgentError::Config(format!("{} is not UTF-8", rel.display())))?;
        let path = root.join(&rel);
        if meta.is_dir() {
            if !have.contains(&name) {
                cpio.entry(name, 0o040755, NO_DEV, &[])?;
            }
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path)
                .map_err(|e| AgentError::io(format!("reading {}", path.display()), e))?;
            let target = target.as_os_str().as_encoded_bytes().to_vec();
            cpio.entry(name, 0o120777, NO_DEV, &target)?;
        } else if meta.is_file() {
            let data = std::fs::read(&path)
                .map_err(|e| AgentError::io(format!("reading {}", path.display()), e))?;
            let mode = if meta.permissions().mode() & 0o111 != 0 {
                0o100755
            } else {
                0o100644
            };
            cpio.entry(name, mode, NO_DEV, &data)?;
        }
    }
    Ok(())
}

/// Writes the initramfs to `out`.
pub fn write(out: &Path, bins: &Binaries, init: &str) -> Result<()> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| AgentError::io(format!("reading {}", p.display()), e))
    };
    let (busybox, bench) = (read(bins.busybox)?, read(bins.kbot_bench)?);
    let perf = bins.perf.map(read).transpose()?;
    let file =
        File::create(out).map_err(|e| AgentError::io(format!("creating {}", out.display()), e))?;
    let mut cpio = Cpio {
        out: BufWriter::new(file),
        ino: 1,
    };
    const DIRS: [&str; 5] = ["bin", "dev", "proc", "sys", "tmp"];
    for dir in DIRS {
        cpio.entry(dir, 0o040755, NO_DEV, &[])?;
    }
    // The kernel opens /dev/console for init before devtmpfs is mounted.
    cpio.entry("dev/console", 0o020600, (5, 1), &[])?;
    cpio.entry("init", 0o100755, NO_DEV, init.as_bytes())?;
    cpio.entry("bin/busybox", 0o100755, NO_DEV, &busybox)?;
    cpio.entry("bin/kbot-bench", 0o100755, NO_DEV, &bench)?;
    if let Some(perf) = &perf {
        cpio.entry(guest_profile::GUEST_PATH, 0o100755, NO_DEV, perf)?;
        let fold = guest_profile::FOLD_AWK.as_bytes();
        cpio.entry(guest_profile::FOLD_AWK_PATH, 0o100644, NO_DEV, fold)?;
    }
    for applet in APPLETS {
        cpio.entry(&format!("bin/{applet}"), 0o120777, NO_DEV, b"busybox")?;
    }
    if let Some(tree) = bins.stress_ng {
        add_tree(&mut cpio, tree, &DIRS)?;
    }
    cpio.entry("TRAILER!!!", 0, NO_DEV, &[])?;
    cpio.out
        .flush()
        .map_err(|e| AgentError::io("writing the initramfs", e))
}

/// (major, minor) of entries that are not device nodes.
const NO_DEV: (u32, u32) = (0, 0);

/// A newc ("070701") cpio writer.
struct Cpio<W: Write> {
    out: W,
    ino: u32,
}

impl<W: Write> Cpio<W> {
    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) -> Result<()> {
        let size = u32::try_from(data.len())
            .map_err(|_| AgentError::Config(format!("{name} is too large for cpio")))?;
        let namesize = name.len() + 1;
        let nlink = if mode & 0o170000 == 0o040000 { 2 } else { 1 };
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev.0, rdev.1, namesize, 0
        );
        self.ino += 1;
        let w = &mut self.out;
        let io = |e| AgentError::io("writing the initramfs", e);
        w.write_all(header.as_bytes()).map_err(io)?;
        w.write_all(name.as_bytes()).map_err(io)?;
        w.write_all(&[0]).map_err(io)?;
        w.write_all(&[0; 3][..pad4(110 + namesize)]).map_err(io)?;
        w.write_all(data).map_err(io)?;
        w.write_all(&[0; 3][..pad4(data.len())]).map_err(io)
    }
}

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use kbot_core::parsers::Tool;
    use std::process::Command;

    fn inv(args: &[&str], repeat: Repeat) -> Invocation {
        Invocation {
            program: "kbot-bench".into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            repeat,
            parser: Tool::KbotBenchJson,
            context: kbot_core::parsers::ParseContext::new("lmbench3"),
        }
    }

    /// `snap` sends every monitor file, counters both times and gauges
    /// after the runs only; schedstats are switched on where they exist.
    #[test]
    fn snap_covers_the_monitors_files() {
        let snap = snap_fn();
        for f in crate::monitors::Snapshot::COUNTERS
            .iter()
            .chain(crate::monitors::Snapshot::GAUGES)
        {
            let mut words = snap.split(|c: char| !c.is_ascii_alphanumeric());
            assert!(words.any(|w| w == *f), "{f}: {snap}");
        }
        assert!(snap.contains(
            "[ $1 = after ] && g=\"meminfo buddyinfo slabinfo\"; \
             for f in uptime vmstat stat interrupts softirqs schedstat $g; do"
        ));
        assert_eq!(
            SCHEDSTATS_ON,
            "[ -e /proc/sys/kernel/sched_schedstats ] && echo 1 >/proc/sys/kernel/sched_schedstats\n"
        );
    }

    /// The snap function run by a shell on this host's /proc: its sections
    /// make the snapshots the agent reads, and a missing file none.
    #[test]
    fn snap_sections_make_snapshots() -> Result<()> {
        let shell = if Path::new("/bin/busybox").is_file() {
            vec!["/bin/busybox", "sh"]
        } else {
            vec!["sh"]
        };
        let script = format!(
            "section() {{ name=$1; shift; echo \"{BEGIN}$name\"; \"$@\"; rc=$?; echo \"{END}$name rc=$rc\"; }}\n{}snap before\nsnap after\n",
            snap_fn()
        );
        let out = crate::process::output(
            Command::new(shell[0])
                .args(&shell[1..])
                .arg("-c")
                .arg(script),
        )?;
        let sections = crate::console::sections(&out);
        let snap = |when: &str| {
            crate::monitors::Snapshot::from_files(|f| {
                sections
                    .get(&format!("{f}.{when}"))
                    .map(|s| s.body.clone())
                    .unwrap_or_default()
            })
        };
        assert!(sections.contains_key("uptime.before") && sections.contains_key("uptime.after"));
        assert!(sections.contains_key("meminfo.after"));
        assert!(!sections.contains_key("meminfo.before"));
        assert_eq!(
            sections.contains_key("schedstat.before"),
            Path::new("/proc/schedstat").exists()
        );
        let m = crate::monitors::metrics(&snap("before"), &snap("after"), 1.0);
        assert!(m.contains_key("meminfo.MemTotal"), "{m:?}");
        assert!(m.contains_key("softirqs.TIMER"), "{m:?}");
        assert!(m.contains_key("proc-vmstat.pgfault"), "{m:?}");
        Ok(())
    }

    #[test]
    fn the_script_quotes_arguments_and_repeats() {
        let s = init_script(
            &[
                inv(&["bw_pipe", "--sched", "CUSTOM 0,1"], Repeat::Times(2)),
                inv(&["messaging", "it's"], Repeat::ForSeconds(30)),
            ],
            0,
            "/dev/ttyS1",
            false,
        );
        assert!(s.contains("R=/dev/ttyS1\ni=0; while ! { [ -c $R ] && ( : >$R ) 2>/dev/null; }"));
        assert!(s.contains("section machine uname -m\nsection page_size pagesize\n"));
        assert!(s.contains(
            "section output.0.$n 'kbot-bench' 'bw_pipe' '--sched' 'CUSTOM 0,1' 2>/tmp/err.0.$n"
        ));
        assert!(s.contains("while [ $n -lt 2 ]"));
        assert!(s.contains("'it'\\''s'"));
        assert!(s.contains("-ge 30 ] && break"));
        assert!(s.ends_with("reboot -f\n"));
        assert!(!s.contains("warmup"));
    }

    /// Warm-up executions run before the monitors' first snapshot, and their
    /// output goes to sections the agent does not parse.
    #[test]
    fn warmup_runs_come_first_and_are_discarded() {
        let s = init_script(
            &[inv(&["pipen", "-s", "1"], Repeat::ForSeconds(30))],
            2,
            "/dev/hvc0",
            false,
        );
        assert!(s.contains("R=/dev/hvc0\n"));
        let warm = s.find(
            "while [ $n -lt 2 ]; do\nsection warmup.0.$n quiet 'kbot-bench' 'pipen' '-s' '1'\n",
        );
        let before = s.find("snap before");
        let measured = s.find("section output.0.$n");
        assert!(warm.is_some() && warm < before && before < measured, "{s}");
    }

    /// The profiled executions come after the monitors' last snapshot, one
    /// per invocation, each sending its samples in its own section.
    #[test]
    fn the_profiled_executions_follow_the_measured_ones() {
        let plan = [
            inv(&["sched-pipe", "-l", "5000"], Repeat::Times(3)),
            inv(&["pipen"], Repeat::ForSeconds(1)),
        ];
        let s = init_script(&plan, 0, "/dev/ttyS1", true);
        let after = s.find("snap after").expect("snap after");
        let record = s
            .find("perf record -q -a -g -e cpu-clock -F 1000 -o /tmp/perf.0.data -- 'kbot-bench' 'sched-pipe' '-l' '5000'")
            .expect("record 0");
        let script1 = s
            .find("section perf-fold.1 fold /tmp/perf.1.data")
            .expect("script 1");
        let end = s.find("} > $R").expect("end of the redirected block");
        assert!(after < record && record < script1 && script1 < end, "{s}");
        assert!(!init_script(&plan, 0, "/dev/ttyS1", false).contains("perf"));
    }

    /// The page-size function of /init prints what the kernel says, here
    /// through the host's busybox (the guest's is the same program).
    #[test]
    fn pagesize_reads_the_auxiliary_vector() -> Result<()> {
        let busybox = Path::new("/bin/busybox");
        if !busybox.is_file() {
            crate::process::skip_outside_ci("busybox is not installed (scripts/install-test-deps)");
            return Ok(());
        }
        let dir = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let od = dir.path().join("od");
        std::os::unix::fs::symlink(busybox, &od).map_err(|e| AgentError::io("symlink", e))?;
        let out = crate::process::output(
            Command::new(busybox)
                .args(["sh", "-c"])
                .arg(format!("{PAGESIZE_FN}pagesize"))
                .env("PATH", dir.path()),
        )?;
        let want = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .map(|v| v.to_string());
        assert_eq!(Some(out.trim().to_string()), want);
        Ok(())
    }

    fn stress_ng(args: &[&str]) -> Invocation {
        Invocation {
            program: "stress-ng".into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            repeat: Repeat::Times(1),
            parser: Tool::StressNg,
            context: kbot_core::parsers::ParseContext::new("stress-ng"),
        }
    }

    /// stress-ng runs as upstream's run script has it, its report (on
    /// stderr) in the output section the parser reads; kbot-bench's stderr
    /// stays apart.
    #[test]
    fn stress_ng_runs_with_its_stderr_in_the_output() {
        let plan = [
            stress_ng(&["--timeout", "5", "--switch-method", "pipe", "--switch", "2"]),
            inv(&["pipen"], Repeat::Times(1)),
        ];
        let s = init_script(&plan, 1, "/dev/ttyS1", false);
        assert!(
            s.contains(
                "section output.0.$n 'stress-ng' '--timeout' '5' '--switch-method' 'pipe' '--switch' '2' 2>&1\n"
            ),
            "{s}"
        );
        assert!(
            s.contains("section warmup.0.$n quiet 'stress-ng' '--timeout' '5'"),
            "{s}"
        );
        assert!(
            s.contains("section output.1.$n 'kbot-bench' 'pipen' 2>/tmp/err.1.$n\n"),
            "{s}"
        );
    }

    /// The tree goes into the archive of a plan that runs stress-ng only;
    /// such a plan without a tree is refused with what to install.
    #[test]
    fn the_stress_ng_tree_is_for_stress_ng_plans_only() -> Result<()> {
        let tree = Path::new("/somewhere/stress-ng");
        let bench = [inv(&["pipen"], Repeat::Times(1))];
        assert_eq!(stress_ng_tree(&bench, Some(tree))?, None);
        let sng = [stress_ng(&["--pipe", "2"])];
        assert_eq!(stress_ng_tree(&sng, Some(tree))?, Some(tree));
        let err = stress_ng_tree(&sng, None).expect_err("no tree");
        assert!(
            err.to_string().contains("scripts/build-guest-stress-ng"),
            "{err}"
        );
        Ok(())
    }

    /// The stress-ng tree lands at the archive's root under its own paths:
    /// the binary beside busybox's applets in /bin, the libraries and the
    /// loader where the binary's ELF header and the loader look for them,
    /// new directories before their files and /bin not twice.
    #[test]
    fn the_archive_carries_the_stress_ng_tree() -> Result<()> {
        if !crate::process::on_path("cpio") {
            crate::process::skip_outside_ci("cpio is not installed (scripts/install-test-deps)");
            return Ok(());
        }
        let dir = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let tree = dir.path().join("stress-ng");
        let write = |rel: &str, data: &[u8], mode: u32| -> Result<()> {
            use std::os::unix::fs::PermissionsExt;
            let path = tree.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| AgentError::io("mkdir", e))?;
            }
            std::fs::write(&path, data).map_err(|e| AgentError::io("write", e))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .map_err(|e| AgentError::io("chmod", e))
        };
        write("bin/stress-ng", b"ELF stress-ng", 0o755)?;
        write("lib/x86_64-linux-gnu/libc.so.6", b"ELF libc", 0o644)?;
        write("lib64/ld-linux-x86-64.so.2", b"ELF ld.so", 0o755)?;
        std::os::unix::fs::symlink("libc.so.6", tree.join("lib/x86_64-linux-gnu/libc.so"))
            .map_err(|e| AgentError::io("symlink", e))?;
        let bin = dir.path().join("tool");
        std::fs::write(&bin, b"#!/bin/sh\n").map_err(|e| AgentError::io("write", e))?;
        let out = dir.path().join("initramfs.cpio");
        let bins = Binaries {
            busybox: &bin,
            kbot_bench: &bin,
            perf: None,
            stress_ng: Some(&tree),
        };
        super::write(&out, &bins, "#!/bin/sh\n")?;
        let listing = crate::process::output(
            Command::new("sh")
                .arg("-c")
                .arg(format!("cpio -itv < {}", out.display())),
        )?;
        let names: Vec<&str> = listing
            .lines()
            .filter_map(|l| l.split_whitespace().nth(8))
            .collect();
        let at = |name: &str| names.iter().position(|n| *n == name);
        for name in [
            "bin/stress-ng",
            "lib",
            "lib/x86_64-linux-gnu",
            "lib/x86_64-linux-gnu/libc.so.6",
            "lib/x86_64-linux-gnu/libc.so",
            "lib64",
            "lib64/ld-linux-x86-64.so.2",
        ] {
            assert!(at(name).is_some(), "{name} missing: {listing}");
        }
        assert!(at("lib") < at("lib/x86_64-linux-gnu"));
        assert!(at("lib/x86_64-linux-gnu") < at("lib/x86_64-linux-gnu/libc.so.6"));
        assert_eq!(
            names.iter().filter(|n| **n == "bin").count(),
            1,
            "{listing}"
        );
        let line = |name: &str| {
            listing
                .lines()
                .find(|l| l.split_whitespace().nth(8) == Some(name))
                .unwrap_or_default()
                .to_string()
        };
        assert!(line("bin/stress-ng").starts_with("-rwxr-xr-x"), "{listing}");
        assert!(
            line("lib/x86_64-linux-gnu/libc.so.6").starts_with("-rw-r--r--"),
            "{listing}"
        );
        assert!(
            line("lib/x86_64-linux-gnu/libc.so").contains("-> libc.so.6"),
            "{listing}"
        );
        assert!(line("lib").starts_with("drwxr-xr-x"), "{listing}");
        // Without the tree, the archive has none of it.
        super::write(
            &out,
            &Binaries {
                stress_ng: None,
                ..bins
            },
            "#!/bin/sh\n",
        )?;
        let listing = crate::process::output(
            Command::new("sh")
                .arg("-c")
                .arg(format!("cpio -it < {}", out.display())),
        )?;
        assert!(
            !listing.contains("stress-ng") && !listing.contains("lib64"),
            "{listing}"
        );
        Ok(())
    }

    /// The archive is what GNU cpio reads back, with the right types.
    #[test]
    fn the_archive_lists_with_gnu_cpio() -> Result<()> {
        if !crate::process::on_path("cpio") {
            crate::process::skip_outside_ci("cpio is not installed (scripts/install-test-deps)");
            return Ok(());
        }
        let dir = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let bin = dir.path().join("tool");
        std::fs::write(&bin, b"#!/bin/sh\necho hi\n").map_err(|e| AgentError::io("write", e))?;
        let out = dir.path().join("initramfs.cpio");
        let bins = Binaries {
            busybox: &bin,
            kbot_bench: &bin,
            perf: Some(&bin),
            stress_ng: None,
        };
        write(&out, &bins, "#!/bin/sh\n")?;
        let listing = crate::process::output(
            Command::new("sh")
                .arg("-c")
                .arg(format!("cpio -itv < {}", out.display())),
        )?;
        assert!(
            listing.contains("crw-------") && listing.contains("dev/console"),
            "{listing}"
        );
        assert!(listing.contains("bin/sh -> busybox"), "{listing}");
        assert!(listing.contains(" bin/perf"), "{listing}");
        assert!(listing.contains(" fold.awk"), "{listing}");
        assert!(
            listing
                .lines()
                .any(|l| l.starts_with("-rwxr-xr-x") && l.ends_with(" init")),
            "{listing}"
        );
        Ok(())
    }
}
