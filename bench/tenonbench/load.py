"""How busy the machine was around a benchmark run: load averages and CPU
count at start and end, and the share of CPU time that was busy over the
run (from /proc/stat), split into the workloads' own user+sys time and the
rest (other processes, the driver, the kernel). A reader of the report then
knows how far the machine's noise could have moved the figures."""
import os
import time

# /proc/stat "cpu" fields: user nice system idle iowait irq softirq steal
# (guest and guest_nice are already counted in user and nice).
_IDLE, _IOWAIT, _STEAL = 3, 4, 7


def parse_proc_stat(text):
    """{"busy", "idle", "steal", "total"} in clock ticks, all CPUs together."""
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "cpu":
            v = [int(x) for x in f[1:9]] + [0] * max(0, 8 - len(f[1:9]))
            idle = v[_IDLE] + v[_IOWAIT]
            total = sum(v)
            return {"busy": total - idle - v[_STEAL], "idle": idle, "steal": v[_STEAL], "total": total}
    return None


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load1():
    """The 1-minute load average now, or None where the system has none."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def snapshot():
    try:
        with open("/proc/stat") as f:
            stat = parse_proc_stat(f.read())
    except OSError:
        stat = None
    try:
        la = list(os.getloadavg())
    except OSError:
        la = None
    return {"time": time.time(), "loadavg": la, "cpus": os.cpu_count() or 1, "usable_cpus": usable_cpus(),
            "stat": stat}


def summarize(start, end, workload_cpu_s):
    """Busy shares over the run, in percent of all CPUs' time: busy (any
    process), own (the workloads' user+sys as their rusage says), other
    (busy − own, never below 0) and steal (taken by the hypervisor)."""
    out = {"seconds": end["time"] - start["time"]}
    a, b = start.get("stat"), end.get("stat")
    if a and b and b["total"] > a["total"]:
        ticks = b["total"] - a["total"]
        busy = 100.0 * (b["busy"] - a["busy"]) / ticks
        # The workloads' rusage is in seconds: compare it with all CPUs' seconds.
        capacity_s = out["seconds"] * end["cpus"]
        own = 100.0 * workload_cpu_s / capacity_s if capacity_s > 0 else None
        out.update({"busy_pct": busy, "steal_pct": 100.0 * (b["steal"] - a["steal"]) / ticks, "own_pct": own,
                    "other_pct": max(0.0, busy - own) if own is not None else None})
    return out


def _la(s):
    la = s.get("loadavg")
    if not la:
        return "unknown"
    cpus = f"{s['cpus']} CPUs" + (f" ({s['usable_cpus']} usable)" if s["usable_cpus"] != s["cpus"] else "")
    return f"{la[0]:.2f} / {la[1]:.2f} / {la[2]:.2f} (1 / 5 / 15 min) on {cpus}"


def describe(start, end, workload_cpu_s):
    """Lines for the report's run information."""
    s = summarize(start, end, workload_cpu_s)
    lines = {"load at start": _la(start), "load at end": _la(end)}
    if "busy_pct" in s:
        lines["CPU use over the timed runs"] = (
            f"{s['busy_pct']:.0f}% busy over {s['seconds']:.{0 if s['seconds'] >= 10 else 1}f} s: "
            f"the workloads' own user+sys "
            f"{s['own_pct']:.0f}%, other processes (and the driver) {s['other_pct']:.0f}%"
            + (f", steal {s['steal_pct']:.0f}%" if s["steal_pct"] >= 0.5 else ""))
    return lines, s
