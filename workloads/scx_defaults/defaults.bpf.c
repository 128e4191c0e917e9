// SPDX-License-Identifier: GPL-2.0-only
/*
 * scx_defaults: a sched_ext scheduler with no callbacks at all.
 *
 * sched_ext fills every callback a scheduler leaves out with its built-in behaviour: at a wake-up the kernel's
 * own idle-CPU search (an idle core, then an idle CPU, near the previous one) and, when it finds one, a direct
 * dispatch there; otherwise one global FIFO that every CPU consumes from when it runs out of work. No BPF
 * program runs on any scheduling path.
 *
 * The lab runs it as the floor of sched_ext: what the framework costs before any policy. A gap between EEVDF
 * and every sched_ext scheduler that scx_defaults shows too is the framework's (or the emulator's), not a policy.
 */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>

char _license[] SEC("license") = "GPL";

SEC(".struct_ops.link")
struct sched_ext_ops defaults_ops = {
	.name = "defaults",
};
