// SPDX-License-Identifier: GPL-2.0-only
mod bpf_skel;
fn main() {}
