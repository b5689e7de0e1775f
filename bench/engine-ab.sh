#!/usr/bin/env bash
# One engine build against another, same run, alternating (noise on this shared machine swings
# single figures by 10-30 %): `raidctl bench` RAID5 and RAID10 over 4 members in DIR, with and
# without checksums, and the time of an offline rebuild of one member; prints new/old ratios of
# the medians over ROUNDS rounds.
#
#   bench/engine-ab.sh OLD_RAIDCTL [NEW_RAIDCTL] [DIR] [MEMBER_SIZE] [SECONDS] [ROUNDS]
#   (defaults: target/release/raidctl, /dev/shm/raidctl-ab, 256M, 2, 3)
# Build the old one with: git worktree add /tmp/old REV && (cd /tmp/old && cargo build --release)
# AB_CONFIGS picks the arrays, "LEVEL|FLAGS" words (default "5| 5|--no-checksums 10|
# 10|--no-checksums"); RAID0 arrays ("0|") skip the rebuild.
set -euo pipefail
old=${1:?usage: bench/engine-ab.sh OLD_RAIDCTL [NEW_RAIDCTL] [DIR] [MEMBER_SIZE] [SECONDS] [ROUNDS]}
here=$(cd "$(dirname "$0")/.." && pwd)
new=${2:-$here/target/release/raidctl}
dir=${3:-/dev/shm/raidctl-ab}
size=${4:-256M}
secs=${5:-2}
rounds=${6:-3}
rm -rf "$dir"; mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
out="$dir/results.tsv"; : > "$out"
tests=seq1m-q8t1-read,seq1m-q8t1-write,rnd4k-q32t1-write
run() { # which binary level flags
    local who=$1 bin=$2 level=$3 flags=$4
    rm -f "$dir"/m* "$dir"/spare
    "$bin" create --level "$level" --size "$size" $flags "$dir"/m{0,1,2,3} 2>/dev/null
    "$bin" bench "$dir/m0" --destructive --size 1T --duration "$secs" --tests "$tests" --json |
        python3 -c "
import json,sys
for r in json.load(sys.stdin)['results']:
    v = r['iops'] if r['block_bytes'] == 4096 else r['mb_per_s']
    print('$who\t$level${flags:+ }$flags\t'+r['name']+'\t'+str(v))" >> "$out"
    [ "$level" = 0 ] && return
    # Offline rebuild of slot 1 onto a fresh file.
    "$bin" fail "$dir/m0" 1 >/dev/null 2>&1
    truncate -s "$size" "$dir/spare"
    local t0; t0=$(date +%s.%N)
    "$bin" add "$dir/m0" "$dir/spare" >/dev/null 2>&1
    "$bin" rebuild "$dir/m0" >/dev/null 2>&1
    echo -e "$who\t$level${flags:+ }$flags\trebuild MB/s\t$(python3 -c "import sys; print(${size%M}/($(date +%s.%N)-$t0))")" >> "$out"
}
for r in $(seq "$rounds"); do
    for cfg in ${AB_CONFIGS:-"5|" "5|--no-checksums" "10|" "10|--no-checksums"}; do
        level=${cfg%%|*}; flags=${cfg#*|}
        run old "$old" "$level" "$flags"
        run new "$new" "$level" "$flags"
    done
done
python3 - "$out" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, cfg, test, x = line.rstrip('\n').split('\t')
    v[(cfg, test, who)].append(float(x))
keys = sorted({(c, t) for c, t, _ in v})
print(f"{'array':24} {'test':22} {'old':>10} {'new':>10} {'new/old':>8}")
for c, t in keys:
    o, n = statistics.median(v[(c, t, 'old')]), statistics.median(v[(c, t, 'new')])
    print(f"raid{c:20} {t:22} {o:10.0f} {n:10.0f} {n / o:8.2f}")
PY
