#!/usr/bin/env bash
# The array engine against fio on the same member files, same run (issue targets in brackets):
#
#   bench/array.sh [DIR] [MEMBER_SIZE] [SECONDS]     (defaults: /dev/shm/raidctl-bench, 1G, 5)
#
# fio, 4 jobs, one per member file, O_DIRECT when the file system allows it:
#   sequential 1 MiB read and write (psync), 4 KiB random write (libaio, 8 in flight per job).
# raidctl bench over 4 members, with checksums (the default) and without (--no-checksums);
# flush every second on writes; --destructive:
#   RAID0 SEQ1M Q8T1 read and write           [>= 0.9x fio]
#   RAID5 SEQ1M Q8T1 write                    [>= 0.9 x (N-1)/N x fio write]
#   RAID5 RND4K Q32T1 write IOPS               [>= 0.9 x fio random-write IOPS / 4]
# and, without checksums, RAID5 SEQ1M Q8T1 and SEQ1M Q1T1 write with the stripe cache off
# (--stripe-cache 0): what holding partial rows until they are whole gains, same run.
# Needs fio and python3.
set -euo pipefail
dir=${1:-/dev/shm/raidctl-bench}
size=${2:-1G}
secs=${3:-5}
. "$(dirname "$0")/common.sh"
bench_start "$dir" fio
# Written once first, so fio's writes overwrite allocated blocks as the array's do.
for i in 0 1 2 3; do head -c "$size" /dev/zero > "$dir/m$i"; done
jobs=(); for i in 0 1 2 3; do jobs+=(--name="m$i" --filename="$dir/m$i"); done
fio_run() { # rw bs engine depth field
    fio --direct=$direct --rw="$1" --bs="$2" --ioengine="$3" --iodepth="$4" --size="$size" \
        --runtime="$secs" --time_based --group_reporting --output-format=json "${jobs[@]}" \
        | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print(j['$5']['$6'])"
}
fio_write=$(fio_run write 1M psync 1 write bw_bytes)
fio_read=$(fio_run read 1M psync 1 read bw_bytes)
fio_iops=$(fio_run randwrite 4k libaio 8 write iops)
bench() { # level tests [create flags] [bench flags]
    rm -f "$dir"/m*
    "$raidctl" create --level "$1" --size "$size" ${3:-} "$dir"/m{0,1,2,3} 2>/dev/null
    "$raidctl" bench "$dir/m0" --destructive --size 1T --duration "$secs" --tests "$2" --json ${4:-}
}
for cs in on off; do
    flags=""; [ "$cs" = off ] && flags=--no-checksums
    bench 0 seq1m-q8t1-read,seq1m-q8t1-write "$flags" > "$dir/r0-$cs.json"
    bench 5 seq1m-q8t1-write,rnd4k-q32t1-write,seq1m-q1t1-write "$flags" > "$dir/r5-$cs.json"
done
bench 5 seq1m-q8t1-write,seq1m-q1t1-write --no-checksums "--stripe-cache 0" > "$dir/r5-nocache.json"
for cs in on off; do
python3 - "$dir" "$fio_read" "$fio_write" "$fio_iops" "$direct" "$cs" <<'PY'
import json, sys
d, cs = sys.argv[1], sys.argv[6]
fr, fw, fi = (float(x) for x in sys.argv[2:5])
res = {}
for f in ("r0", "r5"):
    for r in json.load(open(f"{d}/{f}-{cs}.json"))["results"]:
        res[(f, r["name"])] = r
r0r = res[("r0", "seq1m-q8t1-read")]["mb_per_s"] * 1e6
r0w = res[("r0", "seq1m-q8t1-write")]["mb_per_s"] * 1e6
r5w = res[("r5", "seq1m-q8t1-write")]["mb_per_s"] * 1e6
r5i = res[("r5", "rnd4k-q32t1-write")]["iops"]
if cs == "on":
    print(f"array bench ({d}, O_DIRECT {'on' if sys.argv[5] == '1' else 'off'}); fio: read {fr/1e6:.0f} MB/s, write {fw/1e6:.0f} MB/s, "
          f"4 KiB random write {fi:.0f} IOPS (4 jobs)")
print(f"checksums {cs}:")
rows = [
    ("RAID0 SEQ1M Q8T1 read", r0r / 1e6, "MB/s", r0r / fr, "fio read"),
    ("RAID0 SEQ1M Q8T1 write", r0w / 1e6, "MB/s", r0w / fw, "fio write"),
    ("RAID5 SEQ1M Q8T1 write", r5w / 1e6, "MB/s", r5w / (fw * 3 / 4), "3/4 x fio write"),
    ("RAID5 RND4K Q32T1 write", r5i, "IOPS", r5i / (fi / 4), "fio IOPS / 4"),
]
for name, v, unit, ratio, base in rows:
    mark = "" if ratio >= 0.9 else "  (below goal)"
    print(f"  {name:<24} {v:>10.0f} {unit:<4} = {ratio:.2f} x {base} (goal 0.90){mark}")
if cs == "off":
    off = {r["name"]: r for r in json.load(open(f"{d}/r5-nocache.json"))["results"]}
    print("stripe cache (RAID5, checksums off): on / off")
    for t in ("seq1m-q8t1-write", "seq1m-q1t1-write"):
        on_v, off_v = res[("r5", t)]["mb_per_s"], off[t]["mb_per_s"]
        print(f"  {t:<24} {on_v:>7.0f} / {off_v:.0f} MB/s = {on_v / off_v:.2f}x")
PY
done
