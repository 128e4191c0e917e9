// SPDX-License-Identifier: GPL-2.0-only
/*
 * bpfcost - what each loaded struct_ops BPF program (a sched_ext scheduler's
 * callbacks) has cost so far: run count and total run time.
 *
 * The kernel counts both per program while kernel.bpf_stats_enabled is 1
 * (the counters only grow while it is on). Two snapshots taken around a
 * benchmark give ns per call of every callback, for any sched_ext
 * scheduler alike, without its cooperation: the lab uses this to compare
 * the cost of each decision across schedulers.
 *
 * Usage: bpfcost [-e]
 *   -e  set kernel.bpf_stats_enabled to 1 first
 * Output: one line per struct_ops program,
 *         "prog ID NAME run_cnt N run_time_ns N"
 *         (NAME is the kernel's program name, cut to 15 characters).
 * Exit: 0 done (also with no struct_ops program loaded), 2 system error.
 */
#include <errno.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

static int enable_stats(void)
{
	FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "w");

	if (!f)
		return -1;
	fputs("1\n", f);
	return fclose(f);
}

int main(int argc, char **argv)
{
	union bpf_attr attr;
	__u32 id = 0;

	if (argc > 1 && !strcmp(argv[1], "-e") && enable_stats()) {
		perror("bpfcost: kernel.bpf_stats_enabled");
		return 2;
	}
	for (;;) {
		struct bpf_prog_info info;
		int fd;

		memset(&attr, 0, sizeof(attr));
		attr.start_id = id;
		if (bpf(BPF_PROG_GET_NEXT_ID, &attr)) {
			if (errno == ENOENT)
				return 0;
			perror("bpfcost: BPF_PROG_GET_NEXT_ID");
			return 2;
		}
		id = attr.next_id;

		memset(&attr, 0, sizeof(attr));
		attr.prog_id = id;
		fd = bpf(BPF_PROG_GET_FD_BY_ID, &attr);
		if (fd < 0)
			continue;	/* unloaded meanwhile */

		memset(&info, 0, sizeof(info));
		memset(&attr, 0, sizeof(attr));
		attr.info.bpf_fd = fd;
		attr.info.info_len = sizeof(info);
		attr.info.info = (__u64)(unsigned long)&info;
		if (!bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) &&
		    info.type == BPF_PROG_TYPE_STRUCT_OPS)
			printf("prog %u %s run_cnt %llu run_time_ns %llu\n", info.id,
			       info.name[0] ? info.name : "-",
			       (unsigned long long)info.run_cnt,
			       (unsigned long long)info.run_time_ns);
		close(fd);
	}
}
