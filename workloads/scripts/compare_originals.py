#!/usr/bin/env python3
"""kbot-bench side by side with the C originals Debian does not package.

Builds lmbench (bw_pipe, lat_pipe), will-it-scale (pipe1, context_switch1,
processes and threads) and UnixBench (pipe, through its Run script) from
source into a scratch directory, then runs every row interleaved, original
then kbot-bench, for --rounds rounds, and prints a Markdown table of
min / median / max per tool and the ratio of the medians (kbot / original).

The sources are given by path: a checkout (copied, never built in place), a
bare git repository (its HEAD is exported) or a source archive (.tar,
.tar.gz, .tgz, .tar.xz, .zip). Nothing of theirs is
written outside --scratch. Build needs: gcc, make, libtirpc-dev (lmbench's
lib_*.c include rpc/rpc.h), libhwloc-dev (will-it-scale), perl (Run).

Rows: the originals' defaults and what the LKP job files run on this machine:
lmbench3 -P = 20% of the CPUs (at least 1) and -P all CPUs; will-it-scale
-t 1 and -t all CPUs in process and thread mode; UnixBench pipe with 1 copy
and one per CPU.

lmbench's start-up spends ~30 s measuring the timer (compute_enough,
t_overhead, l_overhead) before any pipe is made. The script skips that with
ENOUGH=100000 LOOP_O=0 TIMING_O=0: 100000 us is the largest value
compute_enough can return and is below bw_pipe's and lat_pipe's own budgets
(MEDIUM 2 s, SHORT 1 s), so the sample length is unchanged; the overhead
corrections are then zero, which is what kbot-bench does (they are ~1 us per
sample). Pass --lmbench-calibrate to keep lmbench's own start-up.

Usage:
  compare_originals.py KBOT_BENCH --lmbench SRC --will-it-scale SRC \\
      --unixbench SRC [--scratch DIR] [--rounds 5] [--only NAME,...] [--list]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_upstream import interleave, lm_bw, lm_lat, loadavg, ub_score, wis_avg  # noqa: E402


def run(cmd, cwd=None, env=None):
    """Runs cmd (a list), returns (stdout+stderr, wall seconds); fails loudly."""
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} in {cwd} exited {p.returncode}:\n{p.stdout[-2000:]}")
    return p.stdout, dt


def unpack(src, dest):
    """Copies a checkout or extracts an archive to dest; returns the tree root
    (the single top directory of an archive, if it has one)."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    if os.path.isfile(os.path.join(src, "HEAD")) and os.path.isdir(os.path.join(src, "objects")):
        # A bare git repository (a mirror): its HEAD tree.
        os.makedirs(dest)
        archive = subprocess.run(["git", "--git-dir", src, "archive", "HEAD"],
                                 stdout=subprocess.PIPE, check=True).stdout
        subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
        return dest
    if os.path.isdir(src):
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".git"), symlinks=True)
        return dest
    os.makedirs(dest)
    if zipfile.is_zipfile(src):
        with zipfile.ZipFile(src) as z:
            z.extractall(dest)
    else:
        with tarfile.open(src) as t:
            t.extractall(dest)
    entries = os.listdir(dest)
    if len(entries) == 1 and os.path.isdir(os.path.join(dest, entries[0])):
        return os.path.join(dest, entries[0])
    return dest


def find_dir(root, marker):
    """The directory under root holding the file `marker` (a relative path)."""
    for d, _, _ in os.walk(root):
        if os.path.exists(os.path.join(d, marker)):
            return d
    raise RuntimeError(f"no {marker} under {root}")


def build_lmbench(src, scratch):
    tree = find_dir(unpack(src, os.path.join(scratch, "lmbench")), "src/bw_pipe.c")
    build = os.path.join(tree, "scripts", "build")
    with open(build) as f:
        text = f.read()
    # Debian's glibc has no Sun RPC: lmbench's own build script carries these
    # two lines commented out; enable them (in the scratch copy only).
    lines = ['LDLIBS="${LDLIBS} -ltirpc"', 'CFLAGS="${CFLAGS} -I/usr/include/tirpc"']
    for line in lines:
        text = text.replace("#" + line, line)
        if line not in text:
            text = re.sub(r"^(\$\{MAKE\} )", line + "\n\\1", text, count=1, flags=re.M)
    with open(build, "w") as f:
        f.write(text)
    env = dict(os.environ, CFLAGS="-O", OS="kbot-compare")
    out, _ = run(["../scripts/build", "../bin/kbot-compare/bw_pipe",
                  "../bin/kbot-compare/lat_pipe"], cwd=os.path.join(tree, "src"), env=env)
    flags = re.findall(r"^\S*cc .*-o \.\./bin/kbot-compare/bw_pipe .*$", out, re.M)
    return os.path.join(tree, "bin", "kbot-compare"), (flags[-1] if flags else "")


def build_wis(src, scratch):
    tree = find_dir(unpack(src, os.path.join(scratch, "will-it-scale")), "tests/context_switch1.c")
    targets = [f"{t}_{m}" for t in ("pipe1", "context_switch1") for m in ("processes", "threads")]
    run(["make", *targets], cwd=tree)
    return tree


def build_unixbench(src, scratch):
    tree = find_dir(unpack(src, os.path.join(scratch, "unixbench")), "src/pipe.c")
    run(["make", "all"], cwd=tree)
    return tree


# Parsers of each tool's own printed number: compare_upstream.py's.

def rows(kb, lm, wis, ub, ncpu, calibrate):
    """(name, unit, original argv, kbot argv, parser, cwd of the original)"""
    p20 = max(1, ncpu * 20 // 100)
    lm_env = [] if calibrate else ["env", "ENOUGH=100000", "LOOP_O=0", "TIMING_O=0"]
    out = []
    why = {}
    for p, w in ((1, "default"), (p20, "LKP 20%"), (ncpu, "all CPUs")):
        why.setdefault(p, []).append(w)
    for p in sorted(why):
        label = f"-P {p} ({', '.join(why[p])})"
        out.append((f"bw_pipe {label}", "MB/s", lm_env + [f"{lm}/bw_pipe", "-P", str(p)],
                    [kb, "bw_pipe", "-P", str(p)], lm_bw, None))
        out.append((f"lat_pipe {label}", "us", lm_env + [f"{lm}/lat_pipe", "-P", str(p)],
                    [kb, "lat_pipe", "-P", str(p)], lm_lat, None))
    for test in ("pipe1", "context_switch1"):
        for mode, suffix in (("process", "processes"), ("thread", "threads")):
            for t in sorted({1, ncpu}):
                out.append((f"{test} -t {t} {mode}", "ops/s (average)",
                            [f"{wis}/{test}_{suffix}", "-t", str(t), "-s", "3"],
                            [kb, test, "--mode", mode, "-t", str(t), "-s", "3"], wis_avg, None))
    for c in sorted({1, ncpu}):
        out.append((f"UnixBench pipe -c {c}", "lps", ["./Run", "pipe", "-c", str(c), "-i", "1"],
                    [kb, "unixbench-pipe", "-c", str(c), "-i", "1"], ub_score, ub))
    return out


def num(x):
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def spread(v):
    return f"{num(min(v))} / **{num(statistics.median(v))}** / {num(max(v))}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kbot", help="kbot-bench binary")
    ap.add_argument("--lmbench", required=True, help="intel/lmbench checkout or archive")
    ap.add_argument("--will-it-scale", required=True, help="will-it-scale checkout or archive")
    ap.add_argument("--unixbench", required=True,
                    help="byte-unixbench checkout or archive (or its UnixBench directory)")
    ap.add_argument("--scratch", default="/tmp/kbot-originals", help="build directory")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated substrings of row names")
    ap.add_argument("--list", action="store_true", help="print the rows and exit")
    ap.add_argument("--lmbench-calibrate", action="store_true",
                    help="let lmbench measure its timer at start-up (~30 s per run)")
    a = ap.parse_args()
    kb = os.path.abspath(a.kbot)
    ncpu = len(os.sched_getaffinity(0))
    os.makedirs(a.scratch, exist_ok=True)
    lm, lm_flags = build_lmbench(a.lmbench, a.scratch)
    wis = build_wis(a.will_it_scale, a.scratch)
    ub = build_unixbench(a.unixbench, a.scratch)
    table = rows(kb, lm, wis, ub, ncpu, a.lmbench_calibrate)
    only = [s for s in a.only.split(",") if s]
    table = [r for r in table if not only or any(o in r[0] for o in only)]
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {ncpu} CPUs, "
          f"load {loadavg():.2f}, {a.rounds} rounds, original then kbot-bench")
    print(f"# lmbench built as: {lm_flags}")
    for name, _, up, kbc, _, _ in table:
        print(f"# {name}: {' '.join(up)}  |  {' '.join(kbc)}")
    if a.list:
        return
    print()
    print("| row | unit | original min / **median** / max | kbot-bench min / **median** / max "
          "| kbot / original | wall s (orig / kbot) | load |")
    print("|---|---|---|---|---|---|---|")
    sys.stdout.flush()
    for name, unit, up_cmd, kb_cmd, parse, cwd in table:
        up, kbv, up_t, kb_t, loads = interleave(
            a.rounds, lambda: run(up_cmd, cwd=cwd), lambda: run(kb_cmd), parse)
        ratio = statistics.median(kbv) / statistics.median(up)
        print(f"| {name} | {unit} | {spread(up)} | {spread(kbv)} | **{ratio:.3f}** "
              f"| {statistics.median(up_t):.0f} / {statistics.median(kb_t):.0f} "
              f"| {min(loads):.1f}-{max(loads):.1f} |")
        print(f"<!-- {name}: original={up} kbot={kbv} -->")
        sys.stdout.flush()
    print()
    print(f"# finished {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load {loadavg():.2f}")


if __name__ == "__main__":
    main()
