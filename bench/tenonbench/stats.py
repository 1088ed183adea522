"""Medians, spreads, normalisation and geometric means over the raw runs."""
import math
import statistics

PERCENTILES = ["p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999", "max"]


def median(xs):
    return statistics.median(xs) if xs else None


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(runs, rows, allocs):
    """summary[row][alloc] = medians and spread of the successful runs."""
    summary = {}
    for _, _, label in rows:
        summary[label] = {}
        for a in allocs:
            rs = [r for r in runs if r["row"] == label and r["alloc"] == a]
            ok = [r for r in rs if r["ok"]]
            walls = [r["wall_s"] for r in ok]
            s = {"n_ok": len(ok), "n_fail": len(rs) - len(ok)}
            if ok:
                med = median(walls)
                s.update({
                    "wall_s": med,
                    "wall_min": min(walls),
                    "wall_max": max(walls),
                    # spread: (max - min) / median, in percent
                    "spread_pct": 100.0 * (max(walls) - min(walls)) / med if med else 0.0,
                    "cpu_s": median([r["user_s"] + r["sys_s"] for r in ok]),
                    "rss_kib": median([r["maxrss_kib"] for r in ok]),
                    "minflt": median([r["minflt"] for r in ok]),
                    "majflt": median([r["majflt"] for r in ok]),
                })
            summary[label][a] = s
    return summary


def normalise(summary, baseline, key):
    """norm[row][alloc] = value / baseline's value (None when either is missing)."""
    out = {}
    for row, per in summary.items():
        base = per.get(baseline, {}).get(key)
        out[row] = {a: (s.get(key) / base if base and s.get(key) is not None else None) for a, s in per.items()}
    return out


def geomeans(norm, allocs):
    return {a: geomean([per.get(a) for per in norm.values() if per.get(a)]) for a in allocs}


def _cells(runs, label, tag, keys):
    """{alloc: {key tuple: [metric dicts]}} from the runs' parsed output."""
    out = {}
    for r in runs:
        if r["row"] != label or not r["ok"]:
            continue
        for m in r["metrics"].get(tag, []):
            out.setdefault(r["alloc"], {}).setdefault(tuple(m.get(k) for k in keys), []).append(m)
    return out


def size_table(runs, label):
    """{alloc: {(op, bytes): {ns_per_call, rss_ratio, peak_rss_kib}}} medians."""
    cells = _cells(runs, label, "SIZE", ["op", "bytes"])
    return {a: {k: {f: median([m[f] for m in ms]) for f in ("ns_per_call", "rss_ratio", "peak_rss_kib")}
                for k, ms in per.items()} for a, per in cells.items()}


def chunk_table(runs, label):
    cells = _cells(runs, label, "CHUNK", ["threads", "bytes"])
    return {a: {k: {f: median([m[f] for m in ms]) for f in ("ns_per_call", "rss_ratio", "peak_rss_kib")}
                for k, ms in per.items()} for a, per in cells.items()}


def latency_table(runs, label):
    """{alloc: {op: {pct: median over runs (max: the largest)}, unit}}"""
    cells = _cells(runs, label, "LAT", ["op"])
    out = {}
    for a, per in cells.items():
        out[a] = {}
        for (op,), ms in per.items():
            d = {p: (max if p == "max" else median)([m[p] for m in ms if p in m]) for p in PERCENTILES}
            d["unit"] = ms[0].get("unit", "")
            d["n"] = sum(m.get("n", 0) for m in ms)
            out[a][op] = d
    return out


def _value(run, key):
    """A run's measure: wall_s, or cpu_s = user + sys."""
    if run is None:
        return None
    return run["user_s"] + run["sys_s"] if key == "cpu_s" else run.get(key)


def paired_ratios(runs, rows, subject, others, key="wall_s"):
    """paired[row][peer] = {"ratios", "median", "spread_pct"}: in every repeat
    where both ran successfully, subject's value over the peer's (they ran
    back to back, so load that came and went hit both alike), and the median
    over repeats. A repeat where either failed gives no ratio."""
    ok = {(r["row"], r["alloc"], r["rep"]): r for r in runs if r["ok"]}
    out = {}
    for _, _, label in rows:
        reps = sorted({r["rep"] for r in runs if r["row"] == label})
        out[label] = {}
        for peer in others:
            ratios = []
            for rep in reps:
                a = _value(ok.get((label, subject, rep)), key)
                b = _value(ok.get((label, peer, rep)), key)
                if a and b:
                    ratios.append(a / b)
            med = median(ratios)
            out[label][peer] = {"ratios": ratios, "median": med,
                                "spread_pct": 100.0 * (max(ratios) - min(ratios)) / med if med else None}
    return out


def paired_medians(paired):
    """{row: {peer: median ratio}}, the shape geomeans() takes."""
    return {row: {p: d["median"] for p, d in per.items()} for row, per in paired.items()}


def ratio_of_medians(summary, subject, others, key="wall_s"):
    """{row: {peer: subject's median / peer's median}}: the unpaired ratio,
    for comparison with the paired one."""
    out = {}
    for row, per in summary.items():
        a = per.get(subject, {}).get(key)
        out[row] = {p: (a / per[p][key] if a and per.get(p, {}).get(key) else None) for p in others}
    return out


OPSIZE_OPS = ["malloc", "free", "calloc", "realloc"]


def op_size_table(runs, label):
    """{alloc: {(op, bytes): median ns per call}} from op-size's OPSIZE lines."""
    cells = _cells(runs, label, "OPSIZE", ["op", "bytes"])
    return {a: {k: median([m["ns_per_call"] for m in ms]) for k, ms in per.items()} for a, per in cells.items()}


def scaling_table(runs, label):
    """{alloc: {threads: median ns per operation}} from thread-scaling's SCALE lines."""
    cells = _cells(runs, label, "SCALE", ["threads"])
    return {a: {k[0]: median([m["ns_per_op"] for m in ms]) for k, ms in per.items()} for a, per in cells.items()}


def trace_info(runs, label):
    """What a replay row's trace holds (its TRACE line), from any run of it."""
    for r in runs:
        if r["row"] == label and r["metrics"].get("TRACE"):
            return r["metrics"]["TRACE"][0]
    return {}
