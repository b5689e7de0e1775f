#!/usr/bin/env bash
# Parity kernels against ISA-L and SnapRAID, same machine, same run, one core.
#
#   bench/parity.sh [ROUNDS]     (default 3)
#
# raidctl: `raidctl bench --parity --json` (8 data chunks; the kernel picked at run time).
# ISA-L:   xor_gen and pq_gen from Debian's libisal-dev, through bench/isal_parity.c, on
#          page-aligned buffers of the same sizes.
# SnapRAID: `snapraid -T` (Debian's snapraid): gen1, gen2, rec2 of its best kernel, 8 buffers
#          of 256 KiB.
# Every figure is GB/s of data processed. Prints each ratio and its goal (xor, pq >= 1.0x ISA-L
# and SnapRAID; rec2 >= 2x SnapRAID), the median over ROUNDS. Needs gcc, libisal-dev, snapraid,
# python3.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
raidctl=${RAIDCTL:-$here/target/release/raidctl}
rounds=${1:-3}
[ -x "$raidctl" ] || (cd "$here" && cargo build --release -q)
[ -f /usr/include/isa-l/raid.h ] || { echo "bench/parity.sh needs libisal-dev (apt install libisal-dev)" >&2; exit 2; }
command -v snapraid >/dev/null || { echo "bench/parity.sh needs snapraid (apt install snapraid)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/isal_parity" "$here/bench/isal_parity.c" -lisal
for r in $(seq "$rounds"); do
    "$raidctl" bench --parity --json > "$tmp/raidctl.$r.json"
    "$tmp/isal_parity" 8 > "$tmp/isal.$r.json"
    snapraid -T > "$tmp/snapraid.$r.txt" 2>&1
done
python3 - "$tmp" "$rounds" <<'PY'
import json, re, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
def add(key, v):
    rows.setdefault(key, []).append(v)
for r in range(1, rounds + 1):
    rc = json.load(open(f"{tmp}/raidctl.{r}.json"))
    best = rc["best"]
    ours = {x["chunk_bytes"]: x for x in rc["results"] if x["kernel"] == best}
    isal = {x["chunk_bytes"]: x for x in json.load(open(f"{tmp}/isal.{r}.json"))["results"]}
    text = open(f"{tmp}/snapraid.{r}.txt").read()
    snap = {}
    for name in ("gen1", "gen2", "rec2"):
        m = re.search(rf"^\s+{name}\s+(\S+)\s+(.*)$", text, re.M)
        # The columns after "best" are per kernel; the best kernel's figure is the largest.
        snap[name] = max(int(x) for x in m.group(2).split()) / 1000
    for size in (65536, 262144):
        o, i = ours[size], isal[size]
        add(("xor", size, "ISA-L xor_gen", 1.0), (o["xor_gbps"], i["xor_gbps"]))
        add(("pq-gen", size, "ISA-L pq_gen", 1.0), (o["pq_gen_gbps"], i["pq_gen_gbps"]))
    o = ours[262144]
    add(("xor", 262144, "SnapRAID gen1", 1.0), (o["xor_gbps"], snap["gen1"]))
    add(("pq-gen", 262144, "SnapRAID gen2", 1.0), (o["pq_gen_gbps"], snap["gen2"]))
    add(("rec2", 262144, "SnapRAID rec2", 2.0), (o["rec2_gbps"], snap["rec2"]))
print(f"parity kernels (raidctl kernel: {best}), 8 data chunks, one core, GB/s of data; median of {rounds}")
print(f"{'kernel':<8} {'chunk':>7} {'raidctl':>8} {'peer':>8} {'ratio':>6} {'goal':>5}  peer")
for (k, size, peer, goal), vals in rows.items():
    ours = statistics.median(v[0] for v in vals)
    theirs = statistics.median(v[1] for v in vals)
    ratio = statistics.median(v[0] / v[1] for v in vals)
    mark = "" if ratio >= goal else "  (below goal)"
    print(f"{k:<8} {size // 1024:>6}K {ours:>8.2f} {theirs:>8.2f} {ratio:>5.2f}x {goal:>4.1f}x  {peer}{mark}")
PY
