#!/usr/bin/env bash
# Clients' random reads while a rebuild runs, against the same array idle, same run (issue 30:
# jobs yield to users; goal: at least 0.5x the idle array's IOPS at default settings).
#
#   bench/rebuild-foreground.sh [DIR] [MEMBER_SIZE] [SECS] [ROUNDS]
#   (defaults: /work/raidctl-rebuild-fg, 1G, 5, 2)
#
# A RAID5 over 4 member files in DIR (on a real disk: members are opened O_DIRECT), written
# whole with zeros (a rebuild skips the regions never written). Each round, fio's nbd engine
# reads 4 KiB blocks at random over the whole export (iodepth 16) for SECS seconds from
# `raidctl serve`:
#   idle      the healthy array, nothing else running;
#   yield     while the daemon rebuilds a new member at the default --min-rate (32M);
#   no-yield  the same rebuild with --min-rate 0 (full speed whatever clients do: the
#             behaviour before).
# Before each rebuild run slot 3's device is failed out offline; half a second into fio a fresh
# one is added through the daemon, whose rebuild then runs beside fio. A rebuild that ends
# before fio does is reported (its figure mixes both states). Prints median IOPS, p50 and p99
# latency per state and each rebuild state's IOPS over idle, and how far each rebuild got.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
raidctl=${RAIDCTL:-$here/target/release/raidctl}
dir=${1:-/work/raidctl-rebuild-fg}
size=${2:-1G}
secs=${3:-5}
rounds=${4:-2}
[ -x "$raidctl" ] || (cd "$here" && cargo build --release -q)
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "needs fio with the nbd engine"; exit 2; }
rm -rf "$dir"; mkdir -p "$dir"
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
out="$dir/results.tsv"; : > "$out"
truncate -s "$size" "$dir"/m{0,1,2,3}
"$raidctl" create --level 5 "$dir"/m{0,1,2,3} >/dev/null 2>&1
bytes=$("$raidctl" status --json "$dir/m0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["size_bytes"])')
head -c "$bytes" /dev/zero | "$raidctl" write "$dir/m0" 2>/dev/null
sock=$dir/s.sock
slot3=$dir/m3   # what serves slot 3 now
n=0
# state serve_flag: fio for SECS seconds; for a rebuild state, a new member is added through
# the daemon once fio runs (the rebuild starts with the clients, not before them).
measure() {
    local state=$1 flag=$2 fpid st
    rm -f "$sock"
    # shellcheck disable=SC2086 # the flag is words or nothing
    "$raidctl" serve --socket "$sock" $flag "$dir/m0" >"$dir/serve.log" 2>&1 & pid=$!
    for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
    fio --name=rr --ioengine=nbd --uri="nbd+unix:///?socket=$sock" --rw=randread \
        --bs=4k --iodepth=16 --time_based --runtime="$secs" --size=100% --norandommap \
        --randrepeat=0 --output-format=json > "$dir/fio.json" 2>/dev/null & fpid=$!
    if [ "$state" != idle ]; then
        sleep 0.5
        n=$((n + 1)); truncate -s "$size" "$dir/t$n"
        "$raidctl" add "$dir/m0" "$dir/t$n" >/dev/null 2>&1
        slot3=$dir/t$n
    fi
    wait "$fpid"
    st=$({ "$raidctl" status --json "$dir/m0" 2>/dev/null || true; } | python3 -c '
import json, sys
s = json.load(sys.stdin)
p = [m.get("progress") for m in s.get("members", []) if m.get("progress") is not None]
print("rebuilding" if p else "done", round(100 * max(p), 1) if p else 100)' 2>/dev/null || echo "unknown 0")
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    python3 - "$dir/fio.json" "$state" "$st" >> "$out" <<'PY'
import json, sys
t = open(sys.argv[1]).read()
r = json.loads(t[t.index('{'):])['jobs'][0]['read']
pct = r['clat_ns']['percentile']
print(f"{sys.argv[2]}\t{r['iops']}\t{pct['50.000000'] / 1e3}\t{pct['99.000000'] / 1e3}\t{sys.argv[3]}")
PY
}
fail_slot3() { "$raidctl" fail "$dir/m0" "$slot3" >/dev/null 2>&1; rm -f "$slot3"; }
for _ in $(seq "$rounds"); do
    measure idle ""
    fail_slot3; measure yield ""
    fail_slot3; measure no-yield "--min-rate 0"
    # Healthy again for the next idle run: the last rebuild finishes offline.
    "$raidctl" rebuild "$dir/m0" >/dev/null 2>&1
done
python3 - "$out" "$size" "$secs" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    state, iops, p50, p99, st, pct = line.split()
    v[state].append((float(iops), float(p50), float(p99), st, float(pct)))
med = lambda xs, i: statistics.median(x[i] for x in xs)
idle = med(v['idle'], 0)
print(f"RAID5 4 x {sys.argv[2]}, fio randread 4k iodepth 16, {sys.argv[3]} s per run, medians")
print(f"{'state':10} {'IOPS':>8} {'/idle':>6} {'p50 us':>8} {'p99 us':>8}  rebuild at the end of fio")
for s in ['idle', 'yield', 'no-yield']:
    xs = v[s]
    ends = ", ".join(f"{x[3]} {x[4]:.0f}%" for x in xs) if s != 'idle' else "-"
    print(f"{s:10} {med(xs, 0):8.0f} {med(xs, 0) / idle:6.2f} {med(xs, 1):8.0f} {med(xs, 2):8.0f}  {ends}")
PY
