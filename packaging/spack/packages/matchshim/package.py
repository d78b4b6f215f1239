# Copyright 2026 The matchshim developers
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import os

from spack.package import *
from spack_repo.builtin.build_systems.cargo import CargoPackage


class Matchshim(CargoPackage):
    """MPI message matching in Rust queues, under unmodified MPI programs.

    A shared library loaded with LD_PRELOAD (or linked before libmpi) that intercepts receives
    through the PMPI profiling interface: MPI matches while a communicator's queues are short,
    the shim's engines while they are long. With it comes the `matchshim` command, which runs
    programs under the library, reports who matched their receives and recommends whether to
    use it."""

    license("Apache-2.0 OR MIT")

    # No release is published to fetch: build a checkout with `spack develop --path DIR
    # matchshim@=0.1.0` (packaging/spack/README.md).
    version("0.1.0")

    # One build of the library serves one MPI ABI: MPICH's (libmpi.so.12) or Open MPI's
    # (libmpi.so.40); the bindings are generated from the MPI's own headers.
    depends_on("mpi")
    requires(
        "^mpich",
        "^openmpi",
        policy="one_of",
        msg="matchshim is built for MPICH's or Open MPI's ABI",
    )
    depends_on("c", type="build")
    depends_on("rust@1.87:", type="build")
    # bindgen reads the MPI headers through libclang.
    depends_on("llvm+clang", type="build")

    sanity_check_is_file = ["bin/matchshim", "include/matchshim.h"]

    @property
    def flavour(self):
        """The name the command looks for its library under: lib/matchshim/<flavour>/."""
        return "openmpi" if self.spec.satisfies("^openmpi") else "mpich"

    @property
    def libs(self):
        return find_libraries(
            "libmatchshim", root=join_path(self.prefix.lib, "matchshim", self.flavour)
        )

    def setup_build_environment(self, env):
        env.set("MPICC", self.spec["mpi"].mpicc)
        env.set("LIBCLANG_PATH", self.spec["llvm"].prefix.lib)

    def build(self, spec, prefix):
        # A workspace: the library (a cdylib) and the command come from one build.
        cargo("build", "--release", "--locked", "-j", str(make_jobs))

    def install(self, spec, prefix):
        release = join_path("target", "release")
        libdir = join_path(prefix.lib, "matchshim", self.flavour)
        mkdirp(prefix.bin, libdir, prefix.include)
        install(join_path(release, "matchshim"), prefix.bin)
        install(join_path(release, "libmatchshim.so"), libdir)
        install(join_path("include", "matchshim.h"), prefix.include)

        matchshim = Executable(join_path(prefix.bin, "matchshim"))
        matchshim("_man", prefix.share.man.man1)
        completions = {
            "bash": join_path(prefix.share, "bash-completion", "completions", "matchshim"),
            "zsh": join_path(prefix.share, "zsh", "site-functions", "_matchshim"),
            "fish": join_path(prefix.share, "fish", "vendor_completions.d", "matchshim.fish"),
        }
        for shell, path in completions.items():
            mkdirp(os.path.dirname(path))
            with open(path, "w") as script:
                matchshim("completions", shell, output=script)

        pkgconfig = join_path(prefix.lib, "pkgconfig")
        mkdirp(pkgconfig)
        with open(join_path(pkgconfig, f"matchshim-{self.flavour}.pc"), "w") as pc:
            pc.write(
                f"prefix={prefix}\n"
                f"libdir={libdir}\n"
                f"includedir={prefix.include}\n\n"
                f"Name: matchshim-{self.flavour}\n"
                "Description: MPI message matching in Rust queues through PMPI "
                "(link before libmpi)\n"
                f"Version: {self.spec.version}\n"
                "Cflags: -I${includedir}\n"
                "Libs: -L${libdir} -Wl,-rpath,${libdir} -lmatchshim\n"
            )

    def check(self):
        # The engines' and the command's unit tests (the tests that run MPI programs need a
        # launcher, which a build may not be allowed to start).
        cargo("test", "--release", "--locked", "-p", "matchshim-core", "--lib")
        cargo("test", "--release", "--locked", "-p", "matchshim-cli", "--bins")
