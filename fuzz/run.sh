#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60). Needs cargo-fuzz (cargo install
# cargo-fuzz); on a stable toolchain RUSTC_BOOTSTRAP=1 enables the sanitizer flags it uses.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
for t in superblock_decode extension_records layout_roundtrip array_ops control_request nbd_session; do
    RUSTC_BOOTSTRAP=1 cargo fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=4096
done
