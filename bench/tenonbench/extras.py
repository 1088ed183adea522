"""The rows that are not timed runs: the fast-path instruction count under
callgrind, and the other helpers' programs (bulk pool bench, freeze probe),
run only when their binaries exist."""
import os
import re
import shutil
import subprocess

from . import runner

_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def _callgrind_instructions(binary, n, alloc, timeout, args=()):
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", binary, str(n), *args]
    r = subprocess.run(cmd, env=alloc.env(), capture_output=True, text=True, timeout=timeout)
    m = _COLLECTED.search(r.stderr)
    if r.returncode != 0 or not m:
        # The program's own words (valgrind prefixes its lines with ==pid==)
        # say more than valgrind's stack dump.
        own = [l.strip() for l in r.stderr.splitlines() if l.strip() and not l.startswith("==")]
        raise RuntimeError(f"callgrind exit {r.returncode}: {(' '.join(own[-2:]) or r.stderr.strip())[-300:]}")
    return int(m.group(1))


# Peers known not to start under valgrind, and why: their fastpath-instr is
# n/a, which `run.py --check` accepts for these only.
NO_VALGRIND = {
    "snmalloc": "snmalloc does not start under valgrind: it reserves 256 GiB of address space for its "
                "pagemap, more than valgrind allows",
    "scudo": "scudo does not start under valgrind: it reserves 180 GiB of address space for its primary "
             "allocator at start, more than valgrind allows (Scudo ERROR: internal map or unmap failure)",
}


def fastpath_instr(build_dir, allocs, smoke, timeout=120):
    """Instructions per malloc(32)+free pair: (I(2N) - I(N)) / N, which
    cancels start-up; "mixed" the same over the sizes 16..352 in turn.
    Returns {alloc: {"instr": float, "mixed": float} | {"error": str}}."""
    binary = os.path.join(build_dir, "bench", "workloads", "fastpath")
    if not shutil.which("valgrind"):
        return {a.name: {"error": "valgrind not installed"} for a in allocs}
    n = 20000 if smoke else 200000
    out = {}
    for a in allocs:
        try:
            i1 = _callgrind_instructions(binary, n, a, timeout)
            i2 = _callgrind_instructions(binary, 2 * n, a, timeout)
            m1 = _callgrind_instructions(binary, n, a, timeout, ["mixed"])
            m2 = _callgrind_instructions(binary, 2 * n, a, timeout, ["mixed"])
            out[a.name] = {"instr": (i2 - i1) / n, "mixed": (m2 - m1) / n, "n": n}
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
            out[a.name] = {"error": f"{NO_VALGRIND[a.name]} ({e})" if a.name in NO_VALGRIND else str(e)}
    return out


def handfused_instr(build_dir, smoke, timeout=120):
    """fastpath-instr of the fast path fused by hand (bench/zero_cost), the
    yardstick of the composition-cost table; None when not built."""
    lib = os.path.join(build_dir, "bench", "zero_cost", "libtenon_handfused.so")
    if not os.path.exists(lib):
        return None
    from .allocators import Allocator
    return fastpath_instr(build_dir, [Allocator("tenon-handfused", lib)], smoke, timeout).get("tenon-handfused")


# The bulk pool's configurations in a full run: every variant at 8 M elements
# (with the sort), then the goal's rows at 80 M. The slow designs the pool is
# compared with (atomic_slots, mass_pool_dense: a shared counter per element,
# 4-9 s of CPU each at 80 M on 2 cores) and mass_pool_keep stay out of the
# 80 M table: with them the run outlasted its time limit and the 64-byte
# table never ran (docs/bench.md).
POOL_RUNS = [
    ["--elements", "8M", "--sizes", "16", "--sort"],
    ["--elements", "80M", "--sizes", "16,64", "--variants", "new_glibc,new_tenon,writes_only,mass_pool,mass_pool_n"],
]


def pool_bench(build_dir, smoke, timeout=150):
    """The bulk-pool helper's Markdown tables, verbatim, or None when not built."""
    binary = os.path.join(build_dir, "bench", "pool", "mass_pool_bench")
    if not os.path.exists(binary):
        return None
    texts = []
    for args in ([["--smoke"]] if smoke else POOL_RUNS):
        r = runner.run([binary] + args, None, timeout)
        text = r["stdout"].strip()
        if r["rc"] != 0:
            text += (f"\n\n(mass_pool_bench {' '.join(args)} exited {r['rc']}"
                     f"{', timed out' if r['timed_out'] else ''}: {r['stderr'].strip()[-300:]})")
        texts.append(text)
    # Every run ends with the same notes on the columns: keep the last one's.
    notes = "Peak RSS is the child process's"
    texts = [t.split(notes)[0].rstrip() for t in texts[:-1]] + texts[-1:]
    return "\n\n".join(texts)


_HEAP_RESULT = re.compile(r"RESULT mode=(\S+) build_ms=([0-9.]+) drop_ms=([0-9.]+) total_ms=([0-9.]+) peak_rss_kb=(\d+)")


def _heap_methods(name):
    """The methods heap_tree_bench runs under allocator `name` (preloaded)."""
    methods = ["new-delete", "pmr-monotonic"]
    if name == "tenon":
        methods += ["tenon-heap", "tenon-shared"]
    elif name.startswith("mimalloc"):
        methods += ["mimalloc-heap"]
    elif name.startswith("jemalloc"):
        methods += ["jemalloc-arena"]
    return methods


def heap_bench(build_dir, allocs, smoke, reps=3, timeout=300):
    """First-class heaps (bench/heaps/heap_tree_bench): a 10-million-node map
    built from 4 threads and dropped, per allocator and method; the medians of
    `reps` runs as a Markdown table, or None when not built."""
    binary = os.path.join(build_dir, "bench", "heaps", "heap_tree_bench")
    if not os.path.exists(binary):
        return None
    nodes = 200_000 if smoke else 10_000_000
    reps = 1 if smoke else reps
    rows = []
    for a in allocs:
        if a.name not in ("glibc", "tenon") and not a.name.startswith(("jemalloc", "mimalloc")):
            continue
        for method in _heap_methods(a.name):
            cmd = [binary, method] + ([a.path] if method not in ("new-delete", "pmr-monotonic") else [])
            cmd += ["--nodes", str(nodes), "--threads", "4"]
            got = []
            for _ in range(reps):
                r = runner.run(cmd, a.env(), timeout)
                m = _HEAP_RESULT.search(r["stdout"])
                if r["rc"] != 0 or not m:
                    got = None
                    rows.append([a.name, method, "error", (r["stderr"].strip()[-100:] or f"exit {r['rc']}"), "", ""])
                    break
                got.append([float(m.group(i)) for i in (2, 3, 4)] + [int(m.group(5)) / 1024])
            if got:
                med = [sorted(col)[len(col) // 2] for col in zip(*got)]
                rows.append([a.name, method] + [f"{med[0]:.0f}", f"{med[1]:.1f}", f"{med[2]:.0f}", f"{med[3]:.0f}"])
    header = "| allocator | method | build ms | drop ms | total ms | peak RSS MiB |"
    lines = [f"`heap_tree_bench METHOD --nodes {nodes} --threads 4` under each allocator (preloaded), "
             f"median of {reps}: each thread builds a map of {nodes // 4} `uint64` pairs and drops it "
             "(new-delete destroys it node by node; the other methods drop the memory under it at once).", "",
             header, "|" + "---|" * 6]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


_RESULT = re.compile(r"RESULT\s+freezes=(\d+)\s+stalled=(\d+)\s+max_stall_ms=([0-9.]+)")


def freeze_probe(build_dir, allocs, smoke, timeout=120):
    """Per allocator: does a thread frozen inside the allocator stall others?
    None when freeze_probe is not built."""
    binary = os.path.join(build_dir, "tests", "freeze", "freeze_probe")
    if not os.path.exists(binary):
        return None
    # Bounded: an allocator that stalls costs a deadline per freeze, so the
    # time cap keeps a locked one from eating the suite's five minutes.
    args = (["--freezes", "10", "--threads", "3", "--deadline-ms", "200", "--max-seconds", "2"] if smoke else
            ["--freezes", "200", "--threads", "4", "--deadline-ms", "300", "--max-seconds", "6"])
    out = {}
    for a in allocs:
        r = runner.run([binary] + args, a.env(), timeout)
        m, source = None, ""
        for line in r["stdout"].splitlines():
            m = _RESULT.search(line) or m
            if line.startswith("freeze_probe: malloc from "):
                source = line.split("from ", 1)[1].strip()
        if m:
            out[a.name] = {"freezes": int(m.group(1)), "stalled": int(m.group(2)),
                           "max_stall_ms": float(m.group(3)), "rc": r["rc"], "malloc_from": source,
                           "args": " ".join(args)}
        else:
            out[a.name] = {"error": f"exit {r['rc']}{' (timed out)' if r['timed_out'] else ''}, no RESULT line: "
                                    f"{(r['stdout'] + r['stderr']).strip()[-200:]}"}
    return out
