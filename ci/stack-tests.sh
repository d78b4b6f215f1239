#!/usr/bin/env bash
# The shim beside a PMPI tool: a few ld-preload programs run with a minimal counting tool
# (ld-preload-tests/tools/count_tool.c; with its Fortran names for the Fortran programs)
# natively, then with the tool and the shim preloaded in both orders, and with the tool
# preloaded under `matchshim run`. Each stacked run must pass as natively, the tool's counts
# of every rank must equal the native ones, and the shim's report (MATCHSHIM_REPORT) must hold
# every rank, with its engine having matched messages (MATCHSHIM_TAKEOVER=always and
# MATCHSHIM_COLL=shim: the shim matches every message, collectives' too). A library
# that defines the profiling names itself, loaded before the shim, gets one line at MPI_Init; a
# tool after the shim that reaches MPI past the profiling names, one line at its first call.
#
#   ci/stack-tests.sh [--mpi mpich|openmpi|all]
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$(repo_root)"
ROOT=$PWD
SRC=ld-preload-tests

mpis="mpich openmpi"
case "${1:-}" in
    --mpi) case "${2:-}" in all) ;; mpich|openmpi) mpis=$2 ;; *) sed -n '9p' "$0" >&2; exit 2 ;; esac ;;
    "") ;;
    *) sed -n '9p' "$0" >&2; exit 2 ;;
esac

# program ranks: C programs get the C tool, Fortran ones the tool with Fortran names too.
programs=("p2p_order 2" "p2p_persistent 2" "coll_all 3" "f77_p2p 2" "usempi_p2p 2")
run_timeout="${STACK_TESTS_TIMEOUT:-60}"
engine=col+pnp

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

fail() {
    echo "FAIL $1"
    [ -f "$2" ] && sed 's/^/    | /' "$2" | head -n 30
    failed=$((failed + 1))
}

# run MPI N PROG DIR PRELOAD [matchshim]: one run, the tool's counts in DIR/counts, output in
# DIR/out, the shim's report in DIR/report.jsonl.
run() {
    local mpi=$1 n=$2 prog=$3 dir=$4 preload=$5 how=${6:-} cmd
    rm -rf "$dir"
    mkdir -p "$dir/counts"
    mapfile -t cmd < <(launcher "$mpi" "$n" shm unbound yield "env:COUNT_TOOL_DIR=$dir/counts")
    if [ "$how" = matchshim ]; then
        # The command puts the shim before what LD_PRELOAD holds: the shim, then the tool.
        local command status=0
        command="$(dirname "$(shim_lib_for "$mpi")")/matchshim"
        LD_PRELOAD="$preload" timeout "$run_timeout" "$command" run --out "$dir/run" \
            --engine "$engine" --takeover always --coll shim -- "${cmd[@]}" "$prog" >"$dir/out" 2>&1 || status=$?
        cp "$dir/run/report.jsonl" "$dir/report.jsonl" 2>/dev/null || true
        return "$status"
    fi
    timeout "$run_timeout" "${cmd[@]}" env LD_PRELOAD="$preload" MATCHSHIM_TAKEOVER=always MATCHSHIM_COLL=shim \
        MATCHSHIM_ENGINE="$engine" MATCHSHIM_REPORT="$dir/report.jsonl" "$prog" >"$dir/out" 2>&1
}

same_counts() { diff -r "$1/counts" "$2/counts" >"$3" 2>&1 && [ -n "$(ls "$1/counts")" ]; }

for mpi in $mpis; do
    shim=$(shim_lib_for "$mpi")
    [ -f "$shim" ] || { echo "stack-tests: build the shim for $mpi first" >&2; exit 2; }
    bin="$ROOT/target/stack-tests/$mpi"
    mkdir -p "$bin"
    "$(mpicc_for "$mpi")" -shared -fPIC -O1 -Wall -o "$bin/count_tool.so" "$SRC/tools/count_tool.c"
    "$(mpicc_for "$mpi")" -c -fPIC -O1 -Wall -DFORTRAN -o "$bin/count_tool_f.o" "$SRC/tools/count_tool.c"
    "mpif90.$mpi" -shared -o "$bin/count_tool_fortran.so" "$bin/count_tool_f.o"
    for entry in "${programs[@]}"; do
        read -r prog n <<<"$entry"
        if [ -f "$SRC/$prog.c" ]; then
            "$(mpicc_for "$mpi")" -O2 -pthread -o "$bin/$prog" "$SRC/$prog.c" 2>/dev/null
            tool="$bin/count_tool.so"
        else
            (cd "$bin" && "mpif90.$mpi" -O1 -I"$ROOT/$SRC" -o "$prog" "$ROOT/$SRC/$prog.f90")
            tool="$bin/count_tool_fortran.so"
        fi
        native="$tmp/$mpi-$prog-native"
        if ! run "$mpi" "$n" "$bin/$prog" "$native" "$tool" || ! grep -q '^verdict: PASS' "$native/out"; then
            fail "$mpi $prog: natively with the tool" "$native/out"
            continue
        fi
        for order in "tool shim" "shim tool" matchshim; do
            dir="$tmp/$mpi-$prog-${order// /-}"
            case "$order" in
                "tool shim") run "$mpi" "$n" "$bin/$prog" "$dir" "$tool $shim" ;;
                "shim tool") run "$mpi" "$n" "$bin/$prog" "$dir" "$shim $tool" ;;
                matchshim) run "$mpi" "$n" "$bin/$prog" "$dir" "$tool" matchshim ;;
            esac || { fail "$mpi $prog ($order): exit status $?" "$dir/out"; continue; }
            if ! grep -q '^verdict: PASS' "$dir/out"; then
                fail "$mpi $prog ($order): no PASS" "$dir/out"
            elif ! same_counts "$native" "$dir" "$dir/diff"; then
                fail "$mpi $prog ($order): the tool's counts differ from native" "$dir/diff"
            elif ! shim_ran "$dir/report.jsonl" "$n" "$engine" matched; then
                fail "$mpi $prog ($order): the shim's report misses ranks or matches" "$dir/out"
            else
                echo "ok $mpi $prog ($order): $(cat "$dir/counts/rank.0" | tr '\n' ' ')"
                passed=$((passed + 1))
            fi
        done
    done
    # A layer at the profiling level loaded before the shim hides it from tools: one line says so.
    "$(mpicc_for "$mpi")" -shared -fPIC -O1 -Wall -o "$bin/pmpi_layer.so" "$SRC/tools/pmpi_layer.c"
    dir="$tmp/$mpi-layer"
    if ! run "$mpi" 2 "$bin/p2p_order" "$dir" "$bin/pmpi_layer.so $shim"; then
        fail "$mpi p2p_order (PMPI layer, shim): exit status" "$dir/out"
    elif [ "$(grep -c 'pmpi_layer.so defines PMPI_Send and is loaded before the shim' "$dir/out")" != 1 ]; then
        fail "$mpi p2p_order (PMPI layer, shim): not one line about the layer" "$dir/out"
    else
        echo "ok $mpi p2p_order (PMPI layer, shim): $(grep 'matchshim:' "$dir/out")"
        passed=$((passed + 1))
    fi
    # A tool after the shim that reaches MPI past PMPI_Send: one line says so, and the program
    # still runs as natively.
    "$(mpicc_for "$mpi")" -shared -fPIC -O1 -Wall -o "$bin/dlsym_tool.so" "$SRC/tools/dlsym_tool.c"
    dir="$tmp/$mpi-dlsym"
    if ! run "$mpi" 2 "$bin/p2p_order" "$dir" "$shim $bin/dlsym_tool.so" || ! grep -q '^verdict: PASS' "$dir/out"; then
        fail "$mpi p2p_order (shim, tool past PMPI): no PASS" "$dir/out"
    elif [ "$(grep -c 'dlsym_tool.so defines MPI_Send and does not pass it on to PMPI_Send' "$dir/out")" != 1 ]; then
        fail "$mpi p2p_order (shim, tool past PMPI): not one line about the tool" "$dir/out"
    else
        echo "ok $mpi p2p_order (shim, tool past PMPI): $(grep 'matchshim:' "$dir/out")"
        passed=$((passed + 1))
    fi
done
echo "stack-tests: $passed passed, $failed failed"
[ "$failed" = 0 ]
