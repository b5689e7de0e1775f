#!/usr/bin/env bash
# Peak resident memory of `raidctl serve` by member size (issue 30: memory bounded
# independent of capacity). RAID5 over 4 sparse member files of each SIZE holding 1 GiB of
# data; one NBD connection (fio's nbd engine, iodepth 16) reads 2 GiB sequentially in 1 MiB
# requests, then writes 1 GiB; the server's VmHWM is reported after both.
#
#   bench/memory.sh [RAIDCTL] [DIR] [SIZES]
#   (defaults: target/release/raidctl, /work/raidctl-mem, "1G 128G 1T")
#
# Writes about 2 GiB per size (the data, then the client's writes); the member files are
# deleted after each size. Needs fio with its nbd engine.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/target/release/raidctl}
dir=${2:-/work/raidctl-mem}
sizes=${3:-"1G 128G 1T"}
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "needs fio with the nbd engine"; exit 2; }
rm -rf "$dir"; mkdir -p "$dir"
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
load() { # rw size
    fio --name=m --ioengine=nbd --uri="nbd+unix:///?socket=$dir/s.sock" --rw="$1" --bs=1m \
        --iodepth=16 --size="$2" --output-format=terse >/dev/null 2>&1
}
printf '%8s %12s\n' members "peak RSS MiB"
for size in $sizes; do
    rm -f "$dir"/m* "$dir/s.sock"
    truncate -s "$size" "$dir"/m{0,1,2,3}
    "$bin" create --level 5 "$dir"/m{0,1,2,3} >/dev/null 2>&1
    head -c $((1 << 30)) /dev/urandom > "$dir/data"
    "$bin" write -i "$dir/data" "$dir/m0" >/dev/null 2>&1
    rm -f "$dir/data"
    "$bin" serve --socket "$dir/s.sock" "$dir/m0" >"$dir/serve.log" 2>&1 & pid=$!
    for _ in $(seq 400); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
    load read 2g
    load write 1g
    rss_kb=$(awk '/VmHWM/{print $2}' "/proc/$pid/status")
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    printf '%8s %12.0f\n' "$size" "$(python3 -c "print($rss_kb / 1024)")"
    rm -f "$dir"/m*
done
