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
