#!/usr/bin/env bash
# Rebuild throughput against the physical limit, same files, same run.
#
#   bench/rebuild.sh [DIR] [MEMBER_SIZE]     (defaults: /var/tmp/raidctl-bench, 512M)
#
# Builds a RAID5 array over 4 member files in DIR, fills it with random data, fails member 0,
# then measures in one run:
#   read   sequential O_DIRECT read of a survivor (dd iflag=direct, 8 MiB blocks)
#   write  sequential O_DIRECT write of the rebuild target (dd oflag=direct)
#   rebuild  `raidctl rebuild` onto the target (bytes written to it per second)
# and prints rebuild / min(read, write). Files on tmpfs (/dev/shm) have no O_DIRECT; dd then
# runs buffered there, which is what tmpfs is.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
raidctl=${RAIDCTL:-$here/target/release/raidctl}
dir=${1:-/var/tmp/raidctl-bench}
size=${2:-512M}
[ -x "$raidctl" ] || (cd "$here" && cargo build --release -q)
rm -rf "$dir"; mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT

direct_flag() { dd if=/dev/zero of="$dir/.probe" bs=4096 count=1 oflag=direct status=none 2>/dev/null && echo direct || echo ""; rm -f "$dir/.probe"; }
flag=$(direct_flag)
iflag=${flag:+iflag=$flag}; oflag=${flag:+oflag=$flag}

"$raidctl" create --level 5 --size "$size" "$dir"/m{0,1,2,3} 2>/dev/null
bytes=$("$raidctl" status --json "$dir/m0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["size_bytes"])')
head -c "$bytes" /dev/urandom | "$raidctl" write "$dir/m1"
truncate -s "$size" "$dir/target"
"$raidctl" fail "$dir/m1" "$dir/m0" 2>/dev/null
"$raidctl" add --no-rebuild "$dir/m1" "$dir/target" 2>/dev/null
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true

rate() { # bytes seconds -> MB/s
    python3 -c "print(f'{$1/$2/1e6:.1f}')"
}
member_bytes=$(stat -c %s "$dir/m1")
t0=$(date +%s.%N); dd if="$dir/m1" of=/dev/null bs=8M $iflag status=none; t1=$(date +%s.%N)
read_mbs=$(rate "$member_bytes" "$(echo "$t1 - $t0" | bc)")
t0=$(date +%s.%N); dd if=/dev/zero of="$dir/scratch" bs=8M count=$((member_bytes / (8 << 20))) $oflag status=none; t1=$(date +%s.%N)
write_mbs=$(rate $((member_bytes / (8 << 20) * (8 << 20))) "$(echo "$t1 - $t0" | bc)")
rm -f "$dir/scratch"
# The same streams at once, as a rebuild runs them: 3 survivors read while the target is written.
# When the members share one device this, not a lone stream, is the physical limit.
t0=$(date +%s.%N)
for m in m1 m2 m3; do dd if="$dir/$m" of=/dev/null bs=8M $iflag status=none & done
dd if=/dev/zero of="$dir/scratch" bs=8M count=$((member_bytes / (8 << 20))) $oflag status=none &
wait; t1=$(date +%s.%N)
together_mbs=$(rate $((member_bytes / (8 << 20) * (8 << 20))) "$(echo "$t1 - $t0" | bc)")
rm -f "$dir/scratch"
summary=$(${PERF:-} "$raidctl" rebuild --json "$dir/m1" | tail -n 1)
rebuild_mbs=$(echo "$summary" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["bytes_written"]/d["seconds"]/1e6, 1))')
"$raidctl" status --json "$dir/m1" | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["state"]=="clean", s["state"]'
python3 - "$read_mbs" "$write_mbs" "$rebuild_mbs" "$together_mbs" "$dir" "${flag:-buffered}" <<'PY'
import sys
r, w, b, t = map(float, sys.argv[1:5])
print(f"rebuild bench ({sys.argv[5]}, dd {sys.argv[6]}): survivor read {r:.0f} MB/s, target write {w:.0f} MB/s, "
      f"rebuild {b:.0f} MB/s = {b/min(r, w):.2f} x min(read, write); "
      f"all streams at once: {t:.0f} MB/s per member, rebuild = {b/t:.2f} x that")
PY
