//! Compiles the host build of the GPU kernels (src/matching/gpu/host.c, which includes the
//! kernels' per-thread bodies) with the system C compiler.

fn main() {
    let dir = "src/matching/gpu";
    for file in ["host.c", "kernels.h"] {
        println!("cargo:rerun-if-changed={dir}/{file}");
    }
    cc::Build::new()
        .file(format!("{dir}/host.c"))
        .std("c11")
        .opt_level(3)
        .warnings(true)
        .extra_warnings(true)
        .compile("matchshim_kernels");
}
