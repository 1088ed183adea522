#!/usr/bin/env python3
"""tenon's comparison benchmark: runs every workload under every allocator
found (LD_PRELOAD), interleaved and repeated, and writes a report folder.

  python3 bench/run.py                  # the default suite (docs/bench.md: how long it takes)
  python3 bench/run.py --smoke --out /tmp/r   # every workload once, tiny (under a minute)
  python3 bench/run.py --only larson,xmalloc --threads 2,16 --repeat 5
  python3 bench/run.py --alloc mine=/path/libmine.so --baseline tenon

See docs/bench.md for what each workload and column means."""
import argparse
import datetime
import os
import platform
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def _ensure_matplotlib():
    """Debian's python3-matplotlib lives in /usr/bin/python3's path; when this
    interpreter (say a pyenv one) lacks it, start again under one that has it."""
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("TENON_BENCH_REEXEC"):
        return
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(cand) and os.path.realpath(cand) != os.path.realpath(sys.executable):
            ok = subprocess.run([cand, "-c", "import matplotlib"], capture_output=True).returncode == 0
            if ok:
                os.environ["TENON_BENCH_REEXEC"] = "1"
                os.execv(cand, [cand] + sys.argv)


_ensure_matplotlib()

from tenonbench import allocators, extras, load, report, runner, traces, workloads  # noqa: E402
from tenonbench import security as secbench  # noqa: E402
from tenonbench import charts as chartlib  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="every workload once at tiny scale (under a minute)")
    p.add_argument("--out", default="bench-report", help="report folder (default bench-report)")
    p.add_argument("--alloc", action="append", default=[], metavar="NAME=PATH.so",
                   help="another allocator to preload (repeatable)")
    p.add_argument("--only", action="append", default=[], metavar="WORKLOAD",
                   help="run only these workloads (repeatable or comma list; also fastpath-instr, pool, freeze, security)")
    p.add_argument("--repeat", type=int, default=None, help="runs per allocator and row (default 3, smoke 1)")
    p.add_argument("--threads", default=None, help="thread counts for the multithreaded workloads (default 1,2,16,64)")
    p.add_argument("--baseline", default="glibc", help="allocator the others are normalised to (default glibc)")
    p.add_argument("--build", default=os.path.join(REPO, "build"), help="CMake build folder (default build)")
    p.add_argument("--timeout", type=float, default=None, help="seconds before one run is killed (default 120, smoke 30)")
    p.add_argument("--check", action="store_true",
                   help="after the run, verify every row ran under every allocator and the report is complete")
    return p.parse_args(argv)


class Progress:
    """One updating line on a terminal, a line per row otherwise."""

    def __init__(self, total):
        self.total, self.done, self.t0 = total, 0, time.time()
        self.tty = sys.stderr.isatty()

    def step(self, what, result):
        self.done += 1
        el = time.time() - self.t0
        eta = el / self.done * (self.total - self.done)
        status = f"{result['wall_s']:.2f}s" if result["ok"] else ("TIMEOUT" if result["timed_out"] else f"FAIL rc={result['rc']}")
        line = f"[{self.done:4d}/{self.total}] {what:<38} {status:<10} elapsed {el:4.0f}s eta {eta:4.0f}s"
        if self.tty:
            sys.stderr.write("\r" + line[:110].ljust(110))
        elif self.done % 10 == 0 or not result["ok"] or self.done == self.total:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def end(self):
        if self.tty:
            sys.stderr.write("\n")


def machine_info(args, repeat, threads, allocs):
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO).stdout.strip()
        except OSError:
            return ""
    cpu, mem = "", ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
        with open("/proc/meminfo") as f:
            kib = next((int(l.split()[1]) for l in f if l.startswith("MemTotal")), 0)
            mem = f"{kib / 2**20:.1f} GiB"
    except OSError:
        mem = ""
    rev = sh(["git", "rev-parse", "--short", "HEAD"])
    if sh(["git", "status", "--porcelain", "--untracked-files=no"]):
        rev += " (with uncommitted changes)"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["bench/run.py"] + sys.argv[1:]),
        "machine": f"{cpu}, {os.cpu_count()} CPUs, {mem} RAM",
        "kernel": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "tenon git rev": rev or "unknown",
        "python": platform.python_version(),
        "repeats": f"{repeat} (size-sweep 1, thread-chunks at most 2)" if not args.smoke else "1 (smoke)",
        "threads": ",".join(map(str, threads)),
        "scale": "smoke" if args.smoke else "full",
    }


def check(out, rows, allocs, runs, have_charts, files, fast, only_extra, security=None):
    """Completeness, not timing. Returns a list of problems."""
    problems = []
    for _, _, label in rows:
        for a in allocs:
            if not any(r["ok"] for r in runs if r["row"] == label and r["alloc"] == a.name):
                problems.append(f"{label} did not succeed under {a.name}")
    # The sweeps and the latency row must have produced their numbers too.
    tags = {"size": "SIZE", "chunk": "CHUNK", "latency": "LAT", "opsize": "OPSIZE", "scaling": "SCALE",
            "replay": "REPLAY"}
    for w, _, label in rows:
        if w.kind in tags:
            for a in allocs:
                if not any(r["metrics"].get(tags[w.kind]) for r in runs if r["row"] == label and r["alloc"] == a.name and r["ok"]):
                    problems.append(f"{label} printed no {tags[w.kind]} lines under {a.name}")
    for f in ("report.md", "results.csv", "results.json"):
        if not os.path.exists(os.path.join(out, f)):
            problems.append(f"{f} missing")
    if have_charts:
        kinds = {w.kind for w, _, _ in rows}
        scaled = len({t for w, t, _ in rows if w.threaded and not w.fixed_threads}) > 1
        wanted = (["norm_time", "norm_rss"] if rows else []) + (["size_sweep"] if "size" in kinds else []) + \
                 (["thread_chunks"] if "chunk" in kinds else []) + (["latency"] if "latency" in kinds else []) + \
                 (["threads"] if scaled else []) + (["op_size"] if "opsize" in kinds else []) + \
                 (["thread_scaling"] if "scaling" in kinds else [])
        for key in wanted:
            if not files.get(key) or not os.path.exists(os.path.join(out, files[key])):
                problems.append(f"chart {key} missing")
    if "fastpath-instr" in only_extra and shutil.which("valgrind"):  # no valgrind: reported, not a failure
        for a in allocs:
            if a.name in extras.NO_VALGRIND:  # reported n/a with the reason
                continue
            if "instr" not in (fast or {}).get(a.name, {}):
                problems.append(f"fastpath-instr missing for {a.name}: {(fast or {}).get(a.name)}")
    if "security" in only_extra:
        problems += secbench.check(security, [a.name for a in allocs])
    return problems


def main(argv):
    args = parse_args(argv)
    smoke = args.smoke
    repeat = args.repeat or (1 if smoke else 3)
    threads = [int(t) for t in args.threads.split(",")] if args.threads else (
        workloads.SMOKE_THREADS if smoke else workloads.DEFAULT_THREADS)
    timeout = args.timeout or (30 if smoke else 120)
    build = os.path.abspath(args.build)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    probe = os.path.join(build, "bench", "workloads", "fastpath")
    if not os.path.exists(probe):
        raise SystemExit(f"{probe} not found: build first (bash scripts/build.sh {args.build})")

    allocs, skipped = allocators.discover(build, args.alloc, probe)
    names = [a.name for a in allocs]
    if args.baseline not in names:
        raise SystemExit(f"baseline {args.baseline!r} is not among the allocators found: {names}")
    for n, why in skipped:
        print(f"bench: skipping {n}: {why}", file=sys.stderr)
    for a in allocs:
        for note in a.notes:
            print(f"bench: note: {a.name} {note}", file=sys.stderr)

    selected = workloads.select(args.only)
    # The replay rows need their traces: recorded once per build folder and
    # scale; a row whose program is missing is skipped with the reason.
    wanted = [w.trace for w in selected if w.trace]
    trace_errors = traces.prepare(build, smoke, wanted) if wanted else {}
    skipped_rows = [(w.name, trace_errors[w.trace]) for w in selected if w.trace and trace_errors.get(w.trace)]
    for n, why in skipped_rows:
        print(f"bench: skipping row {n}: {why}", file=sys.stderr)
    selected = [w for w in selected if not (w.trace and trace_errors.get(w.trace))]
    extra_names = set(workloads.EXTRAS)
    only_names = {n.strip() for o in args.only for n in o.split(",")}
    only_extra = extra_names if not args.only else extra_names & only_names
    rows = workloads.rows(selected, threads)
    # Interleave: every repeat goes over all rows, each row runs every allocator
    # back to back, and the allocator order rotates per repeat so that drift
    # and order effects hit all alike.
    plan = []
    for rep in range(repeat):
        for w, t, label in rows:
            if w.max_repeat and rep >= w.max_repeat:
                continue
            k = rep % len(allocs)
            for a in allocs[k:] + allocs[:k]:
                plan.append((rep, w, t, label, a))
    print(f"bench: {len(allocs)} allocators ({', '.join(names)}), {len(rows)} rows, {len(plan)} runs, "
          f"repeat {repeat}, report in {out}", file=sys.stderr)
    launcher = os.path.join(build, "bench", "workloads", "launch")
    prog = Progress(len(plan))
    runs = []
    load_start = load.snapshot()
    for rep, w, t, label, a in plan:
        cmd = workloads.command(w, t, smoke, build, HERE)
        env = a.launch_env()
        env.update(w.env)
        load1 = load.load1()  # per run, so a noisy stretch can be found in results.csv
        r = runner.run(cmd, env, timeout, launcher)
        metrics = runner.parse_metrics(r["stdout"])
        ok = r["rc"] == 0 and not r["timed_out"] and "OK" in metrics
        if ok and w.kind == "replay":
            traces.replay_only(r, metrics)
        rec = {"row": label, "workload": w.name, "threads": t, "alloc": a.name, "rep": rep, "ok": ok,
               **{k: r[k] for k in ("rc", "timed_out", "wall_s", "user_s", "sys_s", "maxrss_kib", "minflt", "majflt", "stderr")},
               **{k: r[k] for k in ("process_wall_s", "process_maxrss_kib") if k in r},
               "load1": load1, "metrics": metrics}
        runs.append(rec)
        prog.step(f"{label} {a.name}", rec)
    prog.end()
    load_end = load.snapshot()
    load_lines, load_figures = load.describe(load_start, load_end, sum(r["user_s"] + r["sys_s"] for r in runs))

    fast = pool_md = freeze = None
    if "fastpath-instr" in only_extra:
        print("bench: fastpath-instr (callgrind) ...", file=sys.stderr)
        fast = extras.fastpath_instr(build, allocs, smoke)
        handfused = extras.handfused_instr(build, smoke)
        if handfused is not None:
            fast["tenon-handfused"] = handfused
    if "pool" in only_extra:
        print("bench: bulk pool (mass_pool_bench, when built) ...", file=sys.stderr)
        pool_md = extras.pool_bench(build, smoke)
    if "freeze" in only_extra:
        print("bench: freeze probe (freeze_probe, when built) ...", file=sys.stderr)
        freeze = extras.freeze_probe(build, allocs, smoke)
    security = None
    if "security" in only_extra:
        print("bench: security (misuse programs under every allocator) ...", file=sys.stderr)
        security = secbench.run_all(build, allocs, smoke)

    ncpu = os.cpu_count() or 1
    have_charts = chartlib.HAVE_MPL

    def make_charts(summary, norm_t, norm_r, size_t, chunk_t, lat_t, opsize_t, scale_t):
        chartlib.use_palette(names)
        return {
            "norm_time": chartlib.normalised_bars(norm_t, names, args.baseline, out, "norm_time.png", "time"),
            "norm_rss": chartlib.normalised_bars(norm_r, names, args.baseline, out, "norm_rss.png", "peak RSS"),
            "size_sweep": chartlib.size_sweep(size_t, out),
            "thread_chunks": chartlib.thread_chunks(chunk_t, out),
            "threads": chartlib.scaling(summary, rows, names, args.baseline, ncpu, out),
            "latency": chartlib.latency(lat_t, out),
            "op_size": chartlib.op_size(opsize_t, out),
            "thread_scaling": chartlib.thread_scaling(scale_t, ncpu, out),
        }

    meta = {"info": {**machine_info(args, repeat, threads, allocs), **load_lines}, "repeat": repeat,
            "load": {"start": load_start, "end": load_end, **load_figures},
            "allocators": [{"name": a.name, "path": a.path, "version": a.version, "notes": a.notes} for a in allocs],
            "skipped": skipped, "skipped_rows": skipped_rows}
    table, files, paired = report.write(out, meta, runs, rows, names, args.baseline, fast, pool_md, freeze,
                                        make_charts if have_charts else None, security=security)
    print()
    print(f"Time relative to {args.baseline} (median of {repeat}; lower is better):")
    print(table)
    if paired:
        print(f"\n{report.PAIRED_SUBJECT}'s time over each peer's, paired per repeat (median of {repeat}; "
              f"below 1: {report.PAIRED_SUBJECT} faster):")
        print(paired)
    for k, v in load_lines.items():
        print(f"{k}: {v}")
    if security:
        print(f"\nSecurity: of {len(security['cases'])} misuse programs, per allocator "
              "(stopped: caught or trapped):")
        print(secbench.totals_text(security, names))
    print(f"\nReport: {os.path.join(out, 'report.md')}")
    if not have_charts:
        print("bench: matplotlib not found: no charts (apt-get install python3-matplotlib)", file=sys.stderr)

    if args.check:
        problems = check(out, rows, allocs, runs, have_charts, files, fast, only_extra, security)
        for p in problems:
            print(f"bench check: {p}", file=sys.stderr)
        if problems:
            return 1
        if not have_charts:
            print("bench check: skipped chart checks (no matplotlib)", file=sys.stderr)
            return 77
        print(f"bench check: complete ({len(rows)} rows x {len(allocs)} allocators)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
