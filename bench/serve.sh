#!/usr/bin/env bash
# NBD serving throughput against peers, same run, same tmpfs-backed files.
#
#   bench/serve.sh [SIZE]      (default 1G; files live in /dev/shm)
#
# Sequential read and write of SIZE with nbdcopy (best of 3 runs each) (its defaults: 4 connections, 64 requests in
# flight) from: raidctl serve RAID0 over 4 files, raidctl serve RAID5 over 4 files, and, as the
# peers, nbdkit's file plugin and qemu-nbd serving one raw file of the same size. Prints MB/s
# and each raidctl figure as a ratio to the faster peer; the arrays are served with xxh3 checksums
# (the default), with blake3 checksums (--checksum blake3) and without (--no-checksums), to
# show what hashing costs.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
raidctl=${RAIDCTL:-$here/target/release/raidctl}
size=${1:-1G}
[ -x "$raidctl" ] || (cd "$here" && cargo build --release -q)
command -v nbdkit >/dev/null || { echo "needs nbdkit (apt install nbdkit)"; exit 1; }
dir=$(mktemp -d /dev/shm/raidctl-serve-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
bytes=$(numfmt --from=iec "$size")
head -c "$bytes" /dev/urandom > "$dir/src"

mbs() { python3 -c "print(f'{$1/$2/1e6:.0f}')"; }
best() { # command... -> fastest of 3 runs in MB/s
    local t0 t1 s best=0
    for _ in 1 2 3; do
        t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N)
        s=$(mbs "$bytes" "$(echo "$t1 - $t0" | bc)")
        [ "$s" -gt "$best" ] && best=$s
    done
    echo "$best"
}
measure() { # uri -> "write read" MB/s, each the best of 3 (the first write also allocates)
    local uri=$1
    echo "$(best nbdcopy "$dir/src" "$uri") $(best nbdcopy "$uri" null:)"
}
wait_sock() { for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.05; done; echo "no socket $1"; exit 1; }

# Peers: one raw file each.
truncate -s "$bytes" "$dir/peer.img"
nbdkit --foreground --unix "$dir/nbdkit.sock" file "$dir/peer.img" & pids+=($!)
wait_sock "$dir/nbdkit.sock"
read -r kw kr <<<"$(measure "nbd+unix:///?socket=$dir/nbdkit.sock")"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
qemu-nbd --format=raw --persistent --shared=8 --socket="$dir/qemu.sock" "$dir/peer.img" & pids+=($!)
wait_sock "$dir/qemu.sock"
read -r qw qr <<<"$(measure "nbd+unix:///?socket=$dir/qemu.sock")"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true

run_level() { # level members [create flags] -> "write read peak-KiB"
    local level=$1 n=$2 per
    # Members sized so the array holds at least SIZE.
    if [ "$level" = 0 ]; then per=$(( bytes / n + (64 << 20) )); else per=$(( bytes / (n - 1) + (64 << 20) )); fi
    local m=(); for i in $(seq 0 $((n - 1))); do m+=("$dir/$level-m$i"); done
    "$raidctl" create --level "$level" --size "$per" ${3:-} "${m[@]}" 2>/dev/null
    "$raidctl" serve --foreground --socket "$dir/r$level.sock" "${m[0]}" >/dev/null 2>&1 & pids+=($!)
    wait_sock "$dir/r$level.sock"
    local wr
    wr=$(measure "nbd+unix:///raid?socket=$dir/r$level.sock")
    # Peak resident memory of the serve process over the copies (goal: under 100 MiB).
    echo "$wr $(awk '/VmHWM/ {print $2}' "/proc/${pids[-1]}/status")"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    rm -f "${m[@]}"
}
read -r r0w r0r r0m <<<"$(run_level 0 4)"
read -r r5w r5r r5m <<<"$(run_level 5 4)"
read -r n0w n0r n0m <<<"$(run_level 0 4 --no-checksums)"
read -r n5w n5r n5m <<<"$(run_level 5 4 --no-checksums)"
read -r b0w b0r b0m <<<"$(run_level 0 4 "--checksum blake3")"
read -r b5w b5r b5m <<<"$(run_level 5 4 "--checksum blake3")"

python3 - "$kw" "$kr" "$qw" "$qr" "$r0w" "$r0r" "$r5w" "$r5r" "$size" "$r0m" "$r5m" \
    "$n0w" "$n0r" "$n5w" "$n5r" "$b0w" "$b0r" "$b5w" "$b5r" <<'PY'
import sys
kw, kr, qw, qr, r0w, r0r, r5w, r5r = map(float, sys.argv[1:9])
r0m, r5m = (int(x) / 1024 for x in sys.argv[10:12])
n0w, n0r, n5w, n5r, b0w, b0r, b5w, b5r = map(float, sys.argv[12:20])
pw, pr = max(kw, qw), max(kr, qr)
print(f"serve bench ({sys.argv[9]}, /dev/shm, nbdcopy): MB/s write / read")
print(f"  nbdkit file      {kw:7.0f} / {kr:7.0f}")
print(f"  qemu-nbd         {qw:7.0f} / {qr:7.0f}")
print("  checksums xxh3 (the default):")
print(f"  raidctl raid0 x4 {r0w:7.0f} / {r0r:7.0f}   = {r0w/pw:.2f}x / {r0r/pr:.2f}x the faster peer")
print(f"  raidctl raid5 x4 {r5w:7.0f} / {r5r:7.0f}   = {r5w/pw:.2f}x / {r5r/pr:.2f}x the faster peer")
print("  without checksums:")
print(f"  raidctl raid0 x4 {n0w:7.0f} / {n0r:7.0f}   = {n0w/pw:.2f}x / {n0r/pr:.2f}x the faster peer")
print(f"  raidctl raid5 x4 {n5w:7.0f} / {n5r:7.0f}   = {n5w/pw:.2f}x / {n5r/pr:.2f}x the faster peer")
print("  checksums blake3:")
print(f"  raidctl raid0 x4 {b0w:7.0f} / {b0r:7.0f}   = {b0w/pw:.2f}x / {b0r/pr:.2f}x the faster peer")
print(f"  raidctl raid5 x4 {b5w:7.0f} / {b5r:7.0f}   = {b5w/pw:.2f}x / {b5r/pr:.2f}x the faster peer")
print(f"  serve peak resident memory: raid0 {r0m:.0f} MiB, raid5 {r5m:.0f} MiB (goal: under 100 MiB)")
PY
