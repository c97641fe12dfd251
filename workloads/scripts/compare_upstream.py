#!/usr/bin/env python3
"""Side-by-side runs of kbot-bench and the upstream tools Debian packages.

Runs each pair interleaved (upstream, kbot, upstream, kbot, ...) so that load
changes on a shared machine hit both alike, then the kbot-only workloads
(lmbench, will-it-scale, UnixBench have no Debian package) for their spread.
Prints a Markdown report: min/median/max of the metric, median wall time per
run, the kbot/upstream ratio of medians, and the load average seen.

Usage: compare_upstream.py KBOT_BENCH_BINARY [--runs 5] [--only NAME,...]
Needs: rt-tests (hackbench), linux-perf (perf), pipebench, coreutils dd.
"""
import argparse
import re
import statistics
import subprocess
import sys
import time

UNITS = {"": 1, "k": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def sh(cmd):
    """Runs a shell command, returns (combined output, wall seconds)."""
    t0 = time.monotonic()
    p = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{cmd!r} exited {p.returncode}: {p.stdout[-500:]}")
    return p.stdout, dt


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def interleave(rounds, run_up, run_kb, parse):
    """Runs the upstream tool then kbot-bench, `rounds` times; each run_* returns
    (output, wall seconds). Returns the values, wall times and load averages."""
    up, kb, up_t, kb_t, loads = [], [], [], [], []
    for _ in range(rounds):
        loads.append(loadavg())
        for run, values, times in ((run_up, up, up_t), (run_kb, kb, kb_t)):
            out, dt = run()
            values.append(parse(out))
            times.append(dt)
    return up, kb, up_t, kb_t, loads


def hackbench_time(out):
    return float(re.search(r"^Time: ([0-9.]+)", out, re.M).group(1))


def perf_total(out):
    return float(re.search(r"Total time: ([0-9.]+) \[sec\]", out).group(1))


def perf_ops(out):
    return float(re.search(r"^\s*([0-9]+) ops/sec", out, re.M).group(1))


def pipebench_rate(out):
    m = re.search(r"Piped .* in .*: +([0-9.]+) ([kMGT]?)B/second", out)
    return float(m.group(1)) * UNITS[m.group(2)] / 2**20


def lm_bw(out):
    return float(re.search(r"Pipe bandwidth: ([0-9.]+) MB/sec", out).group(1))


def lm_lat(out):
    return float(re.search(r"Pipe latency: ([0-9.]+) microseconds", out).group(1))


def wis_avg(out):
    return float(re.search(r"^average:([0-9]+)", out, re.M).group(1))


def ub_score(out):
    return float(re.search(r"^Pipe Throughput\s+([0-9.]+) lps", out, re.M).group(1))


def pipen_mbs(out):
    # MB/s from the JSON report
    return float(re.search(r'"pipen.MB/sec":([0-9.e+]+)', out).group(1))


def pairs(kb):
    """(name, metric, unit, upstream cmd, kbot cmd, parser)"""
    pb = "dd if=/dev/zero bs=80k count=40k 2>/dev/null | {} -q > /dev/null"
    return [
        ("hackbench pipe", "time", "s (lower is better)",
         "hackbench --pipe -g 10 -l 1000", f"{kb} messaging --ipc pipe -g 10 -l 1000", hackbench_time),
        ("hackbench socket", "time", "s (lower is better)",
         "hackbench -g 10 -l 1000", f"{kb} messaging -g 10 -l 1000", hackbench_time),
        ("perf sched messaging --pipe", "Total time", "s (lower is better)",
         "perf bench sched messaging --pipe -l 1000",
         f"{kb} messaging --style perf --ipc pipe -l 1000", perf_total),
        ("perf sched messaging --pipe -l 1 (setup, wake and exit cost)", "Total time", "s (lower is better)",
         "perf bench sched messaging --pipe -l 1",
         f"{kb} messaging --style perf --ipc pipe -l 1", perf_total),
        ("hackbench pipe -l 1 (setup, wake and exit cost)", "time", "s (lower is better)",
         "hackbench --pipe -g 10 -l 1", f"{kb} messaging --ipc pipe -g 10 -l 1", hackbench_time),
        ("perf sched pipe (unpinned)", "ops/sec", "ops/s",
         "perf bench sched pipe -l 100000", f"{kb} sched-pipe -l 100000", perf_ops),
        ("perf sched pipe (taskset -c 0)", "ops/sec", "ops/s",
         "taskset -c 0 perf bench sched pipe -l 200000", f"taskset -c 0 {kb} sched-pipe -l 200000", perf_ops),
        ("pipebench 3.1 GiB (dd bs=80k)", "summary rate", "MiB/s",
         pb.format("pipebench"), pb.format(f"{kb} pipebench"), pipebench_rate),
    ]


def solo(kb):
    """(name, metric, unit, cmd, parser): kbot-only workloads."""
    return [
        ("bw_pipe -N 5", "PIPE.bandwidth", "MB/s (10^6)", f"{kb} bw_pipe -N 5", lm_bw),
        ("lat_pipe -N 5", "PIPE.latency", "us", f"{kb} lat_pipe -N 5", lm_lat),
        ("pipe1 -t 1 -s 5", "average", "ops/s", f"{kb} pipe1 -t 1 -s 5", wis_avg),
        ("context_switch1 -t 1 -s 5", "average", "ops/s", f"{kb} context_switch1 -t 1 -s 5", wis_avg),
        ("pipen --size 32768 -s 5", "MB/sec", "MB/s (10^6)", f"{kb} pipen --size 32768 -s 5 --json", pipen_mbs),
        ("unixbench-pipe -i 3", "score", "lps", f"{kb} unixbench-pipe -i 3", ub_score),
    ]


def spread(v):
    return f"{min(v):.4g} / **{statistics.median(v):.4g}** / {max(v):.4g}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kbot")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    only = [s for s in a.only.split(",") if s]
    print(f"# started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load {loadavg():.2f}")
    print()
    print("| workload | metric | upstream min / **median** / max | kbot min / **median** / max "
          "| kbot/upstream | run time up / kbot (median s) | load avg |")
    print("|---|---|---|---|---|---|---|")
    sys.stdout.flush()
    for name, metric, unit, up_cmd, kb_cmd, parse in pairs(a.kbot):
        if only and not any(o in name for o in only):
            continue
        up, kb, up_t, kb_t, loads = interleave(
            a.runs, lambda: sh(up_cmd), lambda: sh(kb_cmd), parse)
        ratio = statistics.median(kb) / statistics.median(up)
        print(f"| {name} | {metric} ({unit}) | {spread(up)} | {spread(kb)} | {ratio:.3f} "
              f"| {statistics.median(up_t):.1f} / {statistics.median(kb_t):.1f} "
              f"| {min(loads):.1f}-{max(loads):.1f} |")
        print(f"<!-- {name}: up={up} kbot={kb} -->")
        sys.stdout.flush()
    print()
    print("| kbot-only workload | metric | min / **median** / max | run time (median s) | load avg |")
    print("|---|---|---|---|---|")
    for name, metric, unit, cmd, parse in solo(a.kbot):
        if only and not any(o in name for o in only):
            continue
        vals, ts, loads = [], [], []
        for _ in range(a.runs):
            loads.append(loadavg())
            out, dt = sh(cmd)
            vals.append(parse(out))
            ts.append(dt)
        print(f"| {name} | {metric} ({unit}) | {spread(vals)} | {statistics.median(ts):.1f} "
              f"| {min(loads):.1f}-{max(loads):.1f} |")
        print(f"<!-- {name}: {vals} -->")
        sys.stdout.flush()
    print()
    print(f"# finished {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load {loadavg():.2f}")


if __name__ == "__main__":
    main()
