#!/usr/bin/env bash
# Demo: an F1 array (RAID 5 with skewed parity) over four small files: create, write, read back,
# show status. Usage: scripts/demo.sh [DIR] (default ./demo). Needs a built binary
# (cargo build --release) or RAIDCTL pointing to one.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
raidctl=${RAIDCTL:-$here/target/release/raidctl}
dir=${1:-$here/demo}
rm -rf "$dir"
mkdir -p "$dir"

echo "== create an F1 array over 4 files of 64 MiB (slot 0 takes the extra parity)"
"$raidctl" create --level f1 --name demo --size 64M --endurance 600 \
    "$dir/m0" "$dir/m1" "$dir/m2" "$dir/m3"

echo "== write 20 MiB of random data at an unaligned offset, in 4 KiB pieces (partial-row writes)"
head -c $((20 << 20)) /dev/urandom > "$dir/data"
for i in $(seq 0 4 80); do
    dd if="$dir/data" bs=4096 skip=$i count=1 status=none |
        "$raidctl" write "$dir/m0" --offset $((12345 + i * 4096))
done
"$raidctl" write "$dir/m0" --offset 12345 --input "$dir/data"

echo "== read it back and compare"
"$raidctl" read "$dir/m2" --offset 12345 --length $((20 << 20)) --output "$dir/readback"
cmp "$dir/data" "$dir/readback" && echo "read back identical"

echo "== lose a member and read again (degraded)"
# Out of the members' directory: assembly looks there first, so a rename beside the others
# would be found again by its uuid.
mkdir -p "$dir/away"
mv "$dir/m3" "$dir/away/m3"
"$raidctl" status "$dir/m0" 2>/dev/null | grep '^state' || true   # exit 1: degraded
"$raidctl" read "$dir/m0" --offset 12345 --length $((20 << 20)) 2>/dev/null | cmp - "$dir/data" && echo "degraded read identical"
mv "$dir/away/m3" "$dir/m3"
rmdir "$dir/away"

echo "== silent corruption: flip 16 bytes in member m1's data area, let scrub find and repair it"
data_offset=$("$raidctl" examine --json "$dir/m1" | tr -d ' \n' | sed -n 's/.*"data":{"bytes":[0-9]*,"offset":\([0-9]*\)}.*/\1/p')
printf 'corrupted-bytes!' | dd of="$dir/m1" bs=1 seek=$((data_offset + 70000)) conv=notrunc status=none
"$raidctl" scrub --repair "$dir/m0" || true
"$raidctl" read "$dir/m0" --offset 12345 --length $((20 << 20)) | cmp - "$dir/data" && echo "read back identical after repair"

echo "== status"
"$raidctl" status "$dir/m0"
