#!/usr/bin/env bash
# Runs a cargo-fuzz target of fuzz/ for a bounded time, niced.
#
#   ./scripts/fuzz.sh decode 600      # envelope decoding, 10 minutes
#   ./scripts/fuzz.sh requests 1200   # request handling, 20 minutes
#   ./scripts/fuzz.sh frames 600      # the pure WebSocket frame parser
#   ./scripts/fuzz.sh frames_server 600  # WebSocket framing against a loopback server
#
# Works on the stable toolchain: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its
# -Z flags, and --sanitizer none avoids AddressSanitizer (the crate has no
# unsafe code of its own; libFuzzer's coverage instrumentation still
# applies). The generated corpus goes to fuzz/corpus/TARGET (not committed);
# the committed seeds are read from fuzz/seeds/TARGET; crashes land in
# fuzz/artifacts/TARGET. Extra arguments go to libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh decode|requests|frames|frames_server SECONDS [libFuzzer args...]}
seconds=${2:-60}
shift 2 || true
mkdir -p "fuzz/corpus/$target"
RUSTC_BOOTSTRAP=1 exec nice -n 10 cargo fuzz run "$target" --sanitizer none -O \
  "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
  -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=4096 "$@"
