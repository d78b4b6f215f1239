#!/usr/bin/env bash
# Runs the collective test programs (ld-preload-tests/coll_*.c) natively and under the shim,
# for MPICH and Open MPI, with the rank counts in each program's `/* ranks: … */` line.
# A shim run passes when it exits 0, prints `verdict: PASS` and the same check lines as the
# native run. Each engine named runs the shim's own collectives (MATCHSHIM_COLL=shim); mode
# `default` runs the shim as it comes (MATCHSHIM_COLL=auto: MPI runs what the shim would not
# pay for); `coll-native` runs it with MATCHSHIM_COLL=native (engine rank).
#   ci/coll-tests.sh [--mpi mpich|openmpi|all] [--engines "list rank"] [--only "coll_all …"]
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
cd "$root"
mpis="mpich openmpi"
engines="list rank"
only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --mpi) [ "$2" = all ] && mpis="mpich openmpi" || mpis=$2; shift 2 ;;
        --engines) engines=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        *) sed -n '6p' "$0" >&2; exit 2 ;;
    esac
done

# Shared memory only; no binding; idle ranks yield (MPICH busy-polls: it yields soon).
settings=(shm unbound yield env:MPIR_CVAR_POLLS_BEFORE_YIELD=100)

checks() { grep -E '^(ok|FAIL|skip) ' "$1" | sort || true; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
for mpi in $mpis; do
    lib=$(shim_lib_for "$mpi")
    [ -f "$lib" ] || { echo "coll-tests: build the shim for $mpi first (see README)" >&2; exit 2; }
    bindir="target/coll-tests/$mpi"
    mkdir -p "$bindir"
    for src in ld-preload-tests/coll_*.c; do
        prog=$(basename "$src" .c)
        [ -z "$only" ] || [[ " $only " == *" $prog "* ]] || continue
        "$(mpicc_for "$mpi")" -O2 -Wall -Wno-stringop-overflow -o "$bindir/$prog" "$src"
        for n in $(sed -n 's/.*ranks:\([ 0-9]*\).*/\1/p' "$src" | head -n 1); do
            for mode in native $engines default coll-native; do
                out="$tmp/$mpi.$prog.$n.$mode"
                start=$(date +%s.%N)
                rc=0
                mapfile -t cmd < <(launcher "$mpi" "$n" "${settings[@]}")
                if [ "$mode" = native ]; then
                    timeout -k 5 120 "${cmd[@]}" "$bindir/$prog" >"$out" 2>&1 || rc=$?
                else
                    case "$mode" in
                        default) vars=() ;;
                        coll-native) vars=(MATCHSHIM_ENGINE=rank MATCHSHIM_COLL=native) ;;
                        *) vars=(MATCHSHIM_ENGINE="$mode" MATCHSHIM_COLL=shim) ;;
                    esac
                    timeout -k 5 120 "${cmd[@]}" env LD_PRELOAD="$lib" "${vars[@]}" "$bindir/$prog" \
                        >"$out" 2>&1 || rc=$?
                fi
                secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
                why=""
                if [ "$rc" != 0 ]; then
                    why="exit status $rc"
                elif ! grep -qx 'verdict: PASS' "$out"; then
                    why="no 'verdict: PASS'"
                elif [ "$mode" != native ] && [ "$(checks "$out")" != "$(checks "$tmp/$mpi.$prog.$n.native")" ]; then
                    why="check lines differ from the native run"
                fi
                if [ -z "$why" ]; then
                    echo "PASS $mpi $mode $prog n=$n (${secs}s)"
                    passed=$((passed + 1))
                else
                    echo "FAIL $mpi $mode $prog n=$n (${secs}s): $why"
                    sed 's/^/    | /' "$out" | head -n 40
                    failed=$((failed + 1))
                fi
            done
        done
    done
done
echo "coll-tests: $passed passed, $failed failed"
[ "$failed" = 0 ]
