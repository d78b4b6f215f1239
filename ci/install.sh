#!/usr/bin/env bash
# Installs the matchshim command and the shim for each MPI present (MPICH, Open MPI) into a
# prefix, built in this tree (target/ and target/openmpi/):
#   ci/install.sh --prefix DIR
# DIR/bin/matchshim                          the command (it finds the libraries below itself)
# DIR/lib/matchshim/{mpich,openmpi}/libmatchshim.so
# DIR/include/matchshim.h
# DIR/lib/pkgconfig/matchshim-{mpich,openmpi}.pc   (relocatable: paths relative to the .pc file)
set -euo pipefail
source "$(dirname "$0")/common.sh"
prefix=
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        *) echo "usage: $0 --prefix DIR" >&2; exit 2 ;;
    esac
done
[ -n "$prefix" ] || { echo "usage: $0 --prefix DIR" >&2; exit 2; }
root=$(repo_root)
installed=()
for mpi in mpich openmpi; do
    if ! command -v "$(mpicc_for "$mpi")" >/dev/null; then
        echo "install: $(mpicc_for "$mpi") not found, no shim for $mpi"
        continue
    fi
    echo "== building the shim for $mpi"
    build_shim "$mpi"
    lib=$(shim_lib_for "$mpi")
    libdir="$prefix/lib/matchshim/$mpi"
    install -D -m 755 "$lib" "$libdir/libmatchshim.so"
    # The command links no MPI: the first build's serves both.
    [ ${#installed[@]} -gt 0 ] || install -D -m 755 "$(dirname "$lib")/matchshim" "$prefix/bin/matchshim"
    version=$("$prefix/bin/matchshim" --version | cut -d' ' -f2)
    mkdir -p "$prefix/lib/pkgconfig"
    cat > "$prefix/lib/pkgconfig/matchshim-$mpi.pc" <<PC
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib/matchshim/$mpi
includedir=\${prefix}/include

Name: matchshim-$mpi
Description: MPI message matching in Rust queues through PMPI, for $mpi (link before libmpi)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lmatchshim
PC
    installed+=("$mpi")
done
[ ${#installed[@]} -gt 0 ] || { echo "install: neither mpicc.mpich nor mpicc.openmpi found" >&2; exit 1; }
install -D -m 644 "$root/include/matchshim.h" "$prefix/include/matchshim.h"
echo "installed into $prefix: bin/matchshim, the shim for ${installed[*]} (lib/matchshim/MPI/libmatchshim.so), include/matchshim.h, lib/pkgconfig/matchshim-MPI.pc"
