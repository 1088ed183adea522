#!/usr/bin/env bash
# scripts/install-bench-deps.sh: install what `make bench` compares against and
# draws with, only when missing. Every package is optional: a peer that cannot
# be installed (no apt, no network, not root) is skipped by bench/run.py, which
# says so in the report. Never fails the benchmark for a missing peer.
set -uo pipefail
# libclang-rt-16-dev: LLVM's compiler runtime, which carries scudo (the
# hardened allocator the security table compares against).
# sqlite3: one of the programs whose traces make the replay rows (python3, g++ come with the build).
pkgs=(libjemalloc2 libgoogle-perftools4 libmimalloc2.0 libclang-rt-16-dev python3-matplotlib valgrind binutils sqlite3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-bench-deps: no apt-get; missing (will be skipped): ${missing[*]}" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"
  else echo "install-bench-deps: not root; missing (will be skipped): ${missing[*]}" >&2; exit 0; fi
fi
echo "install-bench-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
source "$(dirname "$0")/apt-wait.sh"  # apt_get: waits for other package managers
apt_get update -qq >/dev/null 2>&1 || echo "install-bench-deps: apt-get update failed" >&2
# One package at a time so that one unavailable name does not block the rest.
for p in "${missing[@]}"; do
  apt_get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1 \
    || echo "install-bench-deps: could not install $p (skipped)" >&2
done
exit 0
