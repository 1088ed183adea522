#!/usr/bin/env bash
# cargo_test.sh CARGO CRATE_DIR TARGET_DIR: the Rust crate's cargo test
# (label rust). Skips (77) with a message where there is no cargo. Works
# offline once the cc crate is in cargo's cache: it fetches only when
# something in Cargo.lock is missing there.
set -euo pipefail
cargo=$1 crate=$2 target=$3
if [ -z "$cargo" ] || ! [ -x "$cargo" ]; then
  echo "cargo not found: bindings/rust is not tested (install Rust, e.g. with rustup, and reconfigure)"
  exit 77
fi
export PATH="$(dirname "$cargo"):$PATH"  # rustc beside a rustup-installed cargo
cd "$crate"
if ! "$cargo" fetch --locked --offline >/dev/null 2>&1; then
  echo "+ cargo fetch --locked   (the build dependencies in Cargo.lock, once)"
  "$cargo" fetch --locked
fi
echo "+ cargo test --locked --offline --target-dir $target"
"$cargo" test --locked --offline --target-dir "$target"
