#!/usr/bin/env bash
# Runs the deterministic simulator on new seeds for as long as asked and prints every failing
# seed (each replays exactly: cargo run -p raidcore --release --example sim -- SEED).
#   scripts/soak.sh [SECONDS] [FIRST_SEED]
# SECONDS defaults to 600; FIRST_SEED to a random 48-bit number, so each soak tries new seeds.
# Output is bounded: one line per failing seed and a summary. Exit 1 when any seed failed.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
first=${2:-$(( (RANDOM << 33) ^ (RANDOM << 18) ^ (RANDOM << 3) ^ $(date +%s) ))}
cargo build --release -q -p raidcore --example sim
echo "soak: ${secs} s from seed ${first}"
./target/release/examples/sim --from "$first" --seconds "$secs" | head -n 1000
