"""The security table: every misuse program (bench/security/misuse and
misuse_cxx, one heap misuse per run) under every allocator, each run
classified from how it ended:

  caught   the allocator stopped it: a signal with a message on stderr, or
           abort/trap (SIGABRT, SIGILL, SIGTRAP) without one; or it reported
           the misuse on stderr and went on; or it answered harmlessly
           (the program printed DEFENDED: usable size 0, a freed block not
           handed out at once, ...)
  trapped  SIGSEGV/SIGBUS at the bad memory access itself (guard page,
           no-access region): stopped by the memory protection, no message
  crashed  any other signal without a message (a SIGSEGV later, inside the
           allocator, reading what the misuse broke), or hung
  missed   ran to the end with no report; silent corruption (two mallocs
           returning one block, a forged address handed out) is a miss even
           when a later check then stops the program
  n/a      the case does not apply (no free_sized, realloc grew in place)
  error    the program could not set the misuse up

The protocol the programs follow is in bench/security/misuse.h; what the
classes mean to a reader is in docs/security.md."""
import csv
import os
import resource
import signal
import subprocess
import time

from . import report

PROGRAMS = ("misuse", "misuse_cxx")
OUTCOMES = ("caught", "trapped", "crashed", "missed", "n/a", "error")
DELIBERATE = {signal.SIGABRT, signal.SIGILL, signal.SIGTRAP}
FAULTS = {signal.SIGSEGV, signal.SIGBUS}

# Settings that would change what an allocator checks: each runs with its
# defaults.
_TUNING_VARS = ("MALLOC_CHECK_", "MALLOC_PERTURB_", "GLIBC_TUNABLES", "MALLOC_CONF", "SCUDO_OPTIONS")
_TUNING_PREFIXES = ("MIMALLOC_", "TCMALLOC_", "TENON_", "SNMALLOC_", "RPMALLOC_")

# Smoke: one size of each misuse, enough to see the runner, the classes and
# the report work under every allocator.
SMOKE_CASES = {"double_free_8", "double_free_delayed_4k", "free_after_realloc_4k", "free_interior_64",
               "free_unaligned_8", "free_never_allocated_near", "free_stack", "overflow_8_8", "underflow_8_8",
               "write_after_free_64", "read_after_free_64", "free_list_poison_8", "malloc0_write",
               "free_sized_wrong_32", "usable_size_freed", "reuse_immediate_8", "fresh_block_pointer_8",
               "sized_delete_wrong_32", "delete_new_array"}


def programs(build_dir):
    return [os.path.join(build_dir, "bench", "security", p) for p in PROGRAMS]


def list_cases(build_dir):
    """[(program, name, group, about)] from each program's --list; the
    harness controls (group "control") are left out."""
    cases = []
    for prog in programs(build_dir):
        if not os.path.exists(prog):
            continue
        out = subprocess.run([prog, "--list"], capture_output=True, text=True, timeout=30).stdout
        for line in out.splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[1] != "control":
                cases.append((prog, *parts))
    return cases


def _signame(sig):
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _first_line(text):
    return next((l.strip() for l in text.splitlines() if l.strip()), "")


def _markers(stdout):
    """The last stage reached and the program's findings."""
    stage, found = "", {}
    for line in stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("MISUSE", "CALL", "ACCESS", "DONE", "END"):
            stage = word
        elif word in ("CORRUPT", "DEFENDED", "NOTE", "SKIP"):
            found.setdefault(word, rest.strip())
    return stage, found


def classify(rc, timed_out, stdout, stderr, timeout=None):
    """(outcome, detail) of one run. rc as subprocess gives it: negative for
    a signal."""
    stage, found = _markers(stdout)
    message = _first_line(stderr)
    if timed_out:
        if "CORRUPT" in found:
            return "missed", f"{found['CORRUPT']}; then hung"
        return "crashed", f"hung: killed after {timeout or '?'} s (last stage {stage or 'none'})"
    if rc == 77 and "SKIP" in found:
        return "n/a", found["SKIP"]
    if rc < 0:
        sig = -rc
        name = _signame(sig)
        if "CORRUPT" in found:
            return "missed", f"{found['CORRUPT']}; then {name}" + (f": {message}" if message else "")
        if message:
            return "caught", f"{name}: {message}"
        if sig in DELIBERATE:
            return "caught", f"{name}, no message"
        if sig in FAULTS and stage == "ACCESS":
            return "trapped", f"{name} at the bad access"
        where = {"CALL": "in the bad call", "ACCESS": "at the bad access", "DONE": "after the misuse",
                 "END": "at exit"}.get(stage, "before the misuse")
        return "crashed", f"{name} {where}, no message"
    if rc == 0 and stage == "END":
        if "CORRUPT" in found:
            return "missed", found["CORRUPT"]
        if message:
            return "caught", f"reported and went on: {message}"
        if "DEFENDED" in found:
            return "caught", found["DEFENDED"]
        return "missed", found.get("NOTE", "no report")
    if message:
        return "caught", f"exit {rc}: {message}"
    return "error", f"exit {rc} at stage {stage or 'none'}: {found.get('NOTE', '')}".rstrip(": ")


def _env(alloc):
    env = alloc.env()
    for k in list(env):
        if k in _TUNING_VARS or k.startswith(_TUNING_PREFIXES):
            del env[k]
    return env


def _no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_case(prog, name, alloc, timeout):
    t0 = time.perf_counter()
    try:
        r = subprocess.run([prog, name], env=_env(alloc), capture_output=True, text=True, errors="replace",
                           timeout=timeout, stdin=subprocess.DEVNULL, preexec_fn=_no_core)
        rc, out, err, timed_out = r.returncode, r.stdout, r.stderr, False
    except subprocess.TimeoutExpired as e:
        rc, timed_out = -signal.SIGKILL, True
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    outcome, detail = classify(rc, timed_out, out, err, timeout)
    return {"outcome": outcome, "detail": detail, "message": _first_line(err)[:300], "rc": rc,
            "wall_s": round(time.perf_counter() - t0, 3), "stderr": err[-500:], "stdout": out[-500:]}


# A misuse program finishes in milliseconds; one that has not after this long
# hangs (rpmalloc loops at exit after a small double free). Shorter in the
# smoke run, which checks that every case is classified, not how: a run the
# load slowed past it would only read as a hang.
TIMEOUT_S = 5
SMOKE_TIMEOUT_S = 2


def run_all(build_dir, allocs, smoke, timeout=None, progress=None):
    """{"cases": [{name, group, about, program}], "results": {case: {alloc: run}}},
    or None when the misuse programs are not built."""
    timeout = timeout or (SMOKE_TIMEOUT_S if smoke else TIMEOUT_S)
    cases = list_cases(build_dir)
    if not cases:
        return None
    if smoke:
        cases = [c for c in cases if c[1] in SMOKE_CASES]
    results = {}
    for prog, name, group, about in cases:
        results[name] = {}
        for a in allocs:
            results[name][a.name] = run_case(prog, name, a, timeout)
            if progress:
                progress(name, a.name, results[name][a.name])
    return {"cases": [{"name": n, "group": g, "about": ab, "program": os.path.basename(p)} for p, n, g, ab in cases],
            "results": results, "smoke": smoke}


def totals(result, allocs):
    """{alloc: {outcome: count}}."""
    t = {a: {o: 0 for o in OUTCOMES} for a in allocs}
    for per in result["results"].values():
        for a in allocs:
            if a in per:
                t[a][per[a]["outcome"]] += 1
    return t


_CELL = {"caught": "caught", "trapped": "trapped", "crashed": "crashed", "missed": "**missed**", "n/a": "n/a",
         "error": "error"}


def markdown(result, allocs):
    """The report's section (without its heading)."""
    t = totals(result, allocs)
    n = len(result["cases"])
    md = [f"{n} misuse programs{' (smoke: one size of each misuse)' if result.get('smoke') else ''}, each in its own "
          "process under each allocator with its default settings (`bench/security/`; classes in "
          "`docs/security.md`): **caught** the allocator stopped or reported it (or answered harmlessly), "
          "**trapped** a fault at the bad access itself (guard page or no-access memory), **crashed** a later "
          "signal with no diagnosis (or a hang), **missed** no report (silent corruption included), "
          "**n/a** the case does not apply.", ""]
    trows = [[o] + [t[a][o] for a in allocs] for o in OUTCOMES if o != "error" or any(t[a]["error"] for a in allocs)]
    trows.append(["stopped (caught + trapped)"] + [t[a]["caught"] + t[a]["trapped"] for a in allocs])
    md += [report.md_table(["totals"] + allocs, trows), ""]
    md += ["Stopped (caught or trapped) by kind of misuse:", "", report.md_table(["kind", "cases"] + allocs, by_kind(result, allocs)), ""]
    rows = []
    for c in result["cases"]:
        per = result["results"][c["name"]]
        rows.append([f"`{c['name']}`", c["group"]] + [_CELL[per[a]["outcome"]] if a in per else "-" for a in allocs])
    md += [report.md_table(["misuse", "kind"] + allocs, rows), ""]
    # One line per allocator: what its messages look like (the first one).
    said = []
    for a in allocs:
        msg = next((per[a]["message"] for per in result["results"].values()
                    if a in per and per[a]["outcome"] == "caught" and per[a].get("message")), None)
        if msg:
            said.append(f"- {a}: `{msg[:150].replace(chr(96), chr(39))}`")
    if said:
        md += ["What a caught misuse looks like (first message per allocator; every run's detail is in "
               "`security.csv`):", ""] + said + [""]
    md += [report.md_table(["misuse", "what the program does"], [[f"`{c['name']}`", c["about"]] for c in result["cases"]]), ""]
    return "\n".join(md)


def by_kind(result, allocs):
    """Rows: kind of misuse, its number of cases, and per allocator how many
    of them were stopped (caught or trapped)."""
    kinds = list(dict.fromkeys(c["group"] for c in result["cases"]))
    rows = []
    for k in kinds:
        names = [c["name"] for c in result["cases"] if c["group"] == k]
        stopped = lambda a: sum(result["results"][n].get(a, {}).get("outcome") in ("caught", "trapped") for n in names)
        rows.append([k, len(names)] + [stopped(a) for a in allocs])
    return rows


def write_csv(result, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "group", "alloc", "outcome", "detail", "rc"])
        for c in result["cases"]:
            for a, r in result["results"][c["name"]].items():
                w.writerow([c["name"], c["group"], a, r["outcome"], r["detail"], r["rc"]])


def check(result, allocs):
    """Completeness: every case ran under every allocator and was classified."""
    if result is None:
        return ["security: the misuse programs are not built (bench/security)"]
    problems = []
    for c in result["cases"]:
        per = result["results"].get(c["name"], {})
        for a in allocs:
            if a not in per:
                problems.append(f"security: {c['name']} did not run under {a}")
            elif per[a]["outcome"] == "error":
                problems.append(f"security: {c['name']} under {a}: {per[a]['detail']}")
    return problems


def totals_text(result, allocs):
    """The totals for the terminal: stopped and missed per allocator."""
    t = totals(result, allocs)
    rows = [[label] + [sum(t[a][o] for o in outs) for a in allocs]
            for label, outs in (("stopped", ("caught", "trapped")), ("crashed", ("crashed",)), ("missed", ("missed",)))]
    return report.text_table([""] + allocs, rows)
