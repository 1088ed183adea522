#!/usr/bin/env python3
"""The figures behind TENON_POPULATE and TENON_HUGE_PAGES (docs/architecture.md,
"Pre-faulting and huge pages"): bench rows under libtenon.so with each
setting, interleaved (A B C ... then ... C B A) and repeated, reporting per
row and setting the page faults the program took (perf's page-faults: traps),
the pages faulted in (ru_minflt, which counts what MADV_POPULATE_WRITE faults
in too), the wall time (median, and the median ratio to the default within
the same repeat), user+sys, and peak RSS (ru_maxrss from the workloads'
launcher; for rows that reset their peak per cell, the geomean of the cells'
peaks).

  python3 bench/fresh_memory.py --repeat 11
  python3 bench/fresh_memory.py --rows malloc-large,size-sweep --settings 'default;P=1;H=1'

Needs a build (`bash scripts/build.sh build`) and perf (without it the traps
column reads 0)."""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = {  # the suite's full-scale arguments (bench/tenonbench/workloads.py)
    "malloc-large": ["malloc_large", "1", "15000", "4"],
    "size-sweep": ["size_sweep", "1024", "256"],
    "glibc-thread/2": ["glibc_thread", "2", "2000000", "512"],
    "glibc-thread/16": ["glibc_thread", "16", "2000000", "512"],
    "cache-thrash/2": ["cache_thrash", "2", "30000", "1000", "8"],
    "thread-chunks": ["thread_chunks", "128", "1,2,4,8,20"],
    "mstress/2": ["mstress", "2", "2000000", "20", "20000"],
    "mstress/16": ["mstress", "16", "2000000", "20", "20000"],
    "larson/2": ["larson", "2", "10000000", "8", "1000", "8", "512"],
    "st-mixed": ["st_mixed", "3000000"],
    "remote-free/1": ["remote_free", "1", "60000"],
    "remote-free/2": ["remote_free", "2", "60000"],
    "op-size": ["op_size", "65536", "8", "3"],
    "latency": ["latency", "2", "8000000", "4096"],
    "threadtest/2": ["threadtest", "2", "15000", "1000", "64"],
    "producer-consumer": ["producer_consumer", "4", "10000", "4096", "64", "100"],
}
SETTINGS = {
    "default": {},
    "P=1": {"TENON_POPULATE": "1"},
    "P=256K": {"TENON_POPULATE": "262144"},
    "H=1": {"TENON_HUGE_PAGES": "1"},
    "H=2": {"TENON_HUGE_PAGES": "2"},
    "P=1,H=1": {"TENON_POPULATE": "1", "TENON_HUGE_PAGES": "1"},
    "H=0": {"TENON_HUGE_PAGES": "0"},
    "H=4": {"TENON_HUGE_PAGES": "4"},
}
CELL = re.compile(r"ns_per_call=([0-9.]+) peak_rss_kib=([0-9]+)")


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def run(build, tmp, row, setting):
    workloads = os.path.join(build, "bench", "workloads")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENON_") and k != "LD_PRELOAD"}
    env["TENON_BENCH_PRELOAD"] = os.path.join(build, "src", "libtenon.so")
    env.update(SETTINGS[setting])
    usage, perf_out, stdout = (os.path.join(tmp, n) for n in ("usage", "perf", "stdout"))
    argv = [os.path.join(workloads, "launch"), usage, os.path.join(workloads, ROWS[row][0])] + ROWS[row][1:]
    if shutil.which("perf"):
        argv = ["perf", "stat", "-x,", "-e", "page-faults", "-o", perf_out, "--"] + argv
    with open(stdout, "w") as out:
        rc = subprocess.call(argv, env=env, stdout=out, stderr=subprocess.DEVNULL)
    if rc != 0:
        raise SystemExit(f"{row} with {setting} exited {rc}")
    kv = dict(field.split("=") for field in open(usage).read().split())
    traps = 0
    if os.path.exists(perf_out):
        lines = [l for l in open(perf_out) if l.strip() and not l.startswith("#")]
        traps = int(lines[0].split(",")[0]) if lines and lines[0].split(",")[0].isdigit() else 0
    cells = [float(m.group(2)) for m in map(CELL.search, open(stdout)) if m]
    return {"wall": float(kv["wall_s"]), "cpu": float(kv["user_s"]) + float(kv["sys_s"]),
            "pages": int(kv["minflt"]), "traps": traps,
            "rss_kib": geomean(cells) if cells else float(kv["maxrss_kib"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--settings", default=";".join(SETTINGS), help="';'-separated, 'default' first")
    ap.add_argument("--json", help="also write every measurement here")
    args = ap.parse_args()
    rows, settings = args.rows.split(","), args.settings.split(";")
    if settings[0] != "default":
        raise SystemExit("the first setting must be 'default' (the ratios' base)")
    res = {r: {s: [] for s in settings} for r in rows}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            loads.append(os.getloadavg()[0])
            for r in rows:
                for s in settings if i % 2 == 0 else settings[::-1]:
                    res[r][s].append(run(args.build, tmp, r, s))
    if args.json:
        json.dump({"loads": loads, "res": res}, open(args.json, "w"))
    print(f"1-minute load at each repeat: {' '.join(f'{l:.1f}' for l in loads)}")
    print("cells: traps / pages faulted in; time (default: median s, others: median ratio); peak RSS MiB")
    print("| row | " + " | ".join(f"`{s}`" for s in settings) + " |")
    print("|---|" + "---|" * len(settings))
    k = lambda n: f"{n / 1000:.1f}k" if n >= 1000 else f"{n:.0f}"
    med = lambda xs, key: statistics.median(x[key] for x in xs)
    ratios = {s: {"wall": [], "cpu": [], "rss": []} for s in settings}
    for r in rows:
        base = res[r]["default"]
        cells = []
        for s in settings:
            xs = res[r][s]
            wall = statistics.median(x["wall"] / b["wall"] for x, b in zip(xs, base))
            ratios[s]["wall"].append(wall)
            ratios[s]["cpu"].append(statistics.median(x["cpu"] / b["cpu"] for x, b in zip(xs, base)))
            ratios[s]["rss"].append(med(xs, "rss_kib") / med(base, "rss_kib"))
            time = f"{med(xs, 'wall'):.3f} s" if s == "default" else f"{wall:.2f}"
            cells.append(f"{k(med(xs, 'traps'))} / {k(med(xs, 'pages'))}; {time}; {med(xs, 'rss_kib') / 1024:.1f}")
        print(f"| {r} | " + " | ".join(cells) + " |")
    for s in settings[1:]:
        g = {key: geomean(v) for key, v in ratios[s].items()}
        print(f"{s}: geomean against the default: time {g['wall']:.3f}, user+sys {g['cpu']:.3f}, peak RSS {g['rss']:.3f}")


if __name__ == "__main__":
    main()
