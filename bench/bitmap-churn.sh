#!/usr/bin/env bash
# Write-intent bit churn (issue 30): a steady, modest load of 4 KiB random writes spread over
# more bitmap regions than it revisits within 5 s, with a client flush every 32 writes, as a
# file system's commits do. Clearing by age alone cleared each region at the flush after it
# had been idle for 5 s, and its next write paid a bitmap write and a flush of every member
# again (a policy keeping bits set longer was measured with this and withdrawn: see
# docs/performance.md, "Write-intent bit churn"). One build against another,
# same run, alternating: RAID5 over 4 sparse member files of SIZE in DIR, served over a Unix
# socket, fio's nbd engine at RATE writes per second (iodepth 16) over the first SPAN of the
# export: WARM seconds to mark the regions, then SECS seconds measured. Prints, per build, the
# median over ROUNDS of the metadata bytes the members received per client write in the
# measured window (bitmap pages, checksum pages, superblocks; from `raidctl status`, whose
# counters trail the server by its last superblock update, every 5 s under load) and the
# window's p99 write latency.
#
#   bench/bitmap-churn.sh OLD_RAIDCTL [NEW_RAIDCTL] [DIR] [SIZE] [SPAN] [RATE] [WARM] [SECS] [ROUNDS]
#   (defaults: target/release/raidctl, /work/raidctl-churn, 1T, 128g, 100, 50, 60, 2)
#
# At the defaults the span covers about 680 regions of 64 MiB per member, each written again
# every 6.8 s on average. What it writes is bounded by the rate: RATE x (WARM + SECS) x 8 KiB
# per run (about 90 MB), and the member files are deleted after each run. Needs fio built with
# its nbd engine (Debian's is).
set -euo pipefail
old=${1:?usage: bench/bitmap-churn.sh OLD_RAIDCTL [NEW_RAIDCTL] [DIR] [SIZE] [SPAN] [RATE] [WARM] [SECS] [ROUNDS]}
here=$(cd "$(dirname "$0")/.." && pwd)
new=${2:-$here/target/release/raidctl}
dir=${3:-/work/raidctl-churn}
size=${4:-1T}
span=${5:-128g}
rate=${6:-100}
warm=${7:-50}
secs=${8:-60}
rounds=${9:-2}
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
nbd_ab_start "$dir"
meta() { # binary: metadata bytes written to every member so far
    "$1" status --json "$dir/m0" | python3 -c "
import json,sys
t=sys.stdin.read(); s=json.loads(t[t.index('{'):])
print(sum(m['bytes_written_by_kind']['metadata'] for m in s['members']))"
}
load() { # socket seconds -> "writes p99_us"
    fio --name=churn --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw=randwrite \
        --bs=4k --iodepth=16 --rate_iops="$rate" --time_based --runtime="$2" --size="$span" \
        --norandommap --fsync=32 --randrepeat=0 --output-format=json 2>/dev/null |
        python3 -c "
import json,sys
t=sys.stdin.read(); w=json.loads(t[t.index('{'):])['jobs'][0]['write']
print(w['total_ios'], w['clat_ns']['percentile'].get('99.000000', 0) / 1000)"
}
run() { # who binary
    local who=$1 bin=$2 sock=$dir/s.sock
    rm -f "$dir"/m* "$sock"
    truncate -s "$size" "$dir"/m{0,1,2,3}
    "$bin" create --level 5 "$dir"/m{0,1,2,3} >/dev/null 2>&1
    "$bin" serve --socket "$sock" "$dir/m0" >"$dir/serve.log" 2>&1 & pid=$!
    for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
    load "$sock" "$warm" >/dev/null
    sleep 6 # the counters as of a superblock update after the warm-up
    local m0 m1 writes p99
    m0=$(meta "$bin")
    read -r writes p99 < <(load "$sock" "$secs")
    sleep 6
    m1=$(meta "$bin")
    if ! kill "$pid" 2>/dev/null; then
        echo "$who: serve ended during the run: $(tail -n 1 "$dir/serve.log")" >&2
        writes=0
    fi
    wait "$pid" 2>/dev/null || true; pid=
    echo -e "$who\t$(( writes > 0 ? (m1 - m0) / writes : -1 ))\t$p99" >> "$out"
    rm -f "$dir"/m*
}
for _ in $(seq "$rounds"); do
    run old "$old"
    run new "$new"
done
python3 - "$out" "$size" "$span" "$rate" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, meta, p99 = line.rstrip('\n').split('\t')
    if int(meta) >= 0:
        v[who].append((int(meta), float(p99)))
print(f"RAID5 4 x {sys.argv[2]}, writes over {sys.argv[3]} at {sys.argv[4]}/s")
print(f"{'build':8} {'meta B/write':>13} {'p99 write us':>13}")
for who in ('old', 'new'):
    xs = v[who] or [(float('nan'), float('nan'))]
    print(f"{who:8} {statistics.median(x[0] for x in xs):13.0f} {statistics.median(x[1] for x in xs):13.0f}")
o, n = (statistics.median(x[0] for x in v[w]) if v[w] else float('nan') for w in ('old', 'new'))
print(f"{'new/old':8} {n / o if o else float('nan'):13.2f}")
PY
