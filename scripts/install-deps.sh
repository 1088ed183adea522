#!/usr/bin/env bash
# Installs what building and testing tenon needs on Debian 12, only when
# missing (so a prepared machine pays nothing). Extra package names may be
# passed as arguments (the benchmark and cross-test scripts do).
set -euo pipefail
pkgs=(build-essential cmake ninja-build libgtest-dev python3 "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
source "$(dirname "$0")/apt-wait.sh"  # apt_get: waits for other package managers
apt_get update -qq
apt_get install -y -qq --no-install-recommends "${missing[@]}"
