#!/usr/bin/env bash
# How every cost grows with capacity (issue 30): RAID5 over 4 sparse member files of each SIZE,
# holding the same data and given the same client load at every size, so that a cost that grows
# with the members' size (not with the data or the load) shows as a ratio above 1 against the
# smallest size of the same run.
#
#   bench/scale.sh [RAIDCTL] [DIR] [SIZES] [SECS]
#   (defaults: target/release/raidctl, /work/raidctl-scale, "1G 16G 128G 1T", 10)
#
# Per size, in this order (the rebuild and the scrub come first, while the array holds only the
# DATA_MB written at its start: random writes over the whole export touch every region):
#   open     seconds of `raidctl status` (assembly: superblocks, bitmap, data map)
#   scrub    seconds of `raidctl scrub` of the array holding DATA_MB (default 256)
#   rebuild  seconds and bytes written of a member failed and added back as a new device
#   IOPS     4 KiB random writes over the whole export (fio's nbd engine, iodepth 16, SECS
#            seconds, a client flush every FLUSH_EVERY writes, default 1000, as a file
#            system's commits do)
#   meta/w   metadata bytes the members received per client write in that run (bitmap and
#            checksum pages, superblocks)
#   sync/w   fdatasync and fsync calls of the server per client write (strace -c -f on the
#            server during a second, 5 s run of the same load: ptrace slows it, the ratio stands)
#   RSS      the server's peak resident memory (VmHWM) after the load
#
# What it writes is bounded: DATA_MB twice (data, rebuild) plus about IOPS x SECS x 8 KiB per
# size; the member files are deleted after each size. Needs fio with its nbd engine and strace.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/target/release/raidctl}
dir=${2:-/work/raidctl-scale}
sizes=${3:-"1G 16G 128G 1T"}
secs=${4:-10}
data_mb=${DATA_MB:-256}
flush_every=${FLUSH_EVERY:-1000}
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "needs fio with the nbd engine"; exit 2; }
command -v strace >/dev/null || { echo "needs strace"; exit 2; }
rm -rf "$dir"; mkdir -p "$dir"
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
jget() { python3 -c "import json,sys; t=sys.stdin.read(); v=json.loads(t[t.index('{'):]); print(eval(sys.argv[1]))" "$1"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2])-float(sys.argv[1]):.3f}')" "$1" "$(now)"; }
meta_total() { # bytes of metadata written to the members, from status --json (whatever its
    # exit code says of the array's state; its stderr goes to status.err)
    { "$bin" status --json "$dir/m0" 2>"$dir/status.err" || true; } |
        jget "sum(m['bytes_written_by_kind']['metadata'] for m in v['members'])"
}
fio_run() { # seconds -> fio JSON on stdout
    fio --name=rw --ioengine=nbd --uri="nbd+unix:///?socket=$dir/s.sock" --rw=randwrite \
        --bs=4k --iodepth=16 --time_based --runtime="$1" --size=100% --norandommap \
        --fsync="$flush_every" --randrepeat=0 --output-format=json 2>/dev/null
}
out="$dir/results.tsv"; : > "$out"
for size in $sizes; do
    rm -f "$dir"/m* "$dir"/new "$dir/s.sock"
    truncate -s "$size" "$dir"/m{0,1,2,3}
    "$bin" create --level 5 "$dir"/m{0,1,2,3} >/dev/null 2>&1
    t=$(now); "$bin" status "$dir/m0" >/dev/null 2>&1; open_s=$(since "$t")
    head -c "$((data_mb << 20))" /dev/urandom > "$dir/data"
    "$bin" write -i "$dir/data" "$dir/m0" >/dev/null 2>&1
    rm -f "$dir/data"
    scrub_s=$("$bin" scrub --json "$dir/m0" 2>/dev/null | jget "v['seconds']")
    "$bin" fail --no-rebuild "$dir/m0" "$dir/m3" >/dev/null 2>&1
    truncate -s "$size" "$dir/new"
    rep=$("$bin" add --json "$dir/m0" "$dir/new" 2>/dev/null | grep '"done"' | head -n 1)
    rebuild_s=$(echo "$rep" | jget "v['seconds']")
    rebuild_b=$(echo "$rep" | jget "v['bytes_written']")
    "$bin" serve --socket "$dir/s.sock" "$dir/m0" >"$dir/serve.log" 2>&1 & pid=$!
    for _ in $(seq 400); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
    m0=$(meta_total)
    res=$(fio_run "$secs")
    iops=$(echo "$res" | jget "v['jobs'][0]['write']['iops']")
    writes=$(echo "$res" | jget "v['jobs'][0]['write']['total_ios']")
    m1=$(meta_total)
    meta_w=$(python3 -c "print(f'{($m1-$m0)/max($writes,1):.0f}')")
    strace -c -f -e trace=fdatasync,fsync -p "$pid" -o "$dir/strace.txt" 2>/dev/null & spid=$!
    sleep 0.5
    res=$(fio_run 5)
    kill -INT "$spid"; wait "$spid" 2>/dev/null || true
    writes2=$(echo "$res" | jget "v['jobs'][0]['write']['total_ios']")
    syncs=$(awk '$NF=="fdatasync"||$NF=="fsync"{n+=$4} END{print n+0}' "$dir/strace.txt")
    sync_w=$(python3 -c "print(f'{$syncs/max($writes2,1):.2f}')")
    rss_kb=$(awk '/VmHWM/{print $2}' "/proc/$pid/status")
    if ! kill "$pid" 2>/dev/null; then
        echo "$size: serve ended during the run: $(tail -n 1 "$dir/serve.log")" >&2
        iops=nan
    fi
    wait "$pid" 2>/dev/null || true; pid=
    echo -e "$size\t$open_s\t$scrub_s\t$rebuild_s\t$rebuild_b\t$iops\t$meta_w\t$sync_w\t$rss_kb" >> "$out"
    rm -f "$dir"/m* "$dir"/new
done
python3 - "$out" "$data_mb" "$secs" "$flush_every" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
data_mb, secs, every = sys.argv[2], sys.argv[3], sys.argv[4]
print(f"scale bench: RAID5 over 4 sparse members, {data_mb} MiB of data for scrub and rebuild; "
      f"4 KiB random writes over the whole export for {secs} s (iodepth 16, a flush every {every})")
print(f"{'members':>8} {'open s':>7} {'scrub s':>8} {'rebuild s':>10} {'rebuilt MB':>10} "
      f"{'IOPS':>7} {'meta B/w':>9} {'sync/w':>7} {'RSS MiB':>8}")
base = None
for r in rows:
    size, o, s, rb, rbb, iops, mw, sw, rss = r
    v = [float(o), float(s), float(rb), float(rbb) / 1e6, float(iops), float(mw), float(sw), float(rss) / 1024]
    print(f"{size:>8} {v[0]:7.2f} {v[1]:8.2f} {v[2]:10.2f} {v[3]:10.0f} {v[4]:7.0f} {v[5]:9.0f} {v[6]:7.2f} {v[7]:8.0f}")
    if base is None:
        base = v
        continue
    ratio = lambda i: f"{v[i] / base[i]:.2f}x" if base[i] else ("=" if v[i] == 0 else "inf")
    print(f"{'vs ' + rows[0][0]:>8} {ratio(0):>7} {ratio(1):>8} {ratio(2):>10} {ratio(3):>10} "
          f"{ratio(4):>7} {ratio(5):>9} {ratio(6):>7} {ratio(7):>8}")
print("A cost that does not grow with capacity stays near 1.00x (IOPS: near 1.00x means no loss).")
EOF
