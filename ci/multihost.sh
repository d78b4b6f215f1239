#!/usr/bin/env bash
# MPI across hosts on one machine: a cluster of network namespaces (one address per "host",
# 10.77.0.1-4 on a bridge of their own), ranks started in them by the MPI's own launcher with
# ci/netns-launch.sh as its remote shell, bytes over the MPI's TCP transport. Runs the
# ld-preload tests and the application programs app_nbody and app_miniamr across the hosts,
# natively and under the shim, compares the results, and checks that every host received the
# applications' traffic on its network interface. The shim runs each engine under each
# takeover mode (MATCHSHIM_TAKEOVER, default "auto always").
#
#   ci/multihost.sh [--mpi openmpi|mpich|all] [--hosts 2-4] [--engines "col+pnp ..."]
#                   [--takeover "auto always"] [--only "prog ..."] [--no-apps]
#
# Open MPI (ob1 over TCP) is the default. MPICH 4.0.2 over UCX's TCP transport hangs in
# MPI_Finalize with 3 or more ranks across hosts, natively too: each rank disconnects its
# endpoints and then waits in a PMI barrier, where it no longer answers a peer's disconnect
# (MPICH removed that barrier in 4.2); `--mpi mpich` runs it all the same.
#
# Needs root (ip netns). Traffic stays between the namespaces' addresses; the namespaces
# (matchshim-h0..3, matchshim-sw) are removed on every exit, and any left by a run that died
# are removed first. Runs one at a time (a lock), since every run uses the same names.
set -euo pipefail
source "$(dirname "$0")/common.sh"
ROOT=$(repo_root)
cd "$ROOT"
MPIS=openmpi
HOSTS=4
ENGINES="col+pnp"
MODES="auto always"
ONLY=""
APPS=1

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case $1 in
        --mpi)
            case ${2:-} in
                all) MPIS="mpich openmpi" ;;
                mpich | openmpi) MPIS=$2 ;;
                *) echo "multihost.sh: --mpi is mpich, openmpi or all" >&2; exit 2 ;;
            esac
            shift 2 ;;
        --hosts) HOSTS=${2:-}; shift 2 ;;
        --engines) ENGINES=${2:?}; shift 2 ;;
        --takeover) MODES=${2:?}; shift 2 ;;
        --only) ONLY=${2:?}; shift 2 ;;
        --no-apps) APPS=0; shift ;;
        -h | --help) usage 0 ;;
        *) echo "multihost.sh: unknown argument: $1" >&2; usage 2 >&2 ;;
    esac
done
case $HOSTS in
    2 | 3 | 4) ;;
    *) echo "multihost.sh: --hosts is 2, 3 or 4, not '$HOSTS'" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "multihost.sh: needs root (it makes network namespaces)" >&2; exit 2; }
command -v ip >/dev/null || { echo "multihost.sh: needs ip (iproute2)" >&2; exit 2; }

exec 9>/run/lock/matchshim-multihost.lock
flock -w 900 9 || { echo "multihost.sh: another run holds the lock for 15 minutes" >&2; exit 1; }

SWITCH=matchshim-sw
host_ns() { echo "matchshim-h$1"; }
host_addr() { echo "10.77.0.$(($1 + 1))"; }

# Removes every namespace of the cluster, ending what still runs in them (ranks of a job that
# timed out, stray proxies: all started by this script).
teardown() {
    local ns pids
    for ns in $(ip netns list | awk '{ print $1 }' | grep -E '^matchshim-(h[0-9]|sw)$' || true); do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        if [ -n "$pids" ]; then
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null || true
            sleep 1
            pids=$(ip netns pids "$ns" 2>/dev/null || true)
            # shellcheck disable=SC2086
            [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
        fi
        ip netns del "$ns"
    done
}

WORK=$(mktemp -d)
cleanup() {
    teardown
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

teardown
ip netns add "$SWITCH"
ip -n "$SWITCH" link add br0 type bridge
ip -n "$SWITCH" link set br0 up
for ((h = 0; h < HOSTS; h++)); do
    ns=$(host_ns "$h")
    ip netns add "$ns"
    ip link add "mshim$h" netns "$ns" type veth peer name "port$h" netns "$SWITCH"
    ip -n "$ns" link set "mshim$h" name eth0
    ip -n "$ns" addr add "$(host_addr "$h")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$SWITCH" link set "port$h" master br0
    ip -n "$SWITCH" link set "port$h" up
done
echo "== cluster: $HOSTS hosts $(for ((h = 0; h < HOSTS; h++)); do printf '%s ' "$(host_addr "$h")"; done)"

# One rank per host in turn (ranks beyond the hosts wrap round).
for ((h = 0; h < HOSTS; h++)); do
    echo "$(host_addr "$h"):1" >>"$WORK/hosts.mpich"
    echo "$(host_addr "$h") slots=1" >>"$WORK/hosts.openmpi"
done
ENTER=$ROOT/ci/netns-launch.sh
# orted, started through the remote shell, runs as root too.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The cluster's launch command for MPI $1, as common.sh's `launcher` takes it through
# $CI_LAUNCHER (the rank count follows as -n N): mpiexec runs on host 0.
cluster_launcher() {
    case $1 in
        mpich)
            echo "$ENTER --exec $(host_addr 0) mpiexec.mpich -f $WORK/hosts.mpich -launcher ssh" \
                 "-launcher-exec $ENTER -genv UCX_TLS tcp,self,sm -genv UCX_NET_DEVICES eth0" ;;
        openmpi)
            echo "$ENTER --exec $(host_addr 0) mpiexec.openmpi --allow-run-as-root --oversubscribe" \
                 "--bind-to none --hostfile $WORK/hosts.openmpi --map-by node" \
                 "--mca plm_rsh_agent $ENTER --mca pml ob1 --mca btl tcp,self" \
                 "--mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24" \
                 "--mca mpi_yield_when_idle 1" ;;
    esac
}

# Bytes host $1 has received on its network interface so far.
rx_bytes() { ip netns exec "$(host_ns "$1")" cat /sys/class/net/eth0/statistics/rx_bytes; }

FAILED=0
START=$(date +%s)
for mpi in $MPIS; do
    build_shim "$mpi"
    export CI_LAUNCHER
    CI_LAUNCHER=$(cluster_launcher "$mpi")
    echo "== $mpi: ld-preload tests across $HOSTS hosts (native, $ENGINES under $MODES)"
    only=()
    [ -n "$ONLY" ] && only=(--only "$ONLY")
    LD_PRELOAD_TESTS_TIMEOUT=${LD_PRELOAD_TESTS_TIMEOUT:-60} \
        ci/ld-preload-tests.sh --mpi "$mpi" --engines "$ENGINES" --takeover "$MODES" "${only[@]}" \
        || FAILED=1
    [ "$APPS" = 1 ] || continue

    ranks=$((2 * HOSTS))
    mapfile -t cmd < <(launcher "$mpi" "$ranks")
    out=$ROOT/target/multihost/$mpi
    mkdir -p "$out"
    lib=$(shim_lib_for "$mpi")
    # engine@mode for every shim run
    shim_cfgs=$(for e in $ENGINES; do for m in $MODES; do echo "$e@$m"; done; done)
    for app in app_nbody app_miniamr; do
        "$(mpicc_for "$mpi")" -O2 -Wall -o "$out/$app" "ci/bench/$app.c" -lm
        declare -A sums=()
        for cfg in native $shim_cfgs; do
            engine=${cfg%@*}
            log=$out/$app.$cfg.log
            report=$out/$app.$cfg.report.jsonl
            rm -f "$report"
            envv=()
            [ "$cfg" = native ] || envv=(LD_PRELOAD="$lib" MATCHSHIM_ENGINE="$engine"
                                         MATCHSHIM_TAKEOVER="${cfg#*@}" MATCHSHIM_REPORT="$report")
            before=()
            for ((h = 0; h < HOSTS; h++)); do before+=("$(rx_bytes "$h")"); done
            t0=$(date +%s.%N)
            rc=0
            timeout -k 5 120 "${cmd[@]}" env "${envv[@]}" "$out/$app" -r 2 >"$log" 2>&1 || rc=$?
            secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
            why=""
            sum=$(sed -n 's/^RESULT .*checksum=\([0-9a-f]*\).*/\1/p' "$log")
            if [ "$rc" != 0 ] || [ -z "$sum" ]; then
                why="exit status $rc, no RESULT line"
            elif [ "$cfg" != native ] && ! shim_ran "$report" "$ranks" "$engine"; then
                why="no shim report with engine $engine from every rank"
            fi
            # Each host must have received the job's traffic over its interface.
            for ((h = 0; h < HOSTS; h++)); do
                got=$(($(rx_bytes "$h") - before[h]))
                [ "$got" -ge 65536 ] || why="${why:+$why; }host $h received only $got bytes"
            done
            if [ -n "$why" ]; then
                echo "FAIL $mpi $cfg $app n=$ranks (${secs}s): $why"
                tail -n 20 "$log" | sed 's/^/    | /'
                FAILED=1
            else
                sums[$cfg]=$sum
                echo "PASS $mpi $cfg $app n=$ranks on $HOSTS hosts (${secs}s) checksum $sum"
            fi
        done
        if [ -n "${sums[native]:-}" ]; then
            for cfg in $shim_cfgs; do
                if [ -n "${sums[$cfg]:-}" ] && [ "${sums[$cfg]}" != "${sums[native]}" ]; then
                    echo "FAIL $mpi $cfg $app: checksum ${sums[$cfg]} differs from native ${sums[native]}"
                    FAILED=1
                fi
            done
        fi
        unset sums
    done
done
echo "multihost: $(($(date +%s) - START))s, $([ "$FAILED" = 0 ] && echo passed || echo FAILED)"
exit "$FAILED"
