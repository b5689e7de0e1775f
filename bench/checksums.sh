#!/usr/bin/env bash
# What per-block checksums cost in bytes written to the members (SSD wear) and in speed, same
# files, same run: 4 KiB random writes with a flush every second, on RAID5 over 4 member files,
# once with checksums and once created with --no-checksums.
#
#   bench/checksums.sh [DIR] [MEMBER_SIZE] [SECONDS]     (defaults: /var/tmp/raidctl-bench, 1G, 5)
#
# Runs `raidctl bench` (RND4K Q32T1 and Q1T1 write as fast as they go, and Q1T1 paced to 1000
# and 100 writes per second) over the whole array and prints, per test, the bytes written to
# the members per byte written with and without checksums and the difference. Needs python3.
set -euo pipefail
dir=${1:-/var/tmp/raidctl-bench}
size=${2:-1G}
secs=${3:-5}
. "$(dirname "$0")/common.sh"
bench_start "$dir"
run() { # label, create flags...
    local label=$1; shift
    rm -f "$dir"/m*
    "$raidctl" create --level 5 --size "$size" "$@" "$dir"/m{0,1,2,3} 2>/dev/null
    for pace in "" 1000 100; do
        "$raidctl" bench "$dir/m0" --destructive --size 1T --duration "$secs" --json \
            --tests rnd4k-q32t1-write,rnd4k-q1t1-write ${pace:+--iops-limit $pace} \
            | python3 -c "
import json, sys
d = json.load(sys.stdin)
for r in d['results']:
    if '$pace' and 'Q32' in r['test']:
        continue
    name = r['test'] + (' at $pace/s' if '$pace' else '')
    print('$label', name, r['write_amplification'], r['iops'], r['member_bytes']['metadata'], r['member_bytes']['total'], sep='\t')
"
    done
}
{ run on; run off --no-checksums; } > "$dir/results.tsv"
python3 - "$dir/results.tsv" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
by = {}
for label, name, amp, iops, meta, total in rows:
    by.setdefault(name, {})[label] = (float(amp), float(iops), int(meta), int(total))
print(f"{'test':<28} {'amplif. off':>11} {'amplif. on':>10} {'extra bytes':>11} {'IOPS off':>9} {'IOPS on':>8}")
for name, v in by.items():
    off, on = v["off"], v["on"]
    print(f"{name:<28} {off[0]:>10.3f}x {on[0]:>9.3f}x {100 * (on[0] / off[0] - 1):>10.1f}% {off[1]:>9.0f} {on[1]:>8.0f}")
print("amplif.: bytes written to the members per byte written (data, parity, bitmap, superblocks, "
      "and with checksums the checksum log and table). Goal: checksums add at most 10 %.")
PY
