// SPDX-License-Identifier: GPL-2.0-only
//
// Build the BPF half: compile src/bpf/main.bpf.c (which #includes the
// mechanism files push.bpf.c and pull.bpf.c, so there is one compilation
// unit) into a libbpf skeleton, and run bindgen over src/bpf/intf.h so the
// Rust side shares its constants. The clang to use comes from BPF_CLANG,
// which .cargo/config.toml points at tools/bpf-clang.

#[path = "build/stat_list.rs"]
mod stat_list;

fn main() {
    // The mechanism files are #included, not separate sources: tell cargo
    // to rebuild when any of them changes (BpfBuilder only tracks *.[hc]
    // next to main.bpf.c, which already covers them; be explicit anyway).
    for f in [
        "src/bpf/intf.h",
        "src/bpf/main.bpf.c",
        "src/bpf/push.bpf.c",
        "src/bpf/idle.bpf.c",
        "src/bpf/pull.bpf.c",
        "src/bpf/numa.bpf.c",
        "src/bpf/cache.bpf.c",
        "tools/bpf-clang",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }

    // src/bpf/stats.h -> $OUT_DIR/stat_list.rs, the counters of Metrics
    stat_list::generate();

    scx_cargo::BpfBuilder::new()
        .expect("scx_cargo::BpfBuilder::new (is clang >= 18 installed?)")
        .enable_intf("src/bpf/intf.h", "bpf_intf.rs")
        .enable_skel("src/bpf/main.bpf.c", "bpf")
        .build()
        .expect("building the BPF skeleton");
}
