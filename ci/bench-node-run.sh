#!/usr/bin/env bash
# Runs in the folder ci/bench-node.sh packs, on a node without MPI or cargo (see that script).
#   run.sh [OUT [SECTION...]]   sections: p2p persistent spread hogged colls comms hotspot halo
#                               apps hpcc (all by default), control (2-rank ping-pong and
#                               collectives under an empty preloaded library: the noise
#                               floor), or smoke (one 8-byte ping-pong).
# OUT gets results.txt (every result line), table.txt and takeovers.txt (the shim's line at
# MPI_Finalize from each run in which it took a queue over).
# Environment: MPIS (default "mpich openmpi"), ROUNDS (default 3), TIMEOUT (seconds per run,
# default 60).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$here/out}
shift $(($# > 0))
sections=("$@")
[ $# -gt 0 ] || sections=(p2p persistent spread hogged colls comms hotspot halo apps hpcc)
rounds=${ROUNDS:-3}
limit=${TIMEOUT:-60}
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
mkdir -p "$out"
results=$out/results.txt
: >"$results"
: >"$out/takeovers.txt"
# Both MPIs from this folder, not from where Debian put them.
export PATH=$here/bin:$PATH LD_LIBRARY_PATH=$here/lib UCX_MODULE_DIR=$here/lib/ucx
export OPAL_PREFIX=$here/ompi OPAL_BINDIR=$here/bin OPAL_LIBDIR=$here/lib
export OPAL_PKGLIBDIR=$here/ompi/plugins OPAL_PKGDATADIR=$here/ompi/share
export OPAL_SYSCONFDIR=$here/ompi/etc PMIX_MCA_mca_base_component_path=$here/pmix/plugins
cores=$(nproc)

# Ranks bound to a core each where there are enough, but where BIND=none says otherwise
# (threads, or a run pinned to two cores by PIN).
launch() {
    local mpi=$1 n=$2 bind=${BIND:-core}
    [ "$n" -le "$cores" ] || bind=none
    case $mpi in
        mpich) echo "mpiexec.mpich -n $n -bind-to $bind -genv UCX_TLS self,sm" ;;
        openmpi) echo "mpiexec.openmpi --allow-run-as-root --oversubscribe -n $n --bind-to $bind" ;;
    esac
}

# One run: `one MPI N CONFIG TAG PROG ARGS...`; its result lines go to results.txt prefixed
# with "MPI N CONFIG TAG". CONFIG: native, auto (the shim as it comes), shim (every
# collective on the shim), untaken (the shim as it comes but for a takeover depth so large
# that no queue is taken over) or empty (a library that defines nothing, preloaded). TAG names
# the circumstance (quiet, hog).
one() {
    local mpi=$1 n=$2 cfg=$3 tag=$4 prog=$5 report
    shift 5
    local envv=()
    report=$reports/$mpi-$n-$cfg-$tag-$prog-$RANDOM.jsonl
    case $cfg in
        auto) envv=(LD_PRELOAD="$here/$mpi/libmatchshim.so" MATCHSHIM_REPORT="$report") ;;
        shim) envv=(LD_PRELOAD="$here/$mpi/libmatchshim.so" MATCHSHIM_REPORT="$report"
                    MATCHSHIM_COLL=shim) ;;
        untaken) envv=(LD_PRELOAD="$here/$mpi/libmatchshim.so" MATCHSHIM_REPORT="$report"
                       MATCHSHIM_TAKEOVER_DEPTH=1048576) ;;
        empty) envv=(LD_PRELOAD="$here/empty.so") ;;
    esac
    local log rc work
    work=$(mktemp -d)
    [ "$prog" != hpcc ] || hpcc_input "$n" >"$work/hpccinf.txt"
    # shellcheck disable=SC2046
    log=$(cd "$work" && ${PIN:-} timeout -k 5 "$limit" $(launch "$mpi" "$n") env "${envv[@]}" \
        "$here/$mpi/$prog" "$@" 2>&1)
    rc=$?
    [ "$prog" != hpcc ] || [ $rc != 0 ] || log=$(hpcc_results "$work/hpccoutf.txt")
    rm -rf "$work"
    if [ $rc != 0 ]; then
        echo "FAILED ($rc): $mpi $n $cfg $prog $*: $(tail -n 3 <<<"$log")"
        return
    fi
    # Only the shim writes reports, one line a rank.
    if [[ $cfg == auto || $cfg == shim || $cfg == untaken ]] &&
        [ "$(wc -l <"$report" 2>/dev/null || echo 0)" != "$n" ]; then
        echo "NO REPORT: $mpi $n $cfg $prog $*"
        return
    fi
    grep -E '^(RESULT|bench=)' <<<"$log" | sed "s/^/$mpi $n $cfg $tag /" >>"$results"
    # The shim's line at MPI_Finalize, printed where it took a queue over.
    grep '^matchshim (' <<<"$log" | sed "s/^/$mpi $n $cfg $tag $prog: /" >>"$out/takeovers.txt"
}

# `rotate MPI N "CONFIGS" TAG PROG ARGS...`: ROUNDS rounds, the configurations' order rotating.
rotate() {
    local mpi=$1 n=$2 tag=$4 r k start=$SECONDS
    read -ra cfgs <<<"$3"
    shift 4
    for ((r = 0; r < rounds; r++)); do
        for ((k = 0; k < ${#cfgs[@]}; k++)); do
            one "$mpi" "$n" "${cfgs[$(((k + r) % ${#cfgs[@]}))]}" "$tag" "$@"
        done
    done
    echo "$mpi $n $tag $*: $((SECONDS - start)) s"
}

# hpcc's input for N ranks: HPL order 2000 on a near-square grid.
hpcc_input() {
    local p=1
    while [ $(((p * 2) * (p * 2))) -le "$1" ]; do p=$((p * 2)); done
    sed -e "6s/.*/2000         Ns/" -e "11s/.*/$p            Ps/" -e "12s/.*/$(($1 / p))            Qs/" \
        "$here/openmpi/hpccinf.txt"
}
# The figures of hpcc's summary, as result lines.
hpcc_results() {
    local figure
    for figure in HPL_Tflops PTRANS_GBs MPIRandomAccess_GUPs MPIFFT_Gflops \
        MaxPingPongLatency_usec MaxPingPongBandwidth_GBytes RandomlyOrderedRingLatency_usec \
        RandomlyOrderedRingBandwidth_GBytes NaturallyOrderedRingLatency_usec; do
        grep "^$figure=" "$1" | sed "s/^\([^=]*\)=/RESULT name=hpcc:\1 usec=/"
    done
}

hog() { BIND=none PIN="taskset -c 0,1" "$@"; }

echo "node: $cores cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
# The sections, each for one MPI.
p2p() {
    rotate "$1" 2 "native auto" quiet pingpong -m 65536 -r 5
    rotate "$1" 2 "native auto" quiet bandwidth -m 65536 -r 5
    rotate "$1" 2 "native auto" quiet longqueue -n 4096 -r 3
}
# A halo of persistent requests (Startall, then Waitall, two Waits or a Testall loop): one
# rank sending to itself shows the shim's share most.
persistent() {
    local n
    for n in 1 2; do
        rotate "$1" $n "native auto" quiet persistent
        rotate "$1" $n "native auto" quiet persistent -t
    done
}
# Receives posted per source, newest first: shallow per source, deep as one list.
spread() {
    local n
    for n in $(wide "2 4 8"); do rotate "$1" $n "native auto" quiet spread -t "32 128 512"; done
}
hogged() {
    # Two cores for both ranks and a busy loop on one of them.
    taskset -c 0 sh -c 'while :; do :; done' &
    local busy=$!
    hog rotate "$1" 2 "native auto" hog longqueue -n 4096 -r 3
    kill $busy
}
# 16 ranks too where there are 16 cores: where the shim's gather may start to pay.
wide() { if [ "$cores" -ge 16 ]; then echo "$1 16"; else echo "$1"; fi; }
colls() {
    local n
    for n in $(wide "2 4 8"); do rotate "$1" $n "native auto shim" quiet coll latency 2000; done
}
comms() {
    local n
    for n in 4 8; do
        rotate "$1" $n "native auto shim" quiet coll comms 500
        rotate "$1" $n "native auto shim" quiet coll held 1020
    done
}
hotspot() {
    local n
    for n in $(wide 8); do rotate "$1" $n "native auto shim" quiet coll hotspot 50; done
}
halo() {
    local t
    for t in 1 2 4 8; do BIND=none rotate "$1" 2 "native auto" quiet halo_mt -d 1 -t $t -i 1000 -r 5; done
}
apps() {
    local app
    for app in app_radix app_nbody app_miniamr; do
        rotate "$1" 4 "native auto shim empty untaken" quiet $app
    done
}
hpcc() { [ "$1" != openmpi ] || for n in 4 8; do rotate "$1" $n "native auto" quiet hpcc; done; }
# What preloading any library does: one that defines nothing, beside native and the shim.
control() {
    rotate "$1" 2 "native empty auto" quiet pingpong -m 65536 -r 5
    rotate "$1" 2 "native empty auto" quiet coll latency 20000
}
smoke() { rounds=1 rotate "$1" 2 "native auto" quiet pingpong -s 8 -r 3; }

mpis=()
for mpi in ${MPIS:-mpich openmpi}; do
    # shellcheck disable=SC2046
    if check=$(timeout -k 5 20 $(launch $mpi 2) "$here/$mpi/pingpong" -s 8 -r 1 2>&1); then
        mpis+=("$mpi")
    else
        echo "$mpi does not run here: $(tail -n 5 <<<"$check")"
    fi
done
for section in "${sections[@]}"; do
    for mpi in "${mpis[@]}"; do
        echo "== $section $mpi $(date +%T)"
        "$section" "$mpi"
    done
done
echo "== done $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ratios to native: of time, but of rate for hpcc's rates (above 1: faster)"
python3 - "$results" <<'PY' | tee "$out/table.txt"
import collections, statistics, sys
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    words = line.split()
    mpi, n, cfg, tag = words[:4]
    kv = dict(w.split("=", 1) for w in words[4:] if "=" in w)
    name = kv.get("name") or kv.get("coll") or kv.get("bench")
    detail = " ".join(f"{k}={kv[k]}" for k in ("size", "n", "bytes", "threads", "level") if k in kv)
    us = float(kv.get("usec") or kv.get("us") or kv.get("us_per_iter"))
    rows[(mpi, tag, name, int(n), detail)][cfg].append(us)
print(f"{'mpi':8} {'load':5} {'benchmark':28} {'ranks':>5} {'':22} {'native us':>10} "
      f"{'auto':>7} {'shim':>7} {'empty':>7} {'untaken':>7}")
for (mpi, tag, name, n, detail), cfgs in rows.items():
    if "native" not in cfgs:
        continue
    base = statistics.median(cfgs["native"])
    ratios = [f"{statistics.median(cfgs[c]) / base:7.2f}" if c in cfgs else f"{'':7}"
              for c in ("auto", "shim", "empty", "untaken")]
    print(f"{mpi:8} {tag:5} {name:28} {n:>5} {detail:22} {base:10.3f} {' '.join(ratios)}")
PY
