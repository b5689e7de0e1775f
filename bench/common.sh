# Shared start of the bench scripts (sourced): `bench_start DIR [TOOL...]` checks the tools,
# builds raidctl if needed, makes DIR empty (removed on exit) and sets `here`, `raidctl` and
# `direct` (1 when files in DIR take O_DIRECT, as tmpfs on older kernels does not).
bench_start() {
    local d=$1 t; shift
    for t in "$@"; do
        command -v "$t" >/dev/null || { echo "$(basename "$0") needs $t (apt install $t)" >&2; exit 2; }
    done
    here=$(cd "$(dirname "$0")/.." && pwd)
    raidctl=${RAIDCTL:-$here/target/release/raidctl}
    [ -x "$raidctl" ] || (cd "$here" && cargo build --release -q)
    rm -rf "$d"; mkdir -p "$d"
    # shellcheck disable=SC2064 # the directory is fixed now
    trap "rm -rf '$d'" EXIT
    direct=1
    dd if=/dev/zero of="$d/.probe" bs=4096 count=1 oflag=direct status=none 2>/dev/null || direct=0
    rm -f "$d/.probe"
}

# Shared start of the scripts that serve one build against another over fio's nbd engine
# (sourced): `nbd_ab_start DIR` checks fio's nbd engine, makes DIR empty, and on exit kills the
# server whose PID is in `pid` (if any) and removes DIR; sets `out`, DIR/results.tsv, empty.
nbd_ab_start() {
    fio --enghelp 2>/dev/null | grep -qw nbd || { echo "needs fio with the nbd engine"; exit 2; }
    ab_dir=$1
    rm -rf "$ab_dir"; mkdir -p "$ab_dir"
    pid=
    trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; wait 2>/dev/null || true; rm -rf "$ab_dir"' EXIT
    out="$ab_dir/results.tsv"; : > "$out"
}
