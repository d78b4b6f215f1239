#!/usr/bin/env python3
"""Instructions by object and by function in callgrind's output (see ci/callgrind.sh).

    callgrind-count.py NATIVE_OUT SHIM_OUT [CALL]
    callgrind-count.py --self-test

Each OUT is the name callgrind wrote under `--dump-after=*MPI_Init --dump-after=*MPI_Init_thread
--dump-before=*MPI_Finalize` (so not `MPI_Initialized` or `MPI_Finalized`):
of its parts (OUT, OUT.1, ...) the one counted is the one dumped on the first entry into a
finalize function, which holds everything from the end of `MPI_Init` on. Sums each cost line
of the raw file under the object and function it belongs to: inlined code (an `fi=`/`fe=`
file) stays its function's, and the inclusive cost after a `calls=` line is skipped, so every
instruction counts once. callgrind_annotate's listing names the object on
only some of an object's lines, so summing the lines it tags with a library misses most of
that library's inlined code.
"""
import collections
import glob
import re
import sys

SHIM = "libmatchshim"


def parse(path):
    names = {"ob": {}, "fn": {}}
    own = collections.Counter()  # (object, function) -> instructions
    calls = collections.Counter()  # function called -> calls
    ob = fn = callee = None
    skip = False

    def name(kind, text):
        m = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not m:
            return text
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1))

    with open(path, errors="replace") as lines:
        for line in lines:
            line = line.rstrip("\n")
            if skip:
                skip = False
                continue
            key, _, value = line.partition("=")
            if key == "ob":
                ob = name("ob", value)
            elif key == "cob":
                name("ob", value)
            elif key == "fn":
                fn = name("fn", value)
            elif key == "cfn":
                callee = name("fn", value)
            elif key == "calls":
                calls[callee] += int(value.split()[0])
                skip = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if len(parts) > 1 and parts[1].isdigit():
                    own[(ob, fn)] += int(parts[1])
    return own, calls


def steady_part(base):
    """The part of `base` that runs from the end of MPI_Init to MPI_Finalize."""
    # Parts are OUT.1, OUT.2, ... in the order dumped; OUT.log and OUT.stdout are not parts.
    numbered = {int(p.rsplit(".", 1)[1]): p for p in glob.glob(glob.escape(base) + ".*")
                if p.rsplit(".", 1)[1].isdigit()}
    for _, path in sorted(numbered.items()):
        with open(path, errors="replace") as lines:
            for line in lines:
                if line.startswith("desc: Trigger:"):
                    if "--dump-before=" in line:
                        return path
                    break
    sys.exit(f"callgrind-count: no part of {base} was dumped on entry to MPI_Finalize")


def self_test():
    """Counts a small file written as callgrind writes them: inlined lines (`fi=`/`fe=`) stay
    their object's, a call's inclusive cost is not counted again, and the part dumped on
    entry into MPI_Finalize is the one read."""
    import tempfile
    part = """version: 1
creator: self-test
positions: line
events: Ir
desc: Trigger: {trigger}
ob=(1) /lib/libmatchshim.so
fl=(1) entry.rs
fn=(1) MPI_Recv
10 5
fi=(2) inlined.rs
20 7
fe=(1)
11 3
cob=(2) /lib/libmpi.so
cfi=(3) ???
cfn=(2) PMPI_Recv
calls=2 0
12 1000
ob=(2)
fl=(3)
fn=(2)
0 {mpi}
"""
    with tempfile.TemporaryDirectory() as d:
        base = f"{d}/out"
        for name, trigger, mpi in [("", "Program termination", 1),
                                   (".1", "--dump-after=PMPI_Init_thread", 50000),
                                   (".2", "--dump-before=MPI_Finalize", 400)]:
            with open(base + name, "w") as f:
                f.write(part.format(trigger=trigger, mpi=mpi))
        own, calls = parse(steady_part(base))
    shim = sum(c for (ob, _), c in own.items() if SHIM in ob)
    assert shim == 15, f"the shim's own: {shim}, not 15"
    assert sum(own.values()) == 415, f"all: {sum(own.values())}, not 415"
    assert calls["PMPI_Recv"] == 2, f"calls: {calls['PMPI_Recv']}, not 2"
    print("callgrind-count: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[2].strip())
    native, _ = parse(steady_part(sys.argv[1]))
    shim, calls = parse(steady_part(sys.argv[2]))
    per = sys.argv[3] if len(sys.argv) == 4 else None
    n_native, n_shim = sum(native.values()), sum(shim.values())
    mine = {fn: c for (ob, fn), c in shim.items() if ob and SHIM in ob}
    n_mine = sum(mine.values())
    print("from the end of MPI_Init to MPI_Finalize:")
    print(f"rank's instructions: native {n_native:,}, under the shim {n_shim:,} "
          f"({n_shim / max(n_native, 1):.3f}x), the shim's own {n_mine:,}")
    if per:
        n = calls.get(per, 0)
        if n == 0:
            sys.exit(f"callgrind-count: the program made no call to {per} under the shim")
        print(f"per {per} ({n:,} calls): the shim's own {n_mine / n:.1f}, "
              f"the difference {(n_shim - n_native) / n:.1f}")
    print(f"{'own':>12} {'calls':>10} {'own/call':>9}  the shim's function")
    for fn, c in sorted(mine.items(), key=lambda kv: -kv[1])[:20]:
        n = calls.get(fn, 0)
        each = f"{c / n:9.1f}" if n else f"{'':>9}"
        print(f"{c:>12,} {n:>10,} {each}  {fn}")


if __name__ == "__main__":
    main()
