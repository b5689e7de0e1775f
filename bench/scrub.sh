#!/usr/bin/env bash
# Scrub throughput against the members' aggregate sequential read bandwidth, same files, same run.
#
#   bench/scrub.sh [DIR] [MEMBER_SIZE] [ROUNDS]     (defaults: /var/tmp/raidctl-bench, 1G, 3)
#
# Builds a RAID5 array (with checksums) over 4 member files in DIR and fills it with random
# data, then alternates, ROUNDS times:
#   fio     4 jobs, one per member file, sequential 1 MiB reads (O_DIRECT when the file system
#           allows it), aggregate bandwidth
#   scrub   `raidctl scrub --json`: bytes read from the members per second (every block hashed
#           and checked against its checksum, every row's parity checked)
# and prints each round's ratio and the median. Needs fio and python3.
set -euo pipefail
dir=${1:-/var/tmp/raidctl-bench}
size=${2:-1G}
rounds=${3:-3}
. "$(dirname "$0")/common.sh"
bench_start "$dir" fio

"$raidctl" create --level 5 --size "$size" "$dir"/m{0,1,2,3} 2>/dev/null
bytes=$("$raidctl" status --json "$dir/m0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["size_bytes"])')
head -c "$bytes" /dev/urandom | "$raidctl" write "$dir/m0"
jobs=()
for i in 0 1 2 3; do jobs+=(--name="m$i" --filename="$dir/m$i"); done
ratios=()
for r in $(seq "$rounds"); do
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    fio_mbs=$(fio --direct=$direct --rw=read --bs=1M --ioengine=psync --group_reporting \
        --output-format=json "${jobs[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"]/1e6)')
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    scrub_mbs=$("$raidctl" scrub --json "$dir/m0" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert not d["problems"], d; print(d["read_bytes_per_second"]/1e6)')
    ratio=$(python3 -c "print(f'{$scrub_mbs/$fio_mbs:.2f}')")
    ratios+=("$ratio")
    printf 'round %s: fio aggregate %.0f MB/s, scrub %.0f MB/s, ratio %s\n' "$r" "$fio_mbs" "$scrub_mbs" "$ratio"
done
python3 - "$dir" "$direct" "${ratios[@]}" <<'PY'
import statistics, sys
d, direct, rs = sys.argv[1], sys.argv[2], [float(x) for x in sys.argv[3:]]
print(f"scrub bench ({d}, O_DIRECT {'on' if direct == '1' else 'off'}): scrub / fio aggregate read = "
      f"{statistics.median(rs):.2f} (median of {len(rs)}; min {min(rs):.2f}, max {max(rs):.2f}); goal >= 0.90")
PY
