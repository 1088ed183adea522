"""The workload table: which program each row runs, with which arguments at
full and at smoke scale. Multithreaded workloads split a fixed amount of
work over the threads, so a row's wall time compares allocators, and the
same workload at 1, 2, 16 and 64 threads shows scaling and oversubscription."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field


@dataclass
class Workload:
    name: str
    program: str            # file in BUILD/bench/workloads, or a .py under bench/workloads
    args: list              # full-scale arguments after THREADS (or all, if not threaded)
    smoke_args: list
    threaded: bool = True
    kind: str = "time"      # time | size | chunk | latency | opsize | scaling | replay
    env: dict = field(default_factory=dict)
    fixed_threads: int | None = None  # threaded program run at one count only
    max_repeat: int | None = None     # long sweeps run fewer times than --repeat
    about: str = ""
    trace: str | None = None          # replay rows: the trace (tenonbench/traces.py) tenon-replay replays


WORKLOADS = [
    Workload("threadtest", "threadtest", ["15000", "1000", "64"], ["200", "200", "64"],
             about="batches of 64 B allocated and freed in order, per thread"),
    Workload("larson", "larson", ["10000000", "8", "1000", "8", "512"], ["40000", "2", "200", "8", "512"],
             about="random replacement, arrays handed to the next round's threads"),
    Workload("xmalloc", "xmalloc", ["1000000", "64", "256"], ["5000", "64", "256"],
             about="producers allocate, consumers free: every free remote"),
    Workload("cache-thrash", "cache_thrash", ["30000", "1000", "8"], ["1000", "100", "8"],
             about="active false sharing: per-thread 8 B objects written hard"),
    Workload("cache-scratch", "cache_scratch", ["30000", "1000", "8"], ["1000", "100", "8"],
             about="passive false sharing: neighbouring objects handed to threads"),
    Workload("mstress", "mstress", ["2000000", "20", "20000"], ["8000", "4", "2000"],
             about="mixed sizes, shared slots, threads exit and restart every round"),
    Workload("glibc-thread", "glibc_thread", ["2000000", "512"], ["20000", "128"],
             about="per-thread random sizes 4 B-32 KiB, like glibc bench-malloc-thread"),
    Workload("remote-free", "remote_free", ["60000"], ["2000"],
             about="one size class 16-2048 B at a time, shuffled, freed by other threads"),
    Workload("producer-consumer", "producer_consumer", ["10000", "4096", "64", "100"], ["100", "1024", "64", "10"],
             fixed_threads=4, about="2 producers queue batches of 4096 x 64 B (<= 100 queued), 2 consumers free them"),
    Workload("malloc-large", "malloc_large", ["15000", "4"], ["40", "4"], fixed_threads=1,
             about="2-35 MiB blocks, working set of 4, random replacement"),
    Workload("st-mixed", "st_mixed", ["3000000"], ["20000"], threaded=False,
             about="single thread, cfrac/espresso-like short-lived mixed sizes"),
    Workload("python", "pyprog.py", ["12"], ["1"], threaded=False, env={"PYTHONMALLOC": "malloc"},
             about="CPython (PYTHONMALLOC=malloc): JSON, dicts, strings, sorting"),
    Workload("latency", "latency", ["8000000", "4096"], ["20000", "512"], fixed_threads=2, kind="latency",
             about="per-call cycles, 1 call in 8 sampled, 2 pinned threads"),
    Workload("size-sweep", "size_sweep", ["1024", "256"], ["8", "8"], threaded=False, kind="size",
             max_repeat=1, about="malloc/calloc + touch + free, 2 MiB ... 1 GiB"),
    Workload("thread-chunks", "thread_chunks", ["128", "1,2,4,8,20"], ["4", "1,2"], threaded=False,
             kind="chunk", max_repeat=2, about="per-thread 130 KiB ... 33 MiB chunks with memset, 1 ... 20 threads"),
    Workload("op-size", "op_size", ["65536", "8", "3"], ["1024", "1", "1"], threaded=False, kind="opsize",
             max_repeat=1, about="time of one malloc, free, calloc, realloc (from half the size) at 1 KiB ... 64 MiB, "
                                 "batches of up to 256 blocks, pages written between the timed batches"),
    Workload("thread-scaling", "thread_scaling", ["1000000", "20", "3"], ["20000", "4", "1"], threaded=False,
             kind="scaling", max_repeat=1,
             about="1 million random replacements (16 B - 32 KiB, 1 in 8 through a shared exchange: remote frees) "
                   "split over 1, 2, ... 20 threads, median of 3 trials per count"),
    Workload("replay-python", "tenon-replay", [], [], threaded=False, kind="replay", trace="python",
             about="replay of a trace of CPython, 3 producer threads and 1 consumer (time and RSS: the replay alone)"),
    Workload("replay-g++", "tenon-replay", [], [], threaded=False, kind="replay", trace="g++",
             about="replay of a trace of the C++ compiler (cc1plus) compiling larson.cpp at -O2"),
    Workload("replay-sqlite", "tenon-replay", [], [], threaded=False, kind="replay", trace="sqlite",
             about="replay of a trace of sqlite3 building, indexing, querying and sorting a 200,000-row table"),
]

DEFAULT_THREADS = [1, 2, 16, 64]
# The rows that are not timed workloads (bench/tenonbench/extras.py, security.py).
EXTRAS = ("fastpath-instr", "pool", "freeze", "security")
SMOKE_THREADS = [2, 16]


def select(only):
    """Workloads named by --only (repeatable, comma lists), or all."""
    if not only:
        return list(WORKLOADS)
    names = [n.strip() for o in only for n in o.split(",") if n.strip()]
    known = {w.name: w for w in WORKLOADS}
    extra_names = set(EXTRAS)
    bad = [n for n in names if n not in known and n not in extra_names]
    if bad:
        raise SystemExit(f"unknown workload(s) {bad}; known: {sorted(known) + sorted(extra_names)}")
    return [known[n] for n in names if n in known]


def rows(workloads, threads):
    """(workload, thread count or None, row label) for every row to run."""
    out = []
    for w in workloads:
        if not w.threaded:
            out.append((w, None, w.name))
        elif w.fixed_threads:
            out.append((w, w.fixed_threads, w.name))
        else:
            for t in threads:
                out.append((w, t, f"{w.name}/T{t}"))
    return out


def command(w, threads, smoke, build_dir, src_dir):
    if w.trace:
        from . import traces
        return [os.path.join(build_dir, "src", "measure", "tenon-replay"), traces.trace_path(build_dir, smoke, w.trace)]
    args = list(w.smoke_args if smoke else w.args)
    if w.program.endswith(".py"):
        return [sys.executable, os.path.join(src_dir, "workloads", w.program)] + args
    prog = os.path.join(build_dir, "bench", "workloads", w.program)
    if threads is not None:
        args = [str(threads)] + args
    return [prog] + args
