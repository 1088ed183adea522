"""Runs one workload process with an allocator preloaded and measures it
from outside: wall time around the child, and the child's own rusage from
wait4 (user+sys time, peak RSS, minor/major page faults). With a launcher
(bench/workloads/launch) the wait4 happens there, so that the driver's own
RSS is not inherited into the workload's peak RSS; see launch.c."""
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

_KV = re.compile(r"([A-Za-z0-9_.]+)=([^\s]+)")


def _num(v):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def parse_metrics(text):
    """Lines 'TAG k=v k=v ...' become {'TAG': [dict, ...]}; 'OK ...' marks success."""
    out = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if not parts or not parts[0].isupper():
            continue
        kv = {k: _num(v) for k, v in _KV.findall(parts[1] if len(parts) > 1 else "")}
        out.setdefault(parts[0], []).append(kv)
    return out


def run(cmd, env, timeout, launcher=None):
    """Returns a dict with rc, wall_s, user_s, sys_s, maxrss_kib, minflt,
    majflt, stdout, stderr (tails) and timed_out."""
    usage_file = None
    if launcher:
        fd, usage_file = tempfile.mkstemp(prefix="tenon-bench-")
        os.close(fd)
        cmd = [launcher, usage_file] + list(cmd)
    try:
        r = _run(cmd, env, timeout)
        if usage_file:
            with open(usage_file) as f:
                u = {k: _num(v) for k, v in _KV.findall(f.read())}
            if "status" in u:
                r.update({k: u[k] for k in ("wall_s", "user_s", "sys_s", "maxrss_kib", "minflt", "majflt")})
                r["rc"] = u["status"]
    finally:
        if usage_file:
            os.unlink(usage_file)
    return r


def _run(cmd, env, timeout):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as e:
            return {"rc": -1, "wall_s": 0.0, "user_s": 0.0, "sys_s": 0.0, "maxrss_kib": 0, "minflt": 0,
                    "majflt": 0, "stdout": "", "stderr": str(e), "timed_out": False}
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        except KeyboardInterrupt:
            # The child has its own session, so ^C did not reach it: end it here.
            kill()
            os.wait4(proc.pid, 0)
            raise
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # we reaped it, tell Popen
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    return {
        "rc": proc.returncode,
        "wall_s": wall,
        "user_s": ru.ru_utime,
        "sys_s": ru.ru_stime,
        "maxrss_kib": ru.ru_maxrss,
        "minflt": ru.ru_minflt,
        "majflt": ru.ru_majflt,
        "stdout": stdout,
        "stderr": stderr[-2000:],
        "timed_out": timed_out.is_set(),
    }
