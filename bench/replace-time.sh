#!/usr/bin/env bash
# Offline replace time, one build against another in the same run, alternating: an array of
# LEVEL over 4 members of SIZE in DIR, filled with random data, one member replaced
# (`replace --no-rebuild`), then `rebuild` timed. Prints each round and the medians.
#
#   bench/replace-time.sh OLD_RAIDCTL NEW_RAIDCTL [DIR] [SIZE] [ROUNDS] [CREATE FLAGS...]
#   (defaults: /dev/shm/raidctl-replace, 512M, 3, --level 6 --no-checksums)
set -euo pipefail
old=${1:?usage: bench/replace-time.sh OLD_RAIDCTL NEW_RAIDCTL [DIR] [SIZE] [ROUNDS] [CREATE FLAGS...]}
new=${2:?usage}
dir=${3:-/dev/shm/raidctl-replace}
size=${4:-512M}
rounds=${5:-3}
shift $(( $# < 5 ? $# : 5 ))
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--level 6 --no-checksums)
rm -rf "$dir"; mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
one() { # binary -> seconds
    local bin=$1
    rm -f "$dir"/m* "$dir"/new "$dir"/in
    "$bin" create "${flags[@]}" --size "$size" "$dir"/m{0,1,2,3} >/dev/null 2>&1
    local bytes
    bytes=$("$bin" examine --json "$dir/m0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["array_bytes"])')
    head -c "$bytes" /dev/urandom > "$dir/in"
    "$bin" write "$dir/m0" --offset 0 --input "$dir/in" >/dev/null
    rm -f "$dir/in"
    truncate -s "$(stat -c %s "$dir/m1")" "$dir/new"
    "$bin" replace --no-rebuild "$dir/m0" "$dir/m1" "$dir/new" >/dev/null 2>&1
    local s e
    s=$(date +%s.%N); "$bin" rebuild "$dir/m0" >/dev/null 2>&1; e=$(date +%s.%N)
    python3 -c "print(f'{$e - $s:.3f}')"
}
o=(); n=()
for r in $(seq "$rounds"); do
    o+=("$(one "$old")"); n+=("$(one "$new")")
    echo "round $r: old ${o[-1]} s, new ${n[-1]} s"
done
python3 - "${o[*]}" "${n[*]}" <<'PY'
import statistics, sys
o = [float(x) for x in sys.argv[1].split()]
n = [float(x) for x in sys.argv[2].split()]
mo, mn = statistics.median(o), statistics.median(n)
print(f"replace (rebuild of a replace target) median: old {mo:.3f} s, new {mn:.3f} s, new/old {mn / mo:.2f}")
PY
