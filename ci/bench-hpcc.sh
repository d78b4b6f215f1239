#!/usr/bin/env bash
# Debian's HPC Challenge (`hpcc`, built on Open MPI) natively and under libmatchshim.so with the
# default settings, runs alternating in rotating order, same machine, same run.
#
#   ci/bench-hpcc.sh [--ranks "2 4"] [--rounds R] [-N SIZE]
#
# Each rank count gets a process grid (2: 1x2, 4: 2x2, else 1xN) and HPL order SIZE (default
# 2000; PTRANS and the other tests size themselves from it). Prints, per figure of hpcc's
# summary (HPL, PTRANS, MPI RandomAccess, MPI FFT, ping-pong and ring latency and bandwidth),
# the median over the rounds natively and under the shim, and shim/native of the figure:
# above 1 is better for rates and bandwidths, below 1 for latencies. A shim run counts only if
# the shim's report shows every rank ran under it. Raw output: target/bench-hpcc/.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/ci/common.sh"
RANKS="2 4"
ROUNDS=3
SIZE=2000
TIMEOUT=${BENCH_TIMEOUT:-600}

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case $1 in
        --ranks) RANKS=${2:?}; shift 2 ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        -N) SIZE=${2:?}; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "bench-hpcc.sh: unknown argument: $1" >&2; usage 2 >&2 ;;
    esac
done
command -v hpcc >/dev/null || { echo "bench-hpcc.sh: hpcc is not installed (apt-get install hpcc)" >&2; exit 2; }
LIB=$ROOT/target/openmpi/release/libmatchshim.so
[ -f "$LIB" ] || build_shim openmpi || exit 1

OUT=$ROOT/target/bench-hpcc
rm -rf "$OUT"; mkdir -p "$OUT"
RESULTS=$OUT/results.txt
: >"$RESULTS"
FAILED=0
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $RANKS; do
    case $n in 2) p=1 q=2 ;; 4) p=2 q=2 ;; *) p=1 q=$n ;; esac
    mapfile -t cmd < <(launcher openmpi "$n" shm unbound yield)
    for ((round = 1; round <= ROUNDS; round++)); do
        configs=(native shim)
        ((round % 2 == 0)) && configs=(shim native)
        for cfg in "${configs[@]}"; do
            dir=$OUT/$n.$cfg.r$round
            mkdir -p "$dir"
            sed -e "6s/.*/$SIZE         Ns/" -e "11s/.*/$p            Ps/" -e "12s/.*/$q            Qs/" \
                /usr/share/doc/hpcc/examples/_hpccinf.txt >"$dir/hpccinf.txt"
            envv=()
            [ "$cfg" = shim ] && envv=(LD_PRELOAD="$LIB" MATCHSHIM_REPORT="$dir/report.jsonl")
            t0=$(date +%s)
            (cd "$dir" && timeout -k 10 "$TIMEOUT" "${cmd[@]}" env "${envv[@]}" hpcc >run.log 2>&1)
            rc=$?
            if [ $rc != 0 ] || ! grep -q 'End of Summary section' "$dir/hpccoutf.txt" 2>/dev/null; then
                echo "$n ranks, round $round, $cfg: FAILED (exit $rc), see $dir"
                FAILED=1
                continue
            fi
            if [ "$cfg" = shim ] && ! shim_ran "$dir/report.jsonl" "$n" col+pnp; then
                echo "$n ranks, round $round, $cfg: no shim report from every rank, not counted"
                FAILED=1
                continue
            fi
            echo "$n ranks, round $round, $cfg: $(($(date +%s) - t0)) s"
            sed -n '/Begin of Summary section/,/End of Summary section/p' "$dir/hpccoutf.txt" |
                grep '=' | sed "s/^/ranks=$n config=$cfg /" >>"$RESULTS"
        done
    done
done

python3 - "$RESULTS" <<'EOF'
import statistics, sys
from collections import defaultdict

figures = [
    "HPL_Tflops", "PTRANS_GBs", "MPIRandomAccess_GUPs", "MPIFFT_Gflops",
    "MaxPingPongLatency_usec", "AvgPingPongLatency_usec", "MaxPingPongBandwidth_GBytes",
    "NaturallyOrderedRingLatency_usec", "RandomlyOrderedRingLatency_usec",
    "NaturallyOrderedRingBandwidth_GBytes", "RandomlyOrderedRingBandwidth_GBytes",
]
values = defaultdict(list)
for line in open(sys.argv[1]):
    words = line.split()
    ranks, config = words[0].split("=")[1], words[1].split("=")[1]
    name, _, value = words[2].partition("=")
    if name in figures:
        values[(ranks, name, config)].append(float(value))
print(f"\n{'ranks':>5} {'figure':<38} {'native':>12} {'shim':>12} {'shim/native':>11}")
for ranks in sorted({k[0] for k in values}, key=int):
    for name in figures:
        nat, shim = values.get((ranks, name, "native")), values.get((ranks, name, "shim"))
        if not nat or not shim:
            continue
        n, s = statistics.median(nat), statistics.median(shim)
        ratio = f"{s / n:.3f}" if n else "-"
        print(f"{ranks:>5} {name:<38} {n:>12.6g} {s:>12.6g} {ratio:>11}")
print("(medians over the rounds; above 1 is better for rates and bandwidths, below 1 for latencies)")
EOF
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $FAILED
