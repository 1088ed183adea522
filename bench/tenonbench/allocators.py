"""Finds the allocators to compare: glibc (no preload), tenon and its
variants from the build folder, the Debian peers through `ldconfig -p`, the
peers built from source into BUILD/peers by scripts/build-peers.sh, and any
NAME=PATH given on the command line. Each candidate is probed once so a
library that cannot be preloaded is reported as skipped, not as a failed run."""
from __future__ import annotations

import glob
import os
import platform
import subprocess
from dataclasses import dataclass, field

# Debian package names, for the install hint in the report.
PEERS = [
    ("jemalloc", ["libjemalloc.so.2"], "libjemalloc2"),
    ("tcmalloc", ["libtcmalloc_minimal.so.4", "libtcmalloc.so.4"], "libgoogle-perftools4"),
    ("mimalloc", ["libmimalloc.so.2"], "libmimalloc2.0"),
]

# Peers Debian does not ship, built from their crates' sources by
# scripts/build-peers.sh: BUILD/peers/NAME.so and NAME.version, or
# NAME.skipped with the reason the build gave.
SOURCE_PEERS = ["mimalloc3", "mimalloc2-src", "mimalloc-secure", "snmalloc", "rpmalloc"]

# scudo (LLVM's hardened allocator) ships in LLVM's compiler runtime, not as
# a library of its own: Debian's libclang-rt-N-dev. Its standalone build is
# preloadable; the newest LLVM's copy is taken.
SCUDO_PACKAGE = "libclang-rt-16-dev"
SCUDO_GLOBS = ["/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-{arch}.so",
               "/usr/lib/llvm-*/lib/clang/*/lib/{arch}-*linux-gnu/libclang_rt.scudo_standalone.so"]


@dataclass
class Allocator:
    name: str
    path: str | None  # None: the system malloc, nothing preloaded
    version: str = ""
    notes: list = field(default_factory=list)

    def launch_env(self):
        """For bench/workloads/launch, which sets LD_PRELOAD in the workload only."""
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env["TENON_BENCH_PRELOAD"] = self.path or ""
        return env

    def env(self, base=None):
        env = dict(os.environ if base is None else base)
        env.pop("LD_PRELOAD", None)
        if self.path:
            env["LD_PRELOAD"] = self.path
        return env


def _ldconfig():
    """{soname: path} from `ldconfig -p`, only entries for this machine's ABI
    (a multilib system also lists 32-bit copies)."""
    out = ""
    for exe in ("ldconfig", "/sbin/ldconfig"):
        try:
            out = subprocess.run([exe, "-p"], capture_output=True, text=True, check=False).stdout
            break
        except OSError:
            continue
    abi = {"x86_64": "x86-64", "aarch64": "AArch64"}.get(platform.machine())
    libs = {}
    for line in out.splitlines():
        if "=>" not in line or (abi and abi not in line):
            continue
        libs.setdefault(line.split()[0], line.split("=>")[-1].strip())
    return libs


def _pkg_version(path):
    """dpkg package and version owning a library file, or ''."""
    if not path:
        try:
            out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libc6"],
                                 capture_output=True, text=True).stdout
            return "libc6 " + out.strip()
        except OSError:
            return ""
    candidates = [path, os.path.realpath(path)]
    for c in candidates:
        for alt in (c, c.replace("/usr/lib/", "/lib/", 1), c.replace("/lib/", "/usr/lib/", 1)):
            try:
                r = subprocess.run(["dpkg", "-S", alt], capture_output=True, text=True)
            except OSError:
                return ""
            if r.returncode == 0 and ":" in r.stdout:
                pkg = r.stdout.split(":")[0].strip()
                v = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                                   capture_output=True, text=True).stdout.strip()
                return f"{pkg} {v}"
    return ""


def _overrides_malloc(path):
    """True when the library defines malloc itself (a stub that only forwards
    tenon_* to glibc does not, and then its rows measure glibc)."""
    try:
        out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True).stdout
    except OSError:
        return None
    return any(line.split()[-1] == "malloc" for line in out.splitlines() if line.split())


def _read_line(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def source_peers(build_dir):
    """(allocators, skipped) for the peers in BUILD/peers."""
    found, skipped = [], []
    d = os.path.join(build_dir, "peers")
    for name in SOURCE_PEERS:
        so = os.path.join(d, name + ".so")
        if os.path.exists(so):
            found.append(Allocator(name, os.path.abspath(so), _read_line(os.path.join(d, name + ".version"))))
        else:
            why = _read_line(os.path.join(d, name + ".skipped")) or \
                f"not built (bash scripts/build-peers.sh {build_dir}; make bench does it)"
            skipped.append((name, why))
    return found, skipped


def _llvm_version(path):
    """(major, ...) of the /usr/lib/llvm-N/ a file is under, for sorting."""
    part = next((p for p in path.split(os.sep) if p.startswith("llvm-")), "llvm-0")
    return tuple(int(x) for x in part[len("llvm-"):].split(".") if x.isdigit())


def scudo(patterns=None):
    """The newest scudo_standalone library found, or None."""
    arch = platform.machine()
    found = [p for pat in (patterns or SCUDO_GLOBS) for p in glob.glob(pat.format(arch=arch))]
    return max(found, key=_llvm_version) if found else None


def _probe(alloc, probe_binary):
    """Runs a trivial program with the library preloaded; returns an error or ''."""
    if alloc.path is None:
        return ""
    if not os.path.exists(alloc.path):
        return f"{alloc.path} not found"
    try:
        r = subprocess.run([probe_binary, "10"], env=alloc.env(), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"probe failed: {e}"
    if r.returncode != 0 or "ERROR: ld.so" in r.stderr:
        return f"probe exit {r.returncode}: {r.stderr.strip()[:200]}"
    return ""


def discover(build_dir, extra, probe_binary):
    """Returns (allocators, skipped) where skipped is a list of (name, reason)."""
    found = [Allocator("glibc", None)]
    skipped = []
    tenon = os.path.join(build_dir, "src", "libtenon.so")
    if os.path.exists(tenon):
        found.append(Allocator("tenon", os.path.abspath(tenon)))
    else:
        skipped.append(("tenon", f"{tenon} not built"))
    variants = glob.glob(os.path.join(build_dir, "src", "libtenon-*.so"))
    variants += glob.glob(os.path.join(build_dir, "bench", "**", "libtenon-*.so"), recursive=True)
    for v in sorted(set(os.path.abspath(p) for p in variants)):
        name = os.path.basename(v)[len("lib"):-len(".so")]
        found.append(Allocator(name, v))
    libs = _ldconfig()
    for name, sonames, pkg in PEERS:
        path = next((libs[s] for s in sonames if s in libs), None)
        if path:
            found.append(Allocator(name, path))
        else:
            skipped.append((name, f"none of {', '.join(sonames)} in ldconfig -p (apt-get install {pkg})"))
    scudo_path = scudo()
    if scudo_path:
        found.append(Allocator("scudo", scudo_path))
    else:
        skipped.append(("scudo", f"no libclang_rt.scudo_standalone under /usr/lib/llvm-*/ (apt-get install {SCUDO_PACKAGE})"))
    built, not_built = source_peers(build_dir)
    found += built
    skipped += not_built
    for spec in extra or []:
        if "=" not in spec:
            raise SystemExit(f"--alloc wants NAME=PATH.so, got {spec!r}")
        name, path = spec.split("=", 1)
        found = [a for a in found if a.name != name]
        found.append(Allocator(name, os.path.abspath(path)))
    usable = []
    for a in found:
        err = _probe(a, probe_binary)
        if err:
            skipped.append((a.name, err))
            continue
        if not a.version and (a.path is None or not a.path.startswith(os.path.abspath(build_dir))):
            a.version = _pkg_version(a.path)
        if a.path and a.name.startswith("tenon") and _overrides_malloc(a.path) is False:
            a.notes.append("does not define malloc (stub build): its rows measure glibc")
        usable.append(a)
    return usable, skipped
