#!/usr/bin/env python3
"""The layer map, checked (label layers; docs/architecture.md has the map).

1. Includes only go downward: a file of layer L (in include/tenon/L/ or
   src/L/) may include the headers of L and of the layers below it, never of
   one above. The public headers at the top of include/tenon/ (tenon.h,
   layer.hpp, ...) are the front ends' API: they rank with the front end.
2. Only the platform layer talks to the operating system and the C library:
   no call of mmap, getenv, write, pthread_*, dlsym, clock_gettime, ... in
   any other folder of the allocator.

usage: layout_check.py SOURCE_ROOT   (prints each violation; exit 1 if any)
"""
import os
import re
import sys

# Bottom to top. Each folder may include from its own rank and below.
LAYERS = ["common", "platform", "span", "lookup", "arena", "heap", "large", "huge", "engine",
          "frontend", "percpu", "secure", "measure"]
# Folders outside the allocator's layers and what they may include.
BESIDE = {"pool": "platform"}  # the bulk pool builds on the platform layer only
# Standalone programs: not loaded as an allocator, free to call the OS.
PROGRAMS = ["tools/replay/"]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
OS_CALL = re.compile(r"(?<![\w.:>])(?:::)?(mmap|munmap|mremap|madvise|mincore|mprotect|getenv|secure_getenv|"
                     r"clock_gettime|nanosleep|usleep|write|read|open|close|abort|_exit|syscall|sysconf|"
                     r"getauxval|prctl|dlsym|dladdr|dlopen|sched_yield|pthread_\w+)\s*\(")
EXTENSIONS = (".h", ".hpp", ".cpp", ".ipp", ".c")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def layer_of(rel):
    """The layer of a file, given its path relative to the root."""
    parts = rel.split(os.sep)
    if parts[0] == "include" and len(parts) >= 3 and parts[1] == "tenon":
        return parts[2] if len(parts) > 3 else "api"
    if parts[0] == "src" and len(parts) >= 2:
        return parts[1] if len(parts) > 2 else None
    return None


def rank(layer):
    if layer == "api":
        return LAYERS.index("frontend")
    if layer in LAYERS:
        return LAYERS.index(layer)
    if layer in BESIDE:
        return LAYERS.index(BESIDE[layer])
    return None


def included_layer(path, inc):
    """The layer an include names: "tenon/L/x.h", a public "tenon/x.hpp", or a
    path relative to the including file ("../heap/attach.ipp")."""
    if inc.startswith("tenon/"):
        parts = inc.split("/")
        return parts[1] if len(parts) > 2 else "api"
    target = os.path.normpath(os.path.join(os.path.dirname(path), inc))
    return layer_of(target)


def main(root):
    problems = []
    for top in ("include/tenon", "src"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(EXTENSIONS):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                layer = layer_of(rel)
                if layer is None or rank(layer) is None:
                    continue
                text = open(full, encoding="utf-8").read()
                for n, line in enumerate(text.splitlines(), 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    other = included_layer(rel, m.group(1))
                    if other is None or other == layer or rank(other) is None:
                        continue
                    if layer in BESIDE and other not in ("common", BESIDE[layer], "api"):
                        problems.append(f"{rel}:{n}: {layer} may build on {BESIDE[layer]} only, includes {m.group(1)}")
                    elif layer != "api" and layer not in BESIDE and rank(other) > rank(layer):
                        problems.append(f"{rel}:{n}: layer {layer} includes {m.group(1)} of layer {other}, above it")
                if layer == "platform" or any(rel.startswith(p) for p in PROGRAMS):
                    continue
                for n, line in enumerate(strip_comments(text).splitlines(), 1):
                    for m in OS_CALL.finditer(line):
                        problems.append(f"{rel}:{n}: calls {m.group(1)}() outside the platform layer")
    for p in problems:
        print(p)
    print(f"layout_check: {len(problems)} violation(s) of the layer map")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
