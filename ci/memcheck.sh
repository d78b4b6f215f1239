#!/usr/bin/env bash
# Valgrind memcheck over ld-preload programs run under the shim, on both MPIs.
#
# Usage: ci/memcheck.sh [--mpi mpich|openmpi|all] [--only "PROGRAM ..."] [--takeover "MODE ..."]
#
# Each program runs with 2 ranks, every rank under memcheck, once natively and once per takeover
# mode under the shim (default: always flip:3). A run fails on any memory error valgrind reports
# (with Open MPI's suppression file and ci/memcheck/<mpi>.supp, which hold MPI's own noise only)
# and on any block definitely lost that the shim allocated itself: a lost block whose allocation
# went through an MPI call (MPI_Init's own tables, say) is MPI's and is counted, not failed. The
# native run shows what MPI alone reports. Logs are kept under target/memcheck/.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/common.sh

mpis="mpich openmpi"
programs="p2p_order p2p_probe p2p_cancel p2p_persistent p2p_truncate p2p_comms p2p_completion p2p_freed_handles p2p_datatypes coll_all"
takeovers="always flip:3"
while [ $# -gt 0 ]; do
    case "$1" in
        --mpi) [ "$2" = all ] && mpis="mpich openmpi" || mpis=$2; shift 2 ;;
        --only) programs=$2; shift 2 ;;
        --takeover) takeovers=$2; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "memcheck: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
command -v valgrind >/dev/null || { echo "memcheck: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }

logs=target/memcheck
mkdir -p "$logs"
failed=0

# Definitely lost blocks in valgrind log $1 that the shim allocated: the first frame past the
# allocator is the shim's code rather than an MPI library's (or the shim's call into MPI).
shim_leaks() {
    awk '
        /definitely lost in loss record/ { inrec = 1; decided = 0; next }
        inrec && /^==[0-9]+== *$/ { inrec = 0; next }
        inrec && !decided && /(at|by) 0x/ {
            if ($0 ~ /vgpreload_memcheck|alloc::alloc|__rust_(alloc|realloc)|raw_vec|RawVec|Vec<|Box</) next
            decided = 1
            if ($0 ~ /\.rs:[0-9]+\)/ || $0 ~ /libmatchshim/) { print; count++ }
        }
        END { exit count > 0 }
    ' "$1"
}

for mpi in $mpis; do
    lib=$(shim_lib_for "$mpi")
    [ -f "$lib" ] || build_shim "$mpi" >&2
    supp=(--suppressions="ci/memcheck/$mpi.supp")
    [ "$mpi" = openmpi ] && supp+=(--suppressions=/usr/share/openmpi/openmpi-valgrind.supp)
    mkdir -p "target/ld-preload-tests/$mpi"
    for prog in $programs; do
        bin="target/ld-preload-tests/$mpi/$prog-g"
        "$(mpicc_for "$mpi")" -O1 -g -pthread -o "$bin" "ld-preload-tests/$prog.c" \
            2>"$logs/$mpi-$prog.build" || { cat "$logs/$mpi-$prog.build" >&2; exit 1; }
        for mode in native $takeovers; do
            env=()
            [ "$mode" = native ] || env=("LD_PRELOAD=$PWD/$lib" "MATCHSHIM_TAKEOVER=$mode")
            tag="$mpi-$prog-${mode/:/}"
            rm -f "$logs/$tag".*
            # 2 ranks over shared memory, unbound, the settings in every rank's environment.
            settings=(shm unbound yield)
            for kv in "${env[@]}"; do settings+=("env:$kv"); done
            mapfile -t cmd < <(launcher "$mpi" 2 "${settings[@]}")
            rc=0
            timeout 600 "${cmd[@]}" valgrind -q --error-exitcode=99 --leak-check=full \
                --show-leak-kinds=definite --errors-for-leak-kinds=none "${supp[@]}" --log-file="$logs/$tag.%p" \
                "$bin" >"$logs/$tag.out" 2>&1 || rc=$?
            lost=$(grep -h "definitely lost in loss record" "$logs/$tag".[0-9]* | wc -l)
            verdict=PASS why="$lost lost blocks, all MPI's"
            if [ "$rc" != 0 ]; then
                verdict=FAIL why="exit $rc (99: a memory error; see $logs/$tag.*)"
            elif [ "$mode" != native ]; then
                for log in "$logs/$tag".[0-9]*; do
                    if ! shim_leaks "$log" >/dev/null; then
                        verdict=FAIL why="a block the shim allocated was lost ($log)"
                    fi
                done
            fi
            [ "$verdict" = PASS ] || failed=$((failed + 1))
            echo "$verdict $mpi $mode $prog: $why"
        done
    done
done
echo "memcheck: $failed failed"
[ "$failed" = 0 ]
