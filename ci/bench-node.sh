#!/usr/bin/env bash
# The benchmarks on another node (a quiet many-core machine) that has neither MPI nor cargo:
#
#   ci/bench-node.sh --pack FILE.tar.gz   build the shim for MPICH and Open MPI, the programs
#                                         of ci/bench/ for each, and pack them with both MPIs'
#                                         launchers, libraries and plugins as Debian installs
#                                         them (x86-64 Linux, glibc 2.36 or newer there)
#   tar -C /tmp -xzf FILE.tar.gz && /tmp/bench-node/run.sh [OUT]
#                                         on the node: every table, also written to OUT
#
# run.sh relocates both MPIs into its own folder (no install, nothing written outside it and
# /tmp). Ranks are bound to a core each (not for halo_mt's threads nor beside the busy loop).
# Per MPI, native against the shim as it comes (auto) and, for collectives and the
# application mixes, with the shim running every collective (MATCHSHIM_COLL=shim), in
# rotating order, ROUNDS rounds (default 3): ping-pong and the 64-deep bandwidth window
# (2 ranks), the persistent halo (1 and 2 ranks, both thread levels), the long queues of 4096
# quiet and then on two cores beside a busy loop, the collectives' latency at 2, 4 and 8 ranks
# (and 16 on 16 cores), the Comm_split/Comm_dup/free loop and 1020 splits held while a
# receive waits at 4 and 8, the hot spot at 8 (and 16), halo_mt with 1-8 threads at
# MPI_THREAD_MULTIPLE, the application mixes at 4 (also under a preloaded library that
# defines nothing, and under the shim with no takeover) and, on Open MPI, Debian's hpcc (HPL
# order 2000) at 4 and 8. A shim run counts only if every rank's report is there. Medians
# over the rounds; ratios shim/native of time, or of rate for hpcc's figures but its
# latencies.
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2; exit 2; }
[ "${1:-}" = --pack ] && [ -n "${2:-}" ] || usage
tarball=$(realpath -m "$2")
mkdir -p "$(dirname "$tarball")"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
dir=$stage/bench-node
mkdir -p "$dir/bin" "$dir/lib"
for mpi in mpich openmpi; do
    build_shim "$mpi" >&2
    mkdir -p "$dir/$mpi"
    strip -o "$dir/$mpi/libmatchshim.so" "$(shim_lib_for "$mpi")"
    for prog in pingpong bandwidth longqueue spread persistent coll halo_mt app_radix app_nbody \
        app_miniamr; do
        "$(mpicc_for "$mpi")" -O2 -Wno-stringop-overflow -I"$root/ci/bench" \
            -o "$dir/$mpi/$prog" "$root/ci/bench/$prog.c" -lm
    done
done
multiarch=/usr/lib/x86_64-linux-gnu
cp /usr/bin/mpiexec.hydra "$dir/bin/mpiexec.mpich"
cp /usr/bin/hydra_pmi_proxy /usr/bin/orterun /usr/bin/orted "$dir/bin/"
cp /usr/bin/hpcc "$dir/openmpi/"
cp /usr/share/doc/hpcc/examples/_hpccinf.txt "$dir/openmpi/hpccinf.txt"
ln -s orterun "$dir/bin/mpiexec.openmpi"
mkdir -p "$dir/ompi/etc" "$dir/pmix"
cp -r "$multiarch/openmpi/lib/openmpi3" "$dir/ompi/plugins"
cp -r /usr/share/openmpi "$dir/ompi/share"
cp /etc/openmpi/openmpi-mca-params.conf "$dir/ompi/etc/"
cp -r "$multiarch/pmix2/lib/pmix" "$dir/pmix/plugins"
cp -r "$multiarch/ucx" "$dir/lib/ucx"
# Every library these load, but the C library's own (the node's are newer).
find "$dir" -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
    xargs -0 ldd 2>/dev/null | awk '/=> \// { print $3 }' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$dir/lib/"; done
# The control: a library that defines nothing, preloaded as the shim is.
cc -shared -fPIC -o "$dir/empty.so" -x c /dev/null
cp "$root/ci/bench-node-run.sh" "$dir/run.sh"
tar -C "$stage" -czf "$tarball" bench-node
du -h "$tarball"
