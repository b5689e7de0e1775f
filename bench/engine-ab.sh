#!/usr/bin/env bash
# One engine build against another, same run, alternating (noise on this shared machine swings
# single figures by 10-30 %): `raidctl bench` RAID5 and RAID10 over 4 members in DIR, with and
# without checksums, and the time of an offline rebuild of one member; prints new/old ratios of
# the medians over ROUNDS rounds, and the median of each round's own ratio ("paired"). Each
# test also gives GiB of client data per CPU second of the process (`raidctl bench`'s
# cpu_seconds_per_gib): the engine's work per byte, which other jobs on the machine move far
# less than they move throughput. The rebuild line times `add` plus `rebuild` as processes:
# at 256 MiB members that is a quarter of a second, mostly start-up, so it swings widely.
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
trap '[ -n "${AB_KEEP:-}" ] && cp "$out" "$AB_KEEP"; rm -rf "$dir"' EXIT
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
    print('$who\t$level${flags:+ }$flags\t'+r['name']+'\t'+str(v))
    # Work per CPU second: less moved than throughput by other jobs on the machine.
    print('$who\t$level${flags:+ }$flags\t'+r['name']+' GiB/cpu-s\t'+str(1 / r['cpu_seconds_per_gib']))" >> "$out"
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
# new/old of the medians, and the median of each round's own new/old (old and new run
# back to back within a round, so that one is less moved by the machine's drift).
print(f"{'array':24} {'test':31} {'old':>10} {'new':>10} {'new/old':>8} {'paired':>7}")
for c, t in keys:
    os_, ns = v[(c, t, 'old')], v[(c, t, 'new')]
    o, n = statistics.median(os_), statistics.median(ns)
    p = statistics.median(b / a for a, b in zip(os_, ns))
    f = (lambda x: f"{x:10.3f}") if o < 100 else (lambda x: f"{x:10.0f}")
    print(f"raid{c:20} {t:31} {f(o)} {f(n)} {n / o:8.2f} {p:7.2f}")
PY
