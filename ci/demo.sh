#!/usr/bin/env bash
# The main job: builds the shim and the matchshim command, then shows what the shim is for on a
# program whose matching queues grow long (ci/bench/longqueue.c: 4096 messages queued, matched
# in and against arrival order): the program natively and under the shim side by side, the
# shim's matching report, and `matchshim compare` with its recommendation and plot. Installs the
# Debian packages it needs first (ci/packages.sh).
#   ci/demo.sh [--mpi mpich|openmpi] [--repeat R]
set -euo pipefail
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/packages.sh"
mpi=mpich
repeat=3
while [ $# -gt 0 ]; do
    case "$1" in
        --mpi) mpi=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        *) echo "usage: $0 [--mpi mpich|openmpi] [--repeat R]" >&2; exit 2 ;;
    esac
done
root=$(repo_root)
install_packages
echo "== building the shim for $mpi (cargo)"
build_shim "$mpi"
lib=$(shim_lib_for "$mpi")
# The matchshim command is built beside the shim.
matchshim="$(dirname "$lib")/matchshim"
out="$root/target/demo/$mpi"
mkdir -p "$out"
"$(mpicc_for "$mpi")" -O2 -I"$root/ci/bench" "$root/ci/bench/longqueue.c" -o "$out/longqueue"
app=("$out/longqueue" -n 4096 -r 3)
echo "machine: $(nproc) cores, load $(uptime | sed 's/.*load average: //')"

echo "== native $mpi: time per message on the receiving rank (us)"
mapfile -t launch < <(launcher "$mpi" 2)
"${launch[@]}" "${app[@]}" | tee "$out/native.txt"
echo "== the same under the shim (matchshim run, default engine)"
timeout 300 "$matchshim" run --mpi "$mpi" --lib "$lib" --out "$out/run" --ranks -n 2 -- "${app[@]}" |
    tee "$out/shim.txt"
echo "== native against the shim, per message (median of 3)"
awk '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                 if (FILENAME ~ /native/) native[f["name"]] = f["usec"]; else shim[f["name"]] = f["usec"] }
     END { printf "%-30s %10s %10s %8s\n", "benchmark", "native us", "shim us", "shim/native"
           for (n in native) if (n in shim)
               printf "%-30s %10.3f %10.3f %7.2fx\n", n, native[n], shim[n], shim[n] / native[n] }' \
    "$out/native.txt" "$out/shim.txt" | sort

echo "== matchshim compare: native, list, the default engine and bins, $repeat runs each, then a recommendation"
timeout 600 "$matchshim" compare --mpi "$mpi" --lib "$lib" --repeat "$repeat" \
    --out "$out/compare" --plot "$out/compare.svg" -n 2 -- "${app[@]}"
