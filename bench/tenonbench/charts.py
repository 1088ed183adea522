"""PNG charts for the report (matplotlib, Agg backend: no display needed).
Every function returns the file name it wrote, or None when it had no data."""
import os

from .stats import PERCENTILES

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullLocator
    HAVE_MPL = True
except ImportError:  # run.py re-executes under a Python that has it when it can
    HAVE_MPL = False


def use_palette(allocs):
    """Ten colours cycle; more allocators than that (the peers built from
    source bring the report to ten) get tab20, so no two share a colour."""
    if HAVE_MPL and len(allocs) > 10:
        from cycler import cycler
        plt.rcParams["axes.prop_cycle"] = cycler(color=plt.get_cmap("tab20").colors)


RATIO_TICKS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 10, 20, 50, 100]


def _save(fig, out_dir, name):
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), dpi=90)
    plt.close(fig)
    return name


def normalised_bars(norm, allocs, baseline, out_dir, name, what):
    """One small panel per workload (its thread counts side by side), one bar
    per allocator, log scale around 1 = the baseline."""
    groups = {}
    for row in norm:
        if any(norm[row].get(a) for a in allocs):
            wname, _, t = row.partition("/")
            groups.setdefault(wname, []).append((t or "", row))
    if not groups:
        return None
    cols = min(4, len(groups))
    nrows = (len(groups) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 2.6 * nrows), squeeze=False)
    w = 0.8 / max(1, len(allocs))
    for k, (wname, members) in enumerate(groups.items()):
        ax = axes[k // cols][k % cols]
        for i, a in enumerate(allocs):
            xs = [j + (i - (len(allocs) - 1) / 2) * w for j in range(len(members))]
            ys = [norm[row].get(a) or 0 for _, row in members]
            ax.bar(xs, ys, width=w, label=a, color=f"C{i}")
        ax.axhline(1.0, color="black", linewidth=0.8)
        vals = [norm[row][a] for _, row in members for a in allocs if norm[row].get(a)] + [1.0]
        lo, hi = min(vals) / 1.25, max(vals) * 1.25
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        # A few plain ratios (0.5, 2) read better than 10^x on a ratio axis.
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_yticks([t for t in RATIO_TICKS if lo <= t <= hi])
        ax.yaxis.set_major_formatter(FormatStrFormatter("%.3g"))
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xticks(range(len(members)))
        ax.set_xticklabels([t for t, _ in members], fontsize=7)
        ax.set_title(wname, fontsize=9)
    for k in range(len(groups), nrows * cols):
        axes[k // cols][k % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.suptitle(f"{what} relative to {baseline} (lower is better, log scale)", fontsize=10, y=0.995)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.975), ncol=len(allocs), fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(os.path.join(out_dir, name), dpi=90)
    plt.close(fig)
    return name


def size_sweep(table, out_dir, name="size_sweep.png"):
    if not table:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for a, cells in table.items():
        for ax, op in zip(axes[:2], ("malloc", "calloc")):
            pts = sorted((b, v["ns_per_call"]) for (o, b), v in cells.items() if o == op)
            if pts:
                ax.plot([p[0] / 2**20 for p in pts], [p[1] for p in pts], marker="o", label=a)
        pts = sorted((b, v["rss_ratio"]) for (o, b), v in cells.items() if o == "malloc")
        if pts:
            axes[2].plot([p[0] / 2**20 for p in pts], [p[1] for p in pts], marker="o", label=a)
    for ax, title in zip(axes, ("malloc + touch + free", "calloc + touch + free", "peak RSS / requested (malloc)")):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FormatStrFormatter("%d"))
        ax.set_xlabel("block size (MiB)")
        ax.set_title(title, fontsize=9)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    axes[0].set_ylabel("ns per call")
    axes[0].legend(fontsize=7)
    return _save(fig, out_dir, name)


def thread_chunks(table, out_dir, name="thread_chunks.png"):
    if not table:
        return None
    threads = sorted({t for cells in table.values() for (t, _) in cells})
    fig, axes = plt.subplots(1, len(threads), figsize=(3.2 * len(threads), 3.6), squeeze=False)
    for ax, t in zip(axes[0], threads):
        for a, cells in table.items():
            pts = sorted((b, v["ns_per_call"]) for (tt, b), v in cells.items() if tt == t)
            ax.plot([p[0] / 1024 for p in pts], [p[1] for p in pts], marker="o", label=a)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({b // 1024 for cells in table.values() for (tt, b) in cells if tt == t}))
        ax.xaxis.set_major_formatter(FormatStrFormatter("%d"))
        ax.tick_params(axis="x", labelsize=6, rotation=45)
        ax.set_yscale("log")
        ax.set_title(f"{t} thread{'s' if t != 1 else ''}", fontsize=9)
        ax.set_xlabel("chunk (KiB)")
    axes[0][0].set_ylabel("ns per malloc+memset+free")
    axes[0][0].legend(fontsize=7)
    return _save(fig, out_dir, name)


def scaling(summary, rows, allocs, baseline, ncpu, out_dir, name="threads.png"):
    """Throughput (fixed work / wall time) against threads, per workload,
    relative to the baseline at the lowest thread count."""
    by_wl = {}
    for w, t, label in rows:
        if t is not None and w.threaded and not w.fixed_threads:
            by_wl.setdefault(w.name, []).append((t, label))
    by_wl = {k: v for k, v in by_wl.items() if len(v) > 1}
    if not by_wl:
        return None
    n = len(by_wl)
    cols = min(4, n)
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(3.4 * cols, 3.0 * nrows), squeeze=False)
    for k, (wname, pts) in enumerate(sorted(by_wl.items())):
        ax = axes[k // cols][k % cols]
        pts.sort()
        base = summary[pts[0][1]].get(baseline, {}).get("wall_s")
        for a in allocs:
            xs, ys = [], []
            for t, label in pts:
                wall = summary[label].get(a, {}).get("wall_s")
                if wall and base:
                    xs.append(t)
                    ys.append(base / wall)
            ax.plot(xs, ys, marker="o", label=a)
        ax.axvline(ncpu, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({t for t, _ in pts}))
        ax.xaxis.set_major_formatter(FormatStrFormatter("%d"))
        ax.set_title(wname, fontsize=9)
        ax.set_xlabel("threads (dotted: cores)")
    for k in range(n, nrows * cols):
        axes[k // cols][k % cols].axis("off")
    axes[0][0].set_ylabel(f"throughput vs {baseline} at {min(t for v in by_wl.values() for t, _ in v)} thr")
    axes[0][0].legend(fontsize=7)
    return _save(fig, out_dir, name)


def latency(table, out_dir, name="latency.png"):
    if not table:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    unit = ""
    for a, ops in table.items():
        for ax, op in zip(axes, ("malloc", "free")):
            d = ops.get(op)
            if d:
                unit = d.get("unit", unit)
                ax.plot(range(len(PERCENTILES)), [d[p] or 1 for p in PERCENTILES], marker="o", label=a)
    for ax, op in zip(axes, ("malloc", "free")):
        ax.set_yscale("log")
        ax.set_xticks(range(len(PERCENTILES)))
        ax.set_xticklabels(PERCENTILES, fontsize=7, rotation=30)
        ax.set_title(f"{op} latency", fontsize=9)
        ax.set_ylabel(unit)
    axes[0].legend(fontsize=7)
    return _save(fig, out_dir, name)


def op_size(table, out_dir, name="op_size.png"):
    """Time of one call against block size, a panel per call."""
    if not table:
        return None
    ops = ["malloc", "free", "calloc", "realloc"]
    fig, axes = plt.subplots(1, 4, figsize=(16, 4))
    for a, cells in table.items():
        for ax, op in zip(axes, ops):
            pts = sorted((b, v) for (o, b), v in cells.items() if o == op and v)
            if pts:
                ax.plot([p[0] / 1024 for p in pts], [p[1] for p in pts], marker=".", label=a)
    for ax, op in zip(axes, ops):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        sizes = sorted({b // 1024 for cells in table.values() for (_, b) in cells})
        ax.set_xticks([k for k in sizes if k in (1, 16, 256, 4096, 65536)] or sizes[:1])
        ax.xaxis.set_major_formatter(FormatStrFormatter("%d"))
        ax.set_xlabel("block size (KiB)")
        ax.set_title(op + (" (from half the size)" if op == "realloc" else ""), fontsize=9)
    axes[0].set_ylabel("ns per call")
    axes[0].legend(fontsize=7)
    return _save(fig, out_dir, name)


def thread_scaling(table, ncpu, out_dir, name="thread_scaling.png"):
    """Time per operation against threads 1 ... N; beyond the machine's CPU
    count the threads are oversubscribed (shaded)."""
    if not table:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.2))
    top = max(t for cells in table.values() for t in cells)
    for a, cells in table.items():
        pts = sorted(cells.items())
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=a)
    if top > ncpu:
        ax.axvspan(ncpu + 0.5, top + 0.5, color="grey", alpha=0.12)
        ax.text(ncpu + 0.8, 0.03, f"oversubscribed: more threads than the {ncpu} CPUs", transform=ax.get_xaxis_transform(),
                fontsize=8, va="bottom")
    ax.set_xticks(range(1, top + 1))
    ax.tick_params(axis="x", labelsize=7)
    ax.set_yscale("log")
    ax.set_xlabel("threads")
    ax.set_ylabel("ns per operation (all threads together)")
    ax.set_title("thread-scaling: the same work over 1 ... %d threads" % top, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, out_dir, name)
