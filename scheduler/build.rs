// SPDX-License-Identifier: GPL-2.0-only
//
// Build the BPF half: compile each src/bpf/*.bpf.c as its own unit, link
// them into one BPF object with libbpf's linker and generate its skeleton
// (scx_cargo's BpfBuilder), and run bindgen over src/bpf/intf.h so the
// Rust side shares its constants. The units share state through
// src/bpf/locality.bpf.h and each mechanism's header. The stats counters
// are listed once, in src/bpf/stats.h: intf.h makes the C enum of it and
// build/stat_list.rs the Rust table. The clang to use comes from
// BPF_CLANG, which .cargo/config.toml points at tools/bpf-clang.
//
// Then compile the pure rules (src/bpf/*_rules.h) for the host as well
// (host_rules()), so that the unit tests (src/rules.rs) call the very
// functions the BPF side runs.

#[path = "build/stat_list.rs"]
mod stat_list;

const UNITS: &[&str] = &[
    "src/bpf/place.bpf.c",
    "src/bpf/push.bpf.c",
    "src/bpf/idle.bpf.c",
    "src/bpf/pull.bpf.c",
    "src/bpf/numa.bpf.c",
    "src/bpf/home.bpf.c",
    "src/bpf/cache.bpf.c",
    "src/bpf/heartbeat.bpf.c",
];

fn main() {
    println!("cargo:rerun-if-changed=tools/bpf-clang");

    // src/bpf/stats.h -> $OUT_DIR/stat_list.rs, the counters of Metrics
    stat_list::generate();

    let mut b = scx_cargo::BpfBuilder::new()
        .expect("scx_cargo::BpfBuilder::new (is clang >= 18 installed?)");
    b.enable_intf("src/bpf/intf.h", "bpf_intf.rs")
        .enable_skel("src/bpf/main.bpf.c", "bpf");
    for unit in UNITS {
        b.add_source(unit);
    }
    b.compile_link_gen().expect("building the BPF object and its skeleton");
    host_rules();
}

/// The rule headers and src/bpf/rules_host.c, which exports one function per
/// rule, built with the host's C compiler into a static library.
fn host_rules() {
    const FILES: &[&str] = &[
        "src/bpf/rules_host.c",
        "src/bpf/rules.h",
        "src/bpf/numa_rules.h",
        "src/bpf/cache_rules.h",
        "src/bpf/push_rules.h",
        "src/bpf/intf.h",
        "src/bpf/stats.h",
    ];
    for f in FILES {
        println!("cargo:rerun-if-changed={f}");
    }
    cc::Build::new()
        .file("src/bpf/rules_host.c")
        .warnings_into_errors(true)
        .compile("locality_rules");
}
