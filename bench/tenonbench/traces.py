"""Traces of real programs for the replay rows: each program is run once
under libtenon-trace.so (over glibc) and its trace kept in
BUILD/bench/traces/<full|smoke>/NAME.trace with the recipe that made it in
NAME.recipe; a later run with the same recipe (command, program version,
trace library) reuses it. The rows then replay each trace with tenon-replay
under every allocator (docs/bench.md, docs/measure.md)."""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(os.path.dirname(HERE), "workloads")

# A deterministic SQL script: a table of `n` rows (200,000; smoke 2,000), an index, grouping,
# pattern matching, updates, deletes and a sort.
SQL = """CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score REAL, tag TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n})
  INSERT INTO t SELECT x, printf('name-%d-%x', x, (x * 2654435761) % 4294967296), (x * 7919) % 1000 / 7.0,
                       'tag' || (x % 97) FROM c;
CREATE INDEX ti ON t(tag, score);
SELECT tag, count(*), round(avg(score), 3) FROM t GROUP BY tag ORDER BY 2 DESC, 1 LIMIT 3;
SELECT count(*) FROM t WHERE name LIKE '%-7%';
UPDATE t SET score = score * 2 WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
SELECT sum(length(name)) FROM (SELECT name FROM t ORDER BY score, name);
"""


@dataclass
class Recipe:
    name: str
    tool: str                 # the program that must be installed
    package: str              # Debian package providing it
    version_cmd: list
    argv: list                # full scale; "{out}" is a scratch folder
    smoke_argv: list
    env: dict = field(default_factory=dict)
    stdin: str | None = None  # "{n}" in it: 200000 at full scale, 2000 at smoke
    about: str = ""


def _python():
    return "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


RECIPES = {
    "python": Recipe("python", _python(), "python3", [_python(), "--version"],
                     [_python(), os.path.join(WORKLOADS, "pythreads.py"), "2"],
                     [_python(), os.path.join(WORKLOADS, "pythreads.py"), "1"],
                     env={"PYTHONMALLOC": "malloc"},
                     about="CPython (PYTHONMALLOC=malloc), 3 threads building records and JSON, 1 parsing, "
                           "sorting and indexing them (frees across threads)"),
    "g++": Recipe("g++", "g++", "g++", ["g++", "--version"],
                  ["g++", "-std=c++20", "-O2", "-c", os.path.join(WORKLOADS, "larson.cpp"), "-o", "{out}/x.o"],
                  ["g++", "-x", "c++", "-O0", "-c", os.path.join(WORKLOADS, "fastpath.c"), "-o", "{out}/x.o"],
                  about="the C++ compiler (cc1plus) compiling bench/workloads/larson.cpp at -O2"),
    "sqlite": Recipe("sqlite", "sqlite3", "sqlite3", ["sqlite3", "--version"], ["sqlite3", ":memory:"],
                     ["sqlite3", ":memory:"], stdin=SQL,
                     about="sqlite3 in memory: 200,000 rows inserted, indexed, grouped, matched, updated, "
                           "deleted, sorted"),
}


def trace_dir(build_dir, smoke):
    return os.path.join(build_dir, "bench", "traces", "smoke" if smoke else "full")


def trace_path(build_dir, smoke, name):
    return os.path.join(trace_dir(build_dir, smoke), name + ".trace")


def _sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()[:16]


def _recipe_text(r, smoke, trace_lib):
    try:
        version = subprocess.run(r.version_cmd, capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        version = "?"
    argv = r.smoke_argv if smoke else r.argv
    return "\n".join([f"argv: {' '.join(argv)}", f"version: {version}", f"env: {sorted(r.env.items())}",
                      f"stdin: {_sha_text(_stdin(r, smoke))}", f"trace library: {_sha(trace_lib)}"]) + "\n"


def _sha_text(s):
    return hashlib.sha256((s or "").encode()).hexdigest()[:16]


def _stdin(r, smoke):
    return r.stdin.replace("{n}", "2000" if smoke else "200000") if r.stdin else None


def _record(r, smoke, trace_lib, dest, timeout):
    """Runs the program once under the trace library; the largest trace file
    it leaves (a compiler driver starts the compiler proper: every process
    writes its own file, TENON_TRACE=FILE.%p) becomes dest. Returns an error
    or ''."""
    with tempfile.TemporaryDirectory(prefix="tenon-trace-") as scratch:
        argv = [a.replace("{out}", scratch) for a in (r.smoke_argv if smoke else r.argv)]
        env = dict(os.environ)
        env.update(r.env)
        env["LD_PRELOAD"] = trace_lib
        env["TENON_TRACE"] = os.path.join(scratch, "trace.%p")
        env.pop("TENON_LATENCY", None)
        try:
            p = subprocess.run(argv, env=env, input=_stdin(r, smoke), capture_output=True, text=True,
                               timeout=timeout, cwd=scratch)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{' '.join(argv)}: {e}"
        if p.returncode != 0:
            return f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip()[-300:]}"
        files = glob.glob(os.path.join(scratch, "trace.*"))
        if not files:
            return "no trace written"
        shutil.move(max(files, key=os.path.getsize), dest)
    return ""


def prepare(build_dir, smoke, names, timeout=600, log=sys.stderr):
    """Makes sure the traces `names` exist for this build and scale.
    Returns {name: error or ''}."""
    trace_lib = os.path.join(build_dir, "src", "measure", "libtenon-trace.so")
    out = {}
    d = trace_dir(build_dir, smoke)
    for name in names:
        r = RECIPES[name]
        if not os.path.exists(trace_lib):
            out[name] = f"{trace_lib} not built"
            continue
        if not shutil.which(r.tool):
            out[name] = f"{r.tool} not installed (apt-get install {r.package})"
            continue
        os.makedirs(d, exist_ok=True)
        recipe = _recipe_text(r, smoke, trace_lib)
        stamp = os.path.join(d, name + ".recipe")
        dest = trace_path(build_dir, smoke, name)
        try:
            with open(stamp) as f:
                if f.read() == recipe and os.path.exists(dest):
                    out[name] = ""
                    continue
        except OSError:
            pass
        t0 = time.time()
        print(f"bench: recording the trace of {name} (once per build folder) ...", file=log)
        err = _record(r, smoke, trace_lib, dest, timeout)
        if err:
            out[name] = err
            continue
        with open(stamp, "w") as f:
            f.write(recipe)
        print(f"bench: {name}: {os.path.getsize(dest) / 2**20:.1f} MiB trace in {time.time() - t0:.1f} s", file=log)
        out[name] = ""
    return out


def replay_only(r, metrics):
    """A replay row measures the replay itself (its REPLAY line), not the
    reading and planning of the trace before it: the same work under every
    allocator, which would only dilute the ratios. The process's own figures
    stay in process_wall_s and process_maxrss_kib. RSS only when the replayer
    could reset its peak (/proc/self/clear_refs) before replaying."""
    rp = (metrics.get("REPLAY") or [{}])[0]
    if isinstance(rp.get("wall_s"), (int, float)):
        r["process_wall_s"], r["wall_s"] = r["wall_s"], rp["wall_s"]
    if rp.get("peak_reset") == 1 and isinstance(rp.get("replay_rss_kib"), int):
        r["process_maxrss_kib"], r["maxrss_kib"] = r["maxrss_kib"], rp["replay_rss_kib"]
