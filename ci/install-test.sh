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

# Stripped, with the debug information beside it and named by its debuglink.
stripped() {
    local file=$1 debug
    debug="$(dirname "$file")/.debug/$(basename "$file").debug"
    if readelf -S "$file" 2>/dev/null | grep -q '\.debug_info'; then
        echo "install-test: $file keeps its debug information" >&2; return 1
    fi
    readelf -S "$debug" 2>/dev/null | grep -q '\.debug_info' || {
        echo "install-test: $debug holds no debug information" >&2; return 1
    }
    readelf --string-dump=.gnu_debuglink "$file" | grep -q "$(basename "$debug")" || {
        echo "install-test: $file has no debuglink to $(basename "$debug")" >&2; return 1
    }
}
stripped "$prefix/bin/matchshim"
for mpi in "${flavours[@]}"; do stripped "$prefix/lib/matchshim/$mpi/libmatchshim.so"; done
# Man pages and completions from the command's own definition.
for sub in "" -run -report -compare -replay -generate -figures -gpu; do
    page="$prefix/share/man/man1/matchshim$sub.1"
    man -l "$page" 2>/dev/null | grep -q "matchshim$sub" || {
        echo "install-test: $page does not render" >&2; exit 1
    }
done
grep -q -- "--engines" "$prefix/share/bash-completion/completions/matchshim"
bash -c "source '$prefix/share/bash-completion/completions/matchshim' && complete -p matchshim" >/dev/null
grep -q -- "compare" "$prefix/share/zsh/site-functions/_matchshim"
grep -q -- "compare" "$prefix/share/fish/vendor_completions.d/matchshim.fish"
for doc in LICENSE-MIT LICENSE-APACHE README.md; do [ -s "$prefix/share/doc/matchshim/$doc" ]; done
echo "install-test: stripped with debug information beside, man pages and completions ok"

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
    # Debian's mpi4py (built for Open MPI) under `matchshim run` without --mpi: the command
    # finds the MPI in mpi4py's own module, not from the first launcher it sees.
    if [[ " $* " == *" openmpi "* ]] && /usr/bin/python3 -c 'import mpi4py' 2>/dev/null; then
        timeout 120 "$prefix/bin/matchshim" run --out run-mpi4py -n 2 -- \
            /usr/bin/python3 -m mpi4py.bench ringtest >mpi4py.out
        python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); assert m["mpi"] == "openmpi", m' \
            run-mpi4py/meta.json
        grep -q "MPI matched" mpi4py.out || { cat mpi4py.out; return 1; }
        echo "install-test: Debian's mpi4py ran under matchshim run with Open MPI's shim"
    fi
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
