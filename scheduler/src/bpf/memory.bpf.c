/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memory.bpf.c - which threads write which memory, and from which node (the evidence
 * behind memory placement's private/shared split, memory/evidence.rs)
 *
 * Idea. The kernel's NUMA balancing tells private from shared pages by
 * who took the page's last NUMA hinting fault (van Riel 2014). sched_ext
 * tasks never get hinting faults, so here the agent makes the faults
 * itself, the only way user space can: writing 4 to /proc/PID/clear_refs
 * write-protects the process's pages (soft-dirty tracking), and the next
 * write to each page faults once. This program counts, for the processes
 * the agent watches (mem_watch: processes whose threads run on several
 * nodes), the user page faults per 2 MB chunk of address space, per
 * faulting thread and per node of the faulting CPU. The counts only grow
 * (an update is an atomic add; only a new key takes the map's locks); the
 * agent reads them every pass, keeps the rise, and decides: a chunk
 * written by one thread only is private to that thread's node, one
 * written by several threads is shared.
 *
 * What it cannot see: reads (a read-mostly private buffer looks like
 * memory with no evidence, which the agent treats as shared); writes
 * the kernel makes for the process (read(2) or recv(2) into a
 * buffer, io_uring, O_DIRECT: no user fault); how often a page is written
 * (one fault per page per re-arm); two threads' private buffers within
 * one 2 MB chunk (they look shared); and chunks whose counts the LRU map
 * evicted when more than MEM_FAULTS_MAX are live (their evidence restarts).
 *
 * Cost: one hash lookup per user page fault of any process (the watch
 * test), a lookup and an atomic add per fault of a watched one. Loaded only when
 * memory placement is on (main.rs turns autoload off otherwise).
 */
#include "locality.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MEM_WATCH_MAX);
	__type(key, u32);	/* tgid */
	__type(value, u8);
} mem_watch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MEM_FAULTS_MAX);
	__type(key, struct mem_fault_key);
	__type(value, u64);	/* faults so far: the agent keeps the rise between two reads */
} mem_faults SEC(".maps");

SEC("fentry/handle_mm_fault")
int BPF_PROG(memory_fault, struct vm_area_struct *vma, unsigned long address,
	     unsigned int flags)
{
	struct mem_fault_key key = {};
	u32 cpu = bpf_get_smp_processor_id();
	u64 id = bpf_get_current_pid_tgid();
	u64 one = 1, *cnt;

	if (!(flags & FAULT_FLAG_USER))
		return 0;
	key.tgid = id >> 32;
	if (!bpf_map_lookup_elem(&mem_watch, &key.tgid))
		return 0;
	key.tid = (u32)id;
	key.node = cpu_node[cpu & (MAX_CPUS - 1)];
	key.chunk = address >> MEM_CHUNK_SHIFT;
	cnt = bpf_map_lookup_elem(&mem_faults, &key);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	else
		bpf_map_update_elem(&mem_faults, &key, &one, BPF_NOEXIST);
	return 0;
}
