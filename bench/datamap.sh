#!/usr/bin/env bash
# Rebuild and scrub cost against how much of the array holds data (the data map), same run.
#
#   bench/datamap.sh [DIR] [MEMBER_SIZE]     (defaults: /var/tmp/raidctl-bench-map, 2G)
#
# For each fill of a RAID5 array over 4 sparse member files in DIR (checksums on):
#   full     every byte of the array written
#   10%      the first tenth of the array written (what a new file system's allocator does first)
#   spread   a tenth of the array written as 4 MiB pieces spread evenly over all of it (every
#            64 MiB region of the data map touched: the data map saves nothing here)
#   empty    nothing written after create
# it fails member 0, adds an empty file in its place without rebuilding, drops the page cache,
# then times `raidctl rebuild` (seconds, bytes written, bytes the new file allocates) and
# `raidctl scrub` (seconds, bytes read), and prints each against the full array's.
# Goal (issue 30): a 10%-full array at most 0.15x the full one's time and bytes.
# Disk: about 2.7 x MEMBER_SIZE x 4 at the peak (the full fill), removed on exit.
set -euo pipefail
dir=${1:-/var/tmp/raidctl-bench-map}
size=${2:-2G}
. "$(dirname "$0")/common.sh"
bench_start "$dir"

results="$dir/results"
: >"$results"
for fill in full 10% spread empty; do
    rm -f "$dir"/m? "$dir/target"
    "$raidctl" create --level 5 --size "$size" "$dir"/m{0,1,2,3} 2>/dev/null
    bytes=$("$raidctl" status --json "$dir/m0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["size_bytes"])')
    case $fill in
    full) head -c "$bytes" /dev/urandom | "$raidctl" write "$dir/m0" ;;
    10%) head -c $((bytes / 10 / 4096 * 4096)) /dev/urandom | "$raidctl" write "$dir/m0" ;;
    spread)
        head -c $((4 << 20)) /dev/urandom >"$dir/piece"
        step=$((40 << 20))
        for ((off = 0; off + (4 << 20) <= bytes; off += step)); do
            "$raidctl" write "$dir/m0" --offset "$off" --input "$dir/piece"
        done
        rm -f "$dir/piece"
        ;;
    empty) ;;
    esac
    holding=$("$raidctl" status --json "$dir/m0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data_map"]["bytes_holding_data"])')
    truncate -s "$size" "$dir/target"
    "$raidctl" fail "$dir/m1" "$dir/m0" 2>/dev/null
    "$raidctl" add --no-rebuild "$dir/m1" "$dir/target" 2>/dev/null
    sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    rebuild=$("$raidctl" rebuild --json "$dir/m1" | tail -n 1)
    allocated=$(($(stat -c %b "$dir/target") * $(stat -c %B "$dir/target")))
    sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    scrub=$("$raidctl" scrub --json "$dir/m1")
    python3 - "$fill" "$bytes" "$holding" "$allocated" "$rebuild" "$scrub" >>"$results" <<'PY'
import json, sys
fill, size, holding, allocated = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
r, s = json.loads(sys.argv[5]), json.loads(sys.argv[6])
assert not s["problems"], s["problems"]
print(json.dumps({"fill": fill, "array_bytes": size, "holding": holding, "allocated": allocated,
                  "rebuild_seconds": r["seconds"], "rebuild_bytes": r["bytes_written"],
                  "scrub_seconds": s["seconds"], "scrub_bytes": s["bytes_read"]}))
PY
done
python3 - "$results" "$size" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
full = rows[0]
ratio = lambda a, b: a / b if b else float("nan")
print(f"data map bench: RAID5, 4 members of {sys.argv[2]} (sparse files), checksums on; ratios against the full array")
print(f"{'fill':<7} {'holding':>8} {'rebuild s':>9} {'x':>5} {'written':>9} {'x':>5} {'new file':>9} {'scrub s':>8} {'x':>5} {'read':>9} {'x':>5}")
mib = lambda b: f"{b / 2**20:.0f}M"
for r in rows:
    print(f"{r['fill']:<7} {r['holding'] / r['array_bytes']:>7.0%} "
          f"{r['rebuild_seconds']:>9.2f} {ratio(r['rebuild_seconds'], full['rebuild_seconds']):>5.2f} "
          f"{mib(r['rebuild_bytes']):>9} {ratio(r['rebuild_bytes'], full['rebuild_bytes']):>5.2f} "
          f"{mib(r['allocated']):>9} "
          f"{r['scrub_seconds']:>8.2f} {ratio(r['scrub_seconds'], full['scrub_seconds']):>5.2f} "
          f"{mib(r['scrub_bytes']):>9} {ratio(r['scrub_bytes'], full['scrub_bytes']):>5.2f}")
ten = next(r for r in rows if r["fill"] == "10%")
worst = max(ratio(ten[k], full[k]) for k in ("rebuild_seconds", "rebuild_bytes", "scrub_seconds", "scrub_bytes"))
print(f"10% fill, worst of the four ratios: {worst:.2f} (goal <= 0.15: {'met' if worst <= 0.15 else 'not met'}); "
      "spread: every region holds data, so the map saves nothing (regions of 64 MiB of member data)")
PY
