"""Writes the report folder: report.md (tables and embedded charts),
results.csv (one line per run), results.json (everything), and returns the
summary table for the terminal."""
import csv
import json
import os

from . import stats
from .stats import PERCENTILES


def _numeric(cell):
    c = str(cell).strip().split(" ")[0].lstrip("±").rstrip("%")
    try:
        float(c)
        return True
    except ValueError:
        return c in ("-", "FAIL", "n/a", "")


def md_table(header, rows):
    """Markdown table; columns whose cells all look numeric are right-aligned."""
    right = [i > 0 and bool(rows) and all(_numeric(r[i]) for r in rows) and any(str(r[i]).strip() for r in rows)
             for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def text_table(header, rows):
    cols = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    fmt = lambda r: "  ".join((c.ljust(w) if i == 0 else c.rjust(w)) for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in cols[1:]])


def _dur(ns):
    """A duration in ns with a unit that keeps it short: 850 ns, 12.3 µs, 4.56 ms, 1.23 s."""
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def _f(x, spec="{:.2f}", none="-"):
    return none if x is None else spec.format(x)


def summary_rows(summary, norm_t, gm_t, gm_c, gm_r, allocs, baseline, fast):
    """Rows: per workload, the baseline's median seconds and every allocator's
    time relative to it; then geometric means; then fastpath-instr."""
    # The last column is the worst spread of the row over all allocators, so a
    # reader sees at once which ratios the machine's noise could have moved.
    header = ["workload", f"{baseline} s"] + allocs + ["max spread"]
    rows = []
    for row, per in summary.items():
        base = per.get(baseline, {}).get("wall_s")
        cells = []
        for a in allocs:
            s = per.get(a, {})
            if s.get("n_ok", 0) == 0:
                cells.append("FAIL" if s.get("n_fail") else "-")
            else:
                cells.append(_f(norm_t[row].get(a), "{:.2f}"))
        spreads = [s["spread_pct"] for s in per.values() if "spread_pct" in s]
        rows.append([row, _f(base, "{:.3f}")] + cells + [f"{max(spreads):.0f}%" if spreads else "-"])
    rows.append(["geomean time", ""] + [_f(gm_t.get(a), "{:.3f}") for a in allocs] + [""])
    # CPU time is less disturbed by other load on a shared machine than wall time.
    rows.append(["geomean user+sys", ""] + [_f(gm_c.get(a), "{:.3f}") for a in allocs] + [""])
    rows.append(["geomean peak RSS", ""] + [_f(gm_r.get(a), "{:.3f}") for a in allocs] + [""])
    if fast:
        rows.append(["fastpath-instr (instr/pair)", ""] +
                    [_f(fast.get(a, {}).get("instr"), "{:.1f}", "n/a") for a in allocs] + [""])
    return header, rows


PAIRED_SUBJECT = "tenon"


def paired_rows(paired_t, paired_c, unpaired_t, others):
    """Rows: per workload, the subject's time over each peer's, paired per
    repeat (median over repeats), and the worst spread of those per-repeat
    ratios; then geometric means of the paired ratios (wall and user+sys)
    and, for comparison, of the ratios of the medians."""
    header = ["workload"] + others + ["max spread"]
    rows = []
    for row, per in paired_t.items():
        spreads = [d["spread_pct"] for d in per.values() if d["spread_pct"] is not None and len(d["ratios"]) > 1]
        rows.append([row] + [_f(per[p]["median"]) for p in others] + [f"{max(spreads):.0f}%" if spreads else "-"])
    gm_t = stats.geomeans(stats.paired_medians(paired_t), others)
    gm_c = stats.geomeans(stats.paired_medians(paired_c), others)
    gm_u = stats.geomeans(unpaired_t, others)
    rows.append(["geomean paired time"] + [_f(gm_t.get(p), "{:.3f}") for p in others] + [""])
    rows.append(["geomean paired user+sys"] + [_f(gm_c.get(p), "{:.3f}") for p in others] + [""])
    rows.append(["geomean of medians' ratio"] + [_f(gm_u.get(p), "{:.3f}") for p in others] + [""])
    return header, rows, {"time": gm_t, "cpu": gm_c, "medians": gm_u}


# The zero-overhead check of the layer API (docs/layers.md): libtenon.so,
# the same composition under three pass_through layers, the fast path fused
# by hand.
COMPOSITION = [("(a) libtenon.so", "tenon"), ("(b) three pass_through layers over it", "tenon-passthrough3"),
               ("(c) fast path fused by hand", "tenon-handfused")]


def composition_cost(fast, allocs, gm_t, gm_r):
    """The report's composition-cost section: instructions per pair of (a),
    (b) and (c), and the suite geomeans of (a) and (b)."""
    if not fast or "tenon" not in allocs:
        return []
    rows = [[name, _f(fast.get(a, {}).get("instr"), "{:.1f}", "n/a"),
             _f(gm_t.get(a)) if a in allocs else "", _f(gm_r.get(a)) if a in allocs else ""]
            for name, a in COMPOSITION if a in allocs or a in fast]
    return ["## Composition cost", "",
            "The layer API's promise, measured: the default allocator, the same under three "
            "`tenon::pass_through` layers, and its fast path written out by hand (not run through "
            "the suite). Instructions per `free(malloc(32))` pair (callgrind, the loop's own included) "
            "and the suite's geometric means relative to the baseline.", "",
            md_table(["build", "instr/pair", "geomean time", "geomean peak RSS"], rows), ""]


def write(out_dir, meta, runs, rows, allocs, baseline, fast, pool_md, freeze, charts, security=None, heaps_md=None):
    summary = stats.summarize(runs, rows, allocs)
    norm_t = stats.normalise(summary, baseline, "wall_s")
    norm_r = stats.normalise(summary, baseline, "rss_kib")
    norm_c = stats.normalise(summary, baseline, "cpu_s")
    gm_t, gm_r = stats.geomeans(norm_t, allocs), stats.geomeans(norm_r, allocs)
    gm_c = stats.geomeans(norm_c, allocs)
    labels = {w.kind: label for w, _, label in rows}
    size_t = stats.size_table(runs, labels["size"]) if "size" in labels else {}
    chunk_t = stats.chunk_table(runs, labels["chunk"]) if "chunk" in labels else {}
    lat_t = stats.latency_table(runs, labels["latency"]) if "latency" in labels else {}
    opsize_t = stats.op_size_table(runs, labels["opsize"]) if "opsize" in labels else {}
    scale_t = stats.scaling_table(runs, labels["scaling"]) if "scaling" in labels else {}
    replays = [(w, label) for w, _, label in rows if w.kind == "replay"]

    files = {}
    if charts is not None:
        files = charts(summary, norm_t, norm_r, size_t, chunk_t, lat_t, opsize_t, scale_t)

    header, srows = summary_rows(summary, norm_t, gm_t, gm_c, gm_r, allocs, baseline, fast)
    subject = PAIRED_SUBJECT if PAIRED_SUBJECT in allocs else None
    others = [a for a in allocs if a != subject]
    paired_t = stats.paired_ratios(runs, rows, subject, others, "wall_s") if subject and others else {}
    paired_c = stats.paired_ratios(runs, rows, subject, others, "cpu_s") if paired_t else {}
    unpaired_t = stats.ratio_of_medians(summary, subject, others, "wall_s") if paired_t else {}
    paired_gm = {}
    if paired_t:
        pheader, prows, paired_gm = paired_rows(paired_t, paired_c, unpaired_t, others)
    md = [f"# tenon benchmark report", "",
          f"Medians of {meta['repeat']} interleaved run(s) per allocator (fewer where noted); "
          f"times and RSS relative to **{baseline}** (lower is better). "
          "Ratios measured side by side in one run are what counts; absolute times on a shared machine are noise.", "",
          "## Run", ""]
    md += [f"- {k}: {v}" for k, v in meta["info"].items()]
    md += ["", md_table(["allocator", "library", "version", "notes"],
                        [[a["name"], a["path"] or "(system malloc)", a["version"] or "-", "; ".join(a["notes"]) or ""]
                         for a in meta["allocators"]])]
    if meta["skipped"]:
        md += ["", "Skipped: " + "; ".join(f"**{n}** ({why})" for n, why in meta["skipped"])]
    if meta.get("skipped_rows"):
        md += ["", "Rows skipped: " + "; ".join(f"**{n}** ({why})" for n, why in meta["skipped_rows"])]
    md += ["", "## Summary: time relative to " + baseline, "", md_table(header, srows), ""]
    if paired_t:
        md += [f"## Paired: {subject}'s time over each peer's", "",
               f"In every repeat the allocators ran one row back to back, so {subject}'s time over a peer's in the "
               "same repeat cancels load that came and went between repeats; the table gives the median of those "
               f"per-repeat ratios (below 1: {subject} faster) and the worst spread ((max − min) / median) of them over the "
               "peers. The geometric means are over rows; the last line is the same over the ratios of the medians, "
               "for comparison.", "", md_table(pheader, prows), ""]
    chart_titles = [("norm_time", "Time relative to " + baseline), ("norm_rss", "Peak RSS relative to " + baseline),
                    ("size_sweep", "Time against allocation size"), ("thread_chunks", "Per-thread chunks against size"),
                    ("threads", "Throughput against threads"), ("latency", "Latency percentiles (log scale)"),
                    ("op_size", "Time per call against block size"),
                    ("thread_scaling", "Time against threads (1 ... 20)")]
    md += ["## Charts", ""]
    for key, title in chart_titles:
        if files.get(key):
            md += [f"### {title}", "", f"![{title}]({files[key]})", ""]
    if charts is None:
        md += ["(no charts: matplotlib is not installed; `apt-get install python3-matplotlib`)", ""]

    def per_alloc_table(title, fn, note=""):
        t_rows = [[row] + [fn(per.get(a, {})) for a in allocs] for row, per in summary.items()]
        return [f"## {title}", "", note, "", md_table(["workload"] + allocs, t_rows), ""] if note else \
               [f"## {title}", "", md_table(["workload"] + allocs, t_rows), ""]

    md += per_alloc_table("Wall time (median s, spread %)",
                          lambda s: f"{s['wall_s']:.3f} ±{s['spread_pct']:.0f}%" if "wall_s" in s else "-",
                          "Spread is (max − min) / median over the repeats.")
    md += per_alloc_table("User+sys time (median s)", lambda s: _f(s.get("cpu_s"), "{:.3f}"))
    md += per_alloc_table("Peak RSS (median MiB, relative to " + baseline + ")",
                          lambda s: "-" if "rss_kib" not in s else f"{s['rss_kib'] / 1024:.1f}")
    md += ["Peak RSS relative to " + baseline + ":", "",
           md_table(["workload"] + allocs, [[row] + [_f(norm_r[row].get(a)) for a in allocs] for row in summary]), ""]
    md += per_alloc_table("Page faults (median minor / major)",
                          lambda s: "-" if "minflt" not in s else f"{s['minflt']:.0f} / {s['majflt']:.0f}")

    md += ["## Fast path: `fastpath-instr`", "",
           "Instructions per `free(malloc(32))` pair, from callgrind at N and 2N iterations: (I(2N) − I(N)) / N, "
           "the loop's own 10 included; `mixed`: the sizes 16, 32, …, 352 bytes in turn (the loop's 14 included).", ""]
    if fast:
        md += [md_table(["row"] + allocs, [
            ["fastpath-instr"] + [_f(fast.get(a, {}).get("instr"), "{:.1f}", "n/a") for a in allocs],
            ["fastpath-instr mixed 16–352 B"] + [_f(fast.get(a, {}).get("mixed"), "{:.1f}", "n/a") for a in allocs]]), ""]
        errors = sorted({r["error"] for r in fast.values() if "error" in r})
        md += [f"n/a: {e}" for e in errors] + ([""] if errors else [])
    else:
        md += ["(not run)", ""]

    md += composition_cost(fast, allocs, gm_t, gm_r)

    if size_t:
        keys = sorted({k for cells in size_t.values() for k in cells}, key=lambda k: (k[0] != "malloc", k[1]))
        md += ["## Time against allocation size", "",
               "Time per call (malloc or calloc + touch every page + free) / peak RSS ÷ requested. "
               "RSS counts from the program's RSS at start, so what the allocator kept from earlier steps shows here too.", "",
               md_table(["op", "MiB"] + allocs, [[op, b >> 20] + [
                   (lambda v: "-" if not v else f"{_dur(v['ns_per_call'])} / {v['rss_ratio']:.2f}")(size_t.get(a, {}).get((op, b)))
                   for a in allocs] for op, b in keys]), ""]
    if chunk_t:
        keys = sorted({k for cells in chunk_t.values() for k in cells})
        md += ["## Per-thread chunks", "",
               "Time per malloc+memset+free (wall time of the cell ÷ calls per thread) / peak RSS ÷ (threads × chunk). "
               "RSS counts from the program's RSS at start: thread stacks, per-thread caches and what the allocator "
               "kept from earlier cells (the previous one had 33 MiB chunks) show here too.", "",
               md_table(["threads", "KiB"] + allocs, [[t, b >> 10] + [
                   (lambda v: "-" if not v else f"{_dur(v['ns_per_call'])} / {v['rss_ratio']:.2f}")(chunk_t.get(a, {}).get((t, b)))
                   for a in allocs] for t, b in keys]), ""]
    if lat_t:
        unit = next((d.get("unit") for ops in lat_t.values() for d in ops.values()), "")
        lrows = []
        for op in ("malloc", "free"):
            for a in allocs:
                d = lat_t.get(a, {}).get(op)
                if d:
                    lrows.append([f"{op} {a}"] + [_f(d.get(p), "{:.0f}") for p in PERCENTILES] + [d.get("n", 0)])
        md += [f"## Latency ({unit})", "", "Sampled one call in eight; medians of each percentile over the repeats, max of max.", "",
               md_table(["op / allocator"] + PERCENTILES + ["samples"], lrows), ""]
    if opsize_t:
        keys = sorted({k for cells in opsize_t.values() for k in cells},
                      key=lambda k: (stats.OPSIZE_OPS.index(k[0]) if k[0] in stats.OPSIZE_OPS else 9, k[1]))
        md += ["## Time per call against block size", "",
               "One call on its own (`op-size`): a batch of up to 256 blocks of the size (about 8 MiB in all, at "
               "least one) is allocated, freed, calloc'd, or grown by realloc from half the size, and only the calls "
               "are timed; every page of every block is written between the timed batches. Median of 3 rounds.", "",
               md_table(["op", "KiB"] + allocs, [[op, b >> 10] + [_dur(opsize_t.get(a, {}).get((op, b))) for a in allocs]
                                                for op, b in keys]), ""]
    if scale_t:
        ncpu = os.cpu_count() or 1
        threads = sorted({t for cells in scale_t.values() for t in cells})
        md += ["## Time against threads", "",
               f"`thread-scaling`: the same work (random replacements, one in 8 handed to another thread and freed "
               f"there) split over 1 ... {threads[-1]} threads; ns per operation, all threads together, median of 3 "
               f"trials in each run, medians over the runs (lower is "
               f"better). **This machine has {ncpu} CPUs: from {ncpu + 1} threads on the threads are oversubscribed** "
               "(more threads than CPUs, so threads are preempted in the middle of allocator calls and the others "
               "must not wait for them).", "",
               md_table(["threads"] + allocs, [[t if t <= ncpu else f"{t} (over)"] +
                                               [_f(scale_t.get(a, {}).get(t), "{:.1f}") for a in allocs]
                                               for t in threads]), ""]
    if replays:
        md += ["## Replayed programs", "",
               "Traces of real programs recorded once with `libtenon-trace.so` (over glibc) and replayed by "
               "`tenon-replay` under each allocator, one replay thread per traced thread (docs/measure.md). A "
               "replay row's time and peak RSS are the replay's own (its REPLAY line: without reading and planning "
               "the trace); user+sys is the whole process. Latency: 1 call in 8 timed, ns, medians over the "
               "repeats (max: the largest).", ""]
        for w, label in replays:
            info = stats.trace_info(runs, label)
            lat = stats.latency_table(runs, label)
            md += [f"### {label}", "", f"{w.about}. The trace: {info.get('calls', '?')} calls "
                   f"({info.get('malloc', 0)} malloc, {info.get('calloc', 0)} calloc, {info.get('realloc', 0)} realloc, "
                   f"{info.get('aligned', 0)} aligned, {info.get('free', 0)} free), {info.get('threads', '?')} thread(s), "
                   f"{info.get('bytes', 0) / 2**20:.0f} MiB asked.", ""]
            lrows = []
            for op in ("malloc", "free"):
                for a in allocs:
                    d = lat.get(a, {}).get(op)
                    if d:
                        lrows.append([f"{op} {a}"] + [_f(d.get(p), "{:.0f}") for p in PERCENTILES])
            if lrows:
                md += [md_table(["op / allocator"] + PERCENTILES, lrows), ""]
    md += ["## Bulk pool", ""]
    md += [pool_md if pool_md else "(not run: `bench/pool/mass_pool_bench` is not built)", ""]
    md += ["## First-class heaps", ""]
    md += [heaps_md if heaps_md else "(not run: `bench/heaps/heap_tree_bench` is not built)", ""]
    md += ["## Freeze test", "",
           "Does a thread frozen at an arbitrary instruction inside the allocator stop the others? (`tests/freeze/freeze_probe`)", ""]
    if freeze:
        args = next((r["args"] for r in freeze.values() if "args" in r), "")
        md += [f"`freeze_probe {args}`; a freeze is *stalled* when some other thread did not progress before the deadline.", "",
               md_table(["allocator", "freezes", "stalled", "max stall ms", "malloc from"],
                        [[a] + ([r["freezes"], r["stalled"], f"{r['max_stall_ms']:.1f}", os.path.basename(r["malloc_from"])]
                                if "error" not in r else ["error", r["error"][:120], "", ""]) for a, r in freeze.items()]), ""]
    else:
        md += ["(not run: `tests/freeze/freeze_probe` is not built)", ""]
    if security:
        from . import security as secbench  # here: security.py uses md_table from this module
        md += ["## Security: misuse programs", "", secbench.markdown(security, allocs), ""]
        secbench.write_csv(security, os.path.join(out_dir, "security.csv"))
    fails = [r for r in runs if not r["ok"]]
    if fails:
        md += ["## Failed runs", "", md_table(["row", "allocator", "rep", "exit", "stderr"],
               [[r["row"], r["alloc"], r["rep"], "timeout" if r["timed_out"] else r["rc"],
                 r["stderr"].strip().replace("\n", " ").replace("|", "/")[-160:]] for r in fails]), ""]
    if rows:
        md += ["## Workloads", "", md_table(["workload", "what it does"], [[w.name, w.about] for w in
           dict((w.name, w) for w, _, _ in rows).values()]), ""]
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(md))

    fields = ["row", "workload", "threads", "alloc", "rep", "ok", "rc", "timed_out", "wall_s", "user_s", "sys_s",
              "maxrss_kib", "minflt", "majflt", "load1"]
    with open(os.path.join(out_dir, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in runs:
            w.writerow(r)
    tuple_keys = lambda t: {a: {",".join(map(str, k)): v for k, v in cells.items()} for a, cells in t.items()}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "baseline": baseline, "runs": runs, "summary": summary,
                   "paired_subject": subject, "paired_time": paired_t, "paired_cpu": paired_c,
                   "paired_geomeans": paired_gm,
                   "normalised_time": norm_t, "normalised_rss": norm_r,
                   "geomean_time": gm_t, "geomean_cpu": gm_c, "geomean_rss": gm_r, "fastpath_instr": fast,
                   "size_sweep": tuple_keys(size_t), "thread_chunks": tuple_keys(chunk_t), "latency": lat_t,
                   "op_size": {a: {",".join(map(str, k)): v for k, v in cells.items()} for a, cells in opsize_t.items()},
                   "thread_scaling": scale_t,
                   "pool_markdown": pool_md, "heaps_markdown": heaps_md, "freeze": freeze, "security": security, "charts": files},
                  f, indent=1, default=str)
    paired_text = text_table(pheader, prows) if paired_t else None
    return text_table(header, srows), files, paired_text
