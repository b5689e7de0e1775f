#!/usr/bin/env bash
# FUA write and FLUSH latency through NBD: two raidctl builds against each other and against
# qemu-nbd, in the same run, on the same disk.
#
#   bench/fua.sh OLD NEW [DIR] [OPS] [ROUNDS]
#       (defaults: DIR /work/raidctl-fua-bench, 400 operations per kind, 3 rounds)
#
# Each build serves its own RAID5 of 4 sparse 1 GiB member files in DIR (a real disk, not
# tmpfs: an fdatasync on tmpfs costs nothing); the anchor is `qemu-nbd --cache=none
# --aio=native` on one raw file there. A client (libnbd through Python's ctypes) sends, one at
# a time, OPS 4 KiB writes with the FUA flag at random offsets of the first 256 MiB, then OPS
# plain 4 KiB writes each followed by a FLUSH, timing the FUA writes and the FLUSHes. Each round
# measures the three servers in turn; printed are the medians over the rounds of p50 and p99
# per server, and NEW's over OLD's and over qemu-nbd's in the same round (lower is better).
# Writes at most 3 x 4 x 1 GiB of sparse files (about 3 x 256 MiB allocated), removed at exit.
set -euo pipefail
old=${1:?usage: bench/fua.sh OLD NEW [DIR] [OPS] [ROUNDS]}
new=${2:?usage: bench/fua.sh OLD NEW [DIR] [OPS] [ROUNDS]}
dir=${3:-/work/raidctl-fua-bench}
ops=${4:-400}
rounds=${5:-3}
for t in qemu-nbd python3; do
    command -v "$t" >/dev/null || { echo "bench/fua.sh needs $t" >&2; exit 2; }
done
python3 -c 'import ctypes; ctypes.CDLL("libnbd.so.0")' 2>/dev/null || { echo "bench/fua.sh needs libnbd0" >&2; exit 2; }
rm -rf "$dir"; mkdir -p "$dir"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
wait_sock() { for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done; echo "no socket $1" >&2; exit 1; }

truncate -s 1G "$dir/qemu.img"
qemu-nbd --format=raw --cache=none --aio=native --persistent --socket="$dir/qemu.sock" "$dir/qemu.img" >/dev/null 2>&1 & pids+=($!)
wait_sock "$dir/qemu.sock"
serve() { # label binary
    local m=()
    for i in 0 1 2 3; do m+=("$dir/$1-m$i"); done
    "$2" create --level 5 --size 1G "${m[@]}" >/dev/null 2>&1
    "$2" serve --foreground --socket "$dir/$1.sock" "${m[0]}" >/dev/null 2>&1 & pids+=($!)
    wait_sock "$dir/$1.sock"
}
serve old "$old"
serve new "$new"

python3 - "$dir" "$ops" "$rounds" <<'PY'
import ctypes, os, random, statistics as st, sys, time
d, ops, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lib = ctypes.CDLL("libnbd.so.0")
lib.nbd_create.restype = ctypes.c_void_p
lib.nbd_connect_uri.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
lib.nbd_pwrite.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_uint32]
lib.nbd_flush.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
lib.nbd_close.argtypes = [ctypes.c_void_p]
lib.nbd_get_error.restype = ctypes.c_char_p
FUA = 1
uris = {"qemu": f"nbd+unix:///?socket={d}/qemu.sock",
        "old": f"nbd+unix:///raid?socket={d}/old.sock",
        "new": f"nbd+unix:///raid?socket={d}/new.sock"}

def check(r):
    if r != 0:
        sys.exit(f"nbd: {lib.nbd_get_error().decode()}")

def measure(uri, seed):
    h = lib.nbd_create()
    check(lib.nbd_connect_uri(h, uri.encode()))
    rng = random.Random(seed)
    buf = os.urandom(4096)
    offs = [rng.randrange(65536) * 4096 for _ in range(2 * ops)]
    fua, flush = [], []
    for o in offs[:ops]:
        t = time.perf_counter()
        check(lib.nbd_pwrite(h, buf, 4096, o, FUA))
        fua.append(time.perf_counter() - t)
    for o in offs[ops:]:
        check(lib.nbd_pwrite(h, buf, 4096, o, 0))
        t = time.perf_counter()
        check(lib.nbd_flush(h, 0))
        flush.append(time.perf_counter() - t)
    lib.nbd_close(h)
    q = lambda xs, p: sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1e3
    return {"fua50": q(fua, .5), "fua99": q(fua, .99), "fl50": q(flush, .5), "fl99": q(flush, .99)}

# Warm-up: every target written once over the range (the arrays' first writes mark regions).
for u in uris.values():
    measure(u, 0)
res = []
for r in range(rounds):
    res.append({k: measure(u, r + 1) for k, u in uris.items()})
med = lambda f: st.median(f(x) for x in res)
print(f"FUA and FLUSH latency (ms; RAID5 of 4 x 1 GiB sparse files in {d}; {ops} ops per kind, one at a time; medians of {rounds} rounds)")
print(f"{'':10} {'FUA p50':>9} {'FUA p99':>9} {'FLUSH p50':>10} {'FLUSH p99':>10}")
for k in uris:
    print(f"{k:10} " + " ".join(f"{med(lambda x: x[k][m]):>{w}.2f}" for m, w in (("fua50", 9), ("fua99", 9), ("fl50", 10), ("fl99", 10))))
for base in ("old", "qemu"):
    print(f"{'new/' + base:10} " + " ".join(f"{med(lambda x: x['new'][m] / x[base][m]):>{w}.2f}" for m, w in (("fua50", 9), ("fua99", 9), ("fl50", 10), ("fl99", 10))))
PY
