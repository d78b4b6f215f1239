#!/usr/bin/env bash
# The installed command without the source tree: installs into a temporary prefix, moves the
# prefix elsewhere, hides this tree (a mount namespace with an empty directory over it, where
# `unshare --mount` is allowed), and runs the demo program with each MPI's launcher: under
# LD_PRELOAD through `matchshim run`, and linked with -lmatchshim through the pkg-config file.
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/ci/install.sh" --prefix "$tmp/staged"
mv "$tmp/staged" "$tmp/prefix"
export prefix="$tmp/prefix"
cd "$tmp"

flavours=()
for mpi in mpich openmpi; do
    [ -e "$prefix/lib/matchshim/$mpi/libmatchshim.so" ] || continue
    flavours+=("$mpi")
    cc=$(mpicc_for "$mpi")
    "$cc" -O2 -Wno-stringop-overflow "$root/ld-preload-tests/demo.c" -o "demo-$mpi"
    flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs "matchshim-$mpi")
    # shellcheck disable=SC2086
    "$cc" -O2 -Wno-stringop-overflow "$root/ld-preload-tests/demo.c" $flags -o "linked-$mpi"
done

# Runs in $PWD with what the prefix holds.
run_installed() {
    set -euo pipefail
    "$prefix/bin/matchshim" --help >/dev/null
    for sub in run report compare; do "$prefix/bin/matchshim" "$sub" --help >/dev/null; done
    for mpi in "$@"; do
        mapfile -t launcher < <(launcher "$mpi" 2)
        timeout 120 "$prefix/bin/matchshim" run --out "run-$mpi" -- "${launcher[@]}" "./demo-$mpi"
        lib=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["lib"])' "run-$mpi/meta.json")
        case "$lib" in
            "$prefix/lib/matchshim/$mpi/"*) ;;
            *) echo "install-test: the $mpi run used $lib, not the prefix's shim" >&2; return 1 ;;
        esac
        MATCHSHIM_REPORT="$PWD/linked-$mpi.jsonl" timeout 120 "${launcher[@]}" "./linked-$mpi"
        shim_ran "linked-$mpi.jsonl" 2 col+pnp || {
            echo "install-test: linked-$mpi did not run under the shim" >&2
            return 1
        }
        echo "install-test: $mpi ok (matchshim run and -lmatchshim from $prefix)"
    done
}
export -f run_installed shim_ran launcher

if unshare --mount true 2>/dev/null; then
    mkdir empty
    unshare --mount bash -c 'mount --bind empty "$1" && shift && [ -z "$(ls -A "$0")" ] && run_installed "$@"' \
        "$root" "$root" "${flavours[@]}"
    echo "install-test: ran with $root hidden"
else
    echo "install-test: cannot hide $root (unshare --mount is not allowed); ran with the prefix moved"
    run_installed "${flavours[@]}"
fi
