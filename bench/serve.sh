#!/usr/bin/env bash
# NBD serving throughput against peers, same run, same tmpfs-backed files.
#
#   bench/serve.sh [SIZE] [ROUNDS]      (defaults: 1G, 3; files live in /dev/shm)
#
# Sequential write and read of SIZE with nbdcopy (its defaults: 4 connections, 64 requests in
# flight) to and from: raidctl serve RAID0 over 4 files and RAID5 over 4 files, each created
# with xxh3 checksums (the default), blake3 checksums (--checksum blake3) and none
# (--no-checksums); and, as the peers, nbdkit's file plugin and qemu-nbd each serving one raw
# file of SIZE. The machine is shared and noisy, so the peers are measured alongside every
# array: each round copies to and from nbdkit, qemu-nbd and the array in turn, and an array's
# ratio is the median over the rounds of its MB/s over the faster peer's in the same round.
# Also prints the serve process's CPU seconds per GiB and its peak resident memory.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
raidctl=${RAIDCTL:-$here/target/release/raidctl}
size=${1:-1G}
rounds=${2:-3}
[ -x "$raidctl" ] || (cd "$here" && cargo build --release -q)
command -v nbdkit >/dev/null || { echo "needs nbdkit (apt install nbdkit)"; exit 2; }
command -v qemu-nbd >/dev/null || { echo "needs qemu-nbd (apt install qemu-utils)"; exit 2; }
dir=$(mktemp -d /dev/shm/raidctl-serve-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
bytes=$(numfmt --from=iec "$size")
head -c "$bytes" /dev/urandom > "$dir/src"

wait_sock() { for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.05; done; echo "no socket $1"; exit 1; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
# One round on one target: "write-seconds read-seconds".
round() { echo "$(secs nbdcopy "$dir/src" "$1") $(secs nbdcopy "$1" null:)"; }

# Peers: one raw file each, up for the whole run.
truncate -s "$bytes" "$dir/nbdkit.img" "$dir/qemu.img"
nbdkit --foreground --unix "$dir/nbdkit.sock" file "$dir/nbdkit.img" & pids+=($!)
qemu-nbd --format=raw --persistent --shared=8 --socket="$dir/qemu.sock" "$dir/qemu.img" & pids+=($!)
wait_sock "$dir/nbdkit.sock"; wait_sock "$dir/qemu.sock"
peer_k="nbd+unix:///?socket=$dir/nbdkit.sock"
peer_q="nbd+unix:///?socket=$dir/qemu.sock"
# Each peer's file is written once before timing, as the arrays' first write also allocates.
nbdcopy "$dir/src" "$peer_k"; nbdcopy "$dir/src" "$peer_q"

results="$dir/results"
: > "$results"
run_array() { # label level [create flags]
    local label=$1 level=$2 n=4 per
    # Members sized so the array holds at least SIZE.
    if [ "$level" = 0 ]; then per=$(( bytes / n + (64 << 20) )); else per=$(( bytes / (n - 1) + (64 << 20) )); fi
    local m=(); for i in $(seq 0 $((n - 1))); do m+=("$dir/a-m$i"); done
    # shellcheck disable=SC2086 # create flags are words
    "$raidctl" create --level "$level" --size "$per" ${3:-} "${m[@]}" 2>/dev/null
    "$raidctl" serve --foreground --socket "$dir/a.sock" "${m[0]}" >/dev/null 2>&1 & pids+=($!)
    local pid=$! uri="nbd+unix:///raid?socket=$dir/a.sock"
    wait_sock "$dir/a.sock"
    nbdcopy "$dir/src" "$uri"
    local cpu0 cpu1 r
    cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    for r in $(seq "$rounds"); do
        echo "$label $r nbdkit $(round "$peer_k")" >> "$results"
        echo "$label $r qemu $(round "$peer_q")" >> "$results"
        echo "$label $r raidctl $(round "$uri")" >> "$results"
    done
    cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    # CPU seconds per GiB moved (rounds x (write + read) of SIZE), and peak RSS in KiB.
    echo "$label cpu $(echo "scale=3; ($cpu1 - $cpu0) / 100 / ($rounds * 2 * $bytes / 1073741824)" | bc) $(awk '/VmHWM/ {print $2}' "/proc/$pid/status")" >> "$results"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -f "${m[@]}" "$dir/a.sock"
}
run_array "raid0 xxh3" 0
run_array "raid5 xxh3" 5
run_array "raid0 none" 0 --no-checksums
run_array "raid5 none" 5 --no-checksums
run_array "raid0 blake3" 0 "--checksum blake3"
run_array "raid5 blake3" 5 "--checksum blake3"

python3 - "$results" "$size" "$bytes" <<'PY'
import sys, statistics as st
path, size, nbytes = sys.argv[1], sys.argv[2], int(sys.argv[3])
rounds, cpu = {}, {}
for line in open(path):
    f = line.split()
    if f[2] == "cpu":
        cpu[" ".join(f[:2])] = (float(f[3]), int(f[4]) / 1024)
        continue
    label, r, target, w, rd = " ".join(f[:2]), f[2], f[3], float(f[4]), float(f[5])
    rounds.setdefault(label, {}).setdefault(r, {})[target] = (nbytes / w / 1e6, nbytes / rd / 1e6)
med = st.median
peers = {t: [x[t] for rs in rounds.values() for x in rs.values()] for t in ("nbdkit", "qemu")}
print(f"serve bench ({size}, /dev/shm, nbdcopy, {len(next(iter(rounds.values())))} rounds per array; medians): MB/s write / read")
for t, name in (("nbdkit", "nbdkit file"), ("qemu", "qemu-nbd")):
    print(f"  {name:<16} {med(v[0] for v in peers[t]):7.0f} / {med(v[1] for v in peers[t]):7.0f}")
print(f"  {'raidctl':<16} {'MB/s':>7}   {'MB/s':>7}   ratio to the faster peer in the same round   serve CPU s/GiB, peak RSS")
for label, rs in rounds.items():
    own = [x["raidctl"] for x in rs.values()]
    rw = med(x["raidctl"][0] / max(x["nbdkit"][0], x["qemu"][0]) for x in rs.values())
    rr = med(x["raidctl"][1] / max(x["nbdkit"][1], x["qemu"][1]) for x in rs.values())
    c, m = cpu[label]
    print(f"  {label:<16} {med(v[0] for v in own):7.0f} / {med(v[1] for v in own):7.0f}   = {rw:.2f}x / {rr:.2f}x{'':<27}{c:.2f}, {m:.0f} MiB")
print("goal: raid0 >= 1.0x, raid5 read >= 0.9x; peak resident memory under 100 MiB")
PY
