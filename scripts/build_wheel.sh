#!/usr/bin/env bash
# Builds privfed's Python wheel once, to install wherever it runs (a SuperLink's and every
# SuperNode's environment, docs/FLOWER.md): one abi3 wheel (pyo3's abi3-py39 feature) for
# CPython 3.9 and later on this platform.
#
#   scripts/build_wheel.sh [OUT_DIR]        # default OUT_DIR: target/wheels
#
# Needs Rust >= 1.95 (rust-version in Cargo.toml; rustup installs it) and Python >= 3.9 with
# pip; pip fetches maturin from PyPI into an isolated build environment. Prints the wheel's path.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-target/wheels}"
need="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
have="$(rustc --version | awk '{print $2}')"
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
  echo "error: rustc $have is older than the rust-version $need this repository needs" >&2
  exit 1
fi
mkdir -p "$OUT"
python3 -m pip wheel --no-deps --disable-pip-version-check -w "$OUT" . >&2
ls -t "$OUT"/privfed-*-abi3-*.whl | head -1
