#!/usr/bin/env bash
# Installs what building and testing tenon needs on Debian 12, and only what
# is missing. A base package counts as present when what it provides is
# already there (a compiler, cmake, ninja, ... on the PATH, installed any
# way) or when dpkg has it, so a prepared machine makes no apt call at all.
# Extra package names may be passed as arguments (the benchmark and
# cross-test scripts do); those are checked with dpkg.
set -euo pipefail
pkgs=(build-essential cmake ninja-build libgtest-dev python3 pkg-config "$@")

provided() {  # provided PACKAGE: what the package gives is already installed
  case $1 in
    build-essential) command -v cc && command -v c++ && command -v make ;;
    cmake) command -v cmake ;;
    ninja-build) command -v ninja ;;
    python3) command -v python3 ;;
    pkg-config) command -v pkg-config || command -v pkgconf ;;
    libgtest-dev) [ -e /usr/include/gtest/gtest.h ] || [ -e /usr/local/include/gtest/gtest.h ] ;;
    *) false ;;
  esac >/dev/null 2>&1
}

missing=()
for p in "${pkgs[@]}"; do
  provided "$p" || dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: missing ${missing[*]}; this script installs with apt-get only: install them and rerun" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
source "$(dirname "$0")/apt-wait.sh"  # apt_get: waits for other package managers
apt_get update -qq
apt_get install -y -qq --no-install-recommends "${missing[@]}"
