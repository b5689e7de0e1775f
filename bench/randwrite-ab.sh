#!/usr/bin/env bash
# 4 KiB random writes over the whole export, one engine build against another, same run,
# alternating: what issue 30 measured (the per-write cost of the write-intent bitmap grows with
# the number of regions, i.e. with capacity). RAID5 over 4 sparse member files of each SIZE in
# DIR, served over a Unix socket, fio's nbd engine at iodepth 16, no client flushes, SECS per
# run. Prints the median IOPS of each build per size and new/old.
#
#   bench/randwrite-ab.sh OLD_RAIDCTL [NEW_RAIDCTL] [DIR] [SIZES] [SECS] [ROUNDS]
#   (defaults: target/release/raidctl, /work/raidctl-randwrite-ab, "1G 64G", 8, 3)
#
# AB_CREATE="--level 0 --no-checksums" (default "--level 5") picks the array `create` makes.
# FLUSH_EVERY=N sends a client flush after every N writes (fio --fsync=N), as a file system's
# periodic commits do: without flushes no write-intent bit is ever cleared, so only the first
# write into each region pays; with them, regions idle past their window are cleared and marked
# again (the churn issue 30 measured under a file system).
#
# What it writes is bounded by time: about IOPS x SECS x 8 KiB (data and parity) per run, and the
# member files are deleted after each run. Needs fio built with its nbd engine (Debian's is).
set -euo pipefail
old=${1:?usage: bench/randwrite-ab.sh OLD_RAIDCTL [NEW_RAIDCTL] [DIR] [SIZES] [SECS] [ROUNDS]}
here=$(cd "$(dirname "$0")/.." && pwd)
new=${2:-$here/target/release/raidctl}
dir=${3:-/work/raidctl-randwrite-ab}
sizes=${4:-"1G 64G"}
secs=${5:-8}
rounds=${6:-3}
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
nbd_ab_start "$dir"
run() { # who binary size
    local who=$1 bin=$2 size=$3 sock=$dir/s.sock
    rm -f "$dir"/m* "$sock"
    truncate -s "$size" "$dir"/m{0,1,2,3}
    # shellcheck disable=SC2086 # the create flags are words
    "$bin" create ${AB_CREATE:---level 5} "$dir"/m{0,1,2,3} >/dev/null 2>&1
    "$bin" serve --socket "$sock" "$dir/m0" >"$dir/serve.log" 2>&1 & pid=$!
    for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
    local iops
    iops=$(fio --name=rw --ioengine=nbd --uri="nbd+unix:///?socket=$sock" --rw=randwrite \
        --bs=4k --iodepth=16 --time_based --runtime="$secs" --size=100% --norandommap \
        ${FLUSH_EVERY:+--fsync=$FLUSH_EVERY} \
        --randrepeat=0 --output-format=json 2>/dev/null |
        python3 -c "import json,sys; t=sys.stdin.read(); print(json.loads(t[t.index('{'):])['jobs'][0]['write']['iops'])")
    if ! kill "$pid" 2>/dev/null; then
        # The server ended during the run (on this machine: ENOSPC from the host file system
        # under fast random writes into 256 GiB+ sparse files): the figure is not kept.
        echo "$who $size: serve ended during the run: $(tail -n 1 "$dir/serve.log")" >&2
        iops=nan
    fi
    wait "$pid" 2>/dev/null || true; pid=
    echo -e "$who\t$size\t$iops" >> "$out"
    rm -f "$dir"/m*
}
for r in $(seq "$rounds"); do
    for size in $sizes; do
        run old "$old" "$size"
        run new "$new" "$size"
    done
done
python3 - "$out" "$sizes" "${AB_CREATE:---level 5}" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, size, x = line.rstrip('\n').split('\t')
    v[(size, who)].append(float(x))
print(f"{sys.argv[3] + ', 4 x member':18} {'old IOPS':>10} {'new IOPS':>10} {'new/old':>8}")
for size in sys.argv[2].split():
    ok = lambda xs: [x for x in xs if x == x] or [float('nan')]
    o, n = statistics.median(ok(v[(size, 'old')])), statistics.median(ok(v[(size, 'new')]))
    print(f"{size:18} {o:10.0f} {n:10.0f} {n / o:8.2f}")
PY
