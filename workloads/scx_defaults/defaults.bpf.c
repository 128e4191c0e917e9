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
 *
 * With --callbacks the loader attaches callbacks_ops instead: the same policy, written out as BPF callbacks
 * (select_cpu asks the kernel's idle search, enqueue feeds the global FIFO, dispatch, running, stopping and
 * tick do nothing). Between the two lies the cost of calling BPF on every wake-up, switch and tick, and nothing
 * else: what any BPF scheduler pays before its own policy does any work. --burn-us N makes each of those
 * callbacks also spin for N microseconds, which tells how much a benchmark slows per microsecond a scheduler
 * spends in its callbacks.
 *
 * With --queued-wakeups it attaches queued_ops: no callbacks either, with SCX_OPS_ALLOW_QUEUED_WAKEUP set. A
 * wake-up of a task onto another CPU then goes through that CPU's wake list (a function-call IPI, and the
 * wakee is activated by its own CPU) instead of being activated by the waker, which then sends a rescheduling
 * IPI. scx_locality sets the flag; this isolates what the flag alone does to a benchmark.
 */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

/* Set by the loader before load (--burn-us); the only read-only global, so the loader finds it at offset 0. */
const volatile u64 burn_ns;

/* kfuncs; the insert is the kernel's "scx_bpf_dsq_insert___v2" (6.19 and later, returns whether it inserted) */
s32 scx_bpf_select_cpu_dfl(struct task_struct *p, s32 prev_cpu, u64 wake_flags, bool *is_idle) __ksym;
bool scx_bpf_dsq_insert___v2___dfl(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym;

SEC(".struct_ops.link")
struct sched_ext_ops defaults_ops = {
	.name = "defaults",
};

SEC(".struct_ops.link")
struct sched_ext_ops queued_ops = {
	.flags = SCX_OPS_ALLOW_QUEUED_WAKEUP,
	.name = "defaults_queued",
};

static long burn_step(u64 i, void *end)
{
	return bpf_ktime_get_ns() >= *(u64 *)end;
}

/* Spin for burn_ns: the cost of a policy, without the policy. */
static __always_inline void burn(void)
{
	u64 end;

	if (!burn_ns)
		return;
	end = bpf_ktime_get_ns() + burn_ns;
	bpf_loop(1 << 20, burn_step, &end, 0);
}

/* The kernel's idle pick; an idle CPU found is claimed, so the task goes straight to its local DSQ. */
SEC("struct_ops/cb_select_cpu")
s32 BPF_PROG(cb_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool is_idle = false;
	s32 cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);

	burn();
	if (is_idle)
		scx_bpf_dsq_insert___v2___dfl(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL, 0);
	return cpu;
}

/* No idle CPU: the global FIFO, as without an enqueue callback. */
SEC("struct_ops/cb_enqueue")
void BPF_PROG(cb_enqueue, struct task_struct *p, u64 enq_flags)
{
	burn();
	scx_bpf_dsq_insert___v2___dfl(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

/*
 * The calls every context switch, idle CPU and tick make into a scheduler that keeps accounts. Dispatch runs
 * after the kernel found the global FIFO empty, so it has nothing to add.
 */
SEC("struct_ops/cb_dispatch")
void BPF_PROG(cb_dispatch, s32 cpu, struct task_struct *prev)
{
	burn();
}

SEC("struct_ops/cb_running")
void BPF_PROG(cb_running, struct task_struct *p)
{
	burn();
}

SEC("struct_ops/cb_stopping")
void BPF_PROG(cb_stopping, struct task_struct *p, bool runnable)
{
	burn();
}

SEC("struct_ops/cb_tick")
void BPF_PROG(cb_tick, struct task_struct *p)
{
	burn();
}

SEC(".struct_ops.link")
struct sched_ext_ops callbacks_ops = {
	.select_cpu = (void *)cb_select_cpu,
	.enqueue = (void *)cb_enqueue,
	.dispatch = (void *)cb_dispatch,
	.running = (void *)cb_running,
	.stopping = (void *)cb_stopping,
	.tick = (void *)cb_tick,
	.name = "defaults_callbacks",
};
