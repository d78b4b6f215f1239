#!/usr/bin/env bash
# Installs the matchshim command and the shim for each MPI present (MPICH, Open MPI) into a
# prefix, built in this tree (target/ and target/openmpi/):
#   ci/install.sh --prefix DIR
# DIR/bin/matchshim                          the command (it finds the libraries below itself)
# DIR/lib/matchshim/{mpich,openmpi}/libmatchshim.so
# DIR/include/matchshim.h
# DIR/lib/pkgconfig/matchshim-{mpich,openmpi}.pc   (relocatable: paths relative to the .pc file)
# DIR/share/man/man1/matchshim*.1            man pages, from the command's own definition
# DIR/share/{bash-completion,zsh,fish}/...   shell completions, the same way
# DIR/share/doc/matchshim/                   README, LICENSE-MIT, LICENSE-APACHE
# The command and the libraries are stripped; their debug information goes beside each, in
# .debug/NAME.debug, which gdb and perf find through the file's .gnu_debuglink.
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

# install_stripped FILE DEST: DEST without debug information, which goes to .debug/ beside it.
install_stripped() {
    local file=$1 dest=$2 debug
    debug="$(dirname "$dest")/.debug/$(basename "$dest").debug"
    install -D -m 755 "$file" "$dest"
    mkdir -p "$(dirname "$debug")"
    objcopy --only-keep-debug "$dest" "$debug"
    chmod 644 "$debug"
    objcopy --strip-debug --strip-unneeded --add-gnu-debuglink="$debug" "$dest"
}

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
    install_stripped "$lib" "$libdir/libmatchshim.so"
    # The command links no MPI: the first build's serves both.
    [ ${#installed[@]} -gt 0 ] || install_stripped "$(dirname "$lib")/matchshim" "$prefix/bin/matchshim"
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
"$prefix/bin/matchshim" _man "$prefix/share/man/man1"
"$prefix/bin/matchshim" completions bash | install -D -m 644 /dev/stdin "$prefix/share/bash-completion/completions/matchshim"
"$prefix/bin/matchshim" completions zsh | install -D -m 644 /dev/stdin "$prefix/share/zsh/site-functions/_matchshim"
"$prefix/bin/matchshim" completions fish | install -D -m 644 /dev/stdin "$prefix/share/fish/vendor_completions.d/matchshim.fish"
for doc in README.md LICENSE-MIT LICENSE-APACHE; do
    install -D -m 644 "$root/$doc" "$prefix/share/doc/matchshim/$doc"
done
echo "installed into $prefix: bin/matchshim, the shim for ${installed[*]} (lib/matchshim/MPI/libmatchshim.so), include/matchshim.h, lib/pkgconfig/matchshim-MPI.pc, man pages, completions for bash, zsh and fish"
