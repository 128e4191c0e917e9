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
//
// Built from a git checkout, the commit goes into the version string
// (LOCALITY_GIT_SHA, see cli.rs); a crate tarball has none.
//
// Outside this repository (a packaged crate: no .cargo/config.toml) the
// clang is whatever BPF_CLANG names, else "clang": the rule of every
// sched_ext crate, whose build scripts (scx_utils' too) run it as well.

#[path = "build/stat_list.rs"]
mod stat_list;

const UNITS: &[&str] = &[
    "src/bpf/locality.bpf.c",
    "src/bpf/place.bpf.c",
    "src/bpf/push.bpf.c",
    "src/bpf/idle.bpf.c",
    "src/bpf/pull.bpf.c",
    "src/bpf/numa_load.bpf.c",
    "src/bpf/numa.bpf.c",
    "src/bpf/numa_balance.bpf.c",
    "src/bpf/numa_place.bpf.c",
    "src/bpf/home.bpf.c",
    "src/bpf/cache.bpf.c",
    "src/bpf/heartbeat.bpf.c",
    "src/bpf/memory.bpf.c",
    "src/bpf/decide.bpf.c",
];

fn main() {
    // (absent from a packaged crate; watching a missing file would rerun
    // this script on every build)
    if std::path::Path::new("tools/bpf-clang").exists() {
        println!("cargo:rerun-if-changed=tools/bpf-clang");
    }
    git_sha();
    check_clang();

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
        "src/bpf/idle_rules.h",
        "src/bpf/home_rules.h",
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

/// Pass the checkout's commit (short hash) to the build as
/// LOCALITY_GIT_SHA; nothing outside a git work tree or without git.
fn git_sha() {
    let git = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("git").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    // Only this crate's own checkout: an unpacked crate that happens to
    // sit inside some other work tree (cargo package's check under
    // target/) is not tracked there.
    if git(&["ls-files", "--error-unmatch", "Cargo.toml"]).is_none() {
        return;
    }
    let Some(sha) = git(&["rev-parse", "--short=10", "HEAD"]) else {
        return;
    };
    // Rebuild the version when HEAD moves: every commit and checkout appends
    // to HEAD's reflog (the branch's own ref file may be packed away).
    if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", "logs/HEAD"]) {
        if std::path::Path::new(&p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rustc-env=LOCALITY_GIT_SHA={sha}");
}

/// Fail early, in one readable line, when the clang BPF_CLANG names (or
/// plain "clang") cannot be run: scx_cargo would otherwise panic deep in
/// its own code.
fn check_clang() {
    println!("cargo:rerun-if-env-changed=BPF_CLANG");
    let clang = std::env::var("BPF_CLANG").unwrap_or_else(|_| "clang".into());
    let runs = std::process::Command::new(&clang)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        panic!(
            "cannot run the BPF compiler {clang:?}: install clang (>= 18) and, where it is \
             only installed as clang-N (Debian 12: clang-19), build with BPF_CLANG=clang-19"
        );
    }
}
