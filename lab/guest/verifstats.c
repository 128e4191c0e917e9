// SPDX-License-Identifier: GPL-2.0-only
/*
 * verifstats.so - the kernel verifier's statistics of every BPF program a
 * process loads, without the process's cooperation (bin/lab verifier,
 * lab/verifier.py).
 *
 * Preloaded (LD_PRELOAD) into scx_locality in the guest. libbpf, linked
 * into the agent, makes every bpf(2) call through libc's syscall(); this
 * file's syscall() passes every call through unchanged, except a
 * BPF_PROG_LOAD that asks for no verifier log: that one is made with
 * log_level BPF_LOG_STATS (4) and a buffer of this file's own, so that the
 * verifier adds its summary ("verification time N usec", "stack depth N",
 * "processed N insns (limit 1000000) max_states_per_insn N total_states N
 * peak_states N mark_read N"), which is written out, one line per program:
 *
 *   verifstats: NAME<TAB>rc=FD-or--ERRNO<TAB>LOG (its lines joined by " | ")
 *
 * to the file named by VERIFSTATS_OUT (appended), else to stderr. NAME is
 * the program name libbpf gave the kernel (cut to 15 characters). The
 * program is verified exactly as it would be without the shim (same
 * instructions, maps, frozen rodata): the stats level only adds the
 * summary. libbpf's own verbose loads (a retry after a failure) pass
 * through untouched, as does everything else.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/bpf.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef BPF_LOG_STATS
#define BPF_LOG_STATS 4
#endif

typedef long (*syscall_fn)(long, ...);

/* Room for a copy of the caller's bpf_attr, which may be larger than this
 * header's union (libbpf may know newer fields); the log fields of
 * BPF_PROG_LOAD sit near its start in every version. */
#define ATTR_MAX 512

static void report(const union bpf_attr *attr, long rc, int err, const char *log)
{
	char name[BPF_OBJ_NAME_LEN + 1];
	const char *path = getenv("VERIFSTATS_OUT");
	FILE *out = NULL;
	const char *p;

	memcpy(name, attr->prog_name, BPF_OBJ_NAME_LEN);
	name[BPF_OBJ_NAME_LEN] = '\0';
	if (path && *path)
		out = fopen(path, "a");
	if (!out)
		out = stderr;
	fprintf(out, "verifstats: %s\trc=%ld\t", name[0] ? name : "-", rc >= 0 ? rc : -(long)err);
	for (p = log; *p; p++) {
		if (*p == '\n') {
			if (p[1])
				fputs(" | ", out);
		} else if (*p == '\t') {
			fputc(' ', out);
		} else {
			fputc(*p, out);
		}
	}
	fputc('\n', out);
	if (out != stderr)
		fclose(out);
	else
		fflush(out);
}

long syscall(long nr, ...)
{
	static syscall_fn real;
	static char log[16384];
	unsigned char copy[ATTR_MAX];
	union bpf_attr *attr;
	va_list ap;
	long a[6];
	long rc;
	int i, err;

	va_start(ap, nr);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!real)
		real = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	attr = (union bpf_attr *)a[1];
	if (nr != __NR_bpf || a[0] != BPF_PROG_LOAD || !attr || a[2] <= 0 || a[2] > ATTR_MAX ||
	    (unsigned long)a[2] < offsetof(union bpf_attr, log_buf) + sizeof(attr->log_buf) ||
	    attr->log_level)
		return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);

	memset(copy, 0, sizeof(copy));
	memcpy(copy, attr, a[2]);
	attr = (union bpf_attr *)copy;
	log[0] = '\0';
	attr->log_level = BPF_LOG_STATS;
	attr->log_buf = (unsigned long)log;
	attr->log_size = sizeof(log);
	rc = real(nr, a[0], (long)copy, a[2], a[3], a[4], a[5]);
	err = errno;
	log[sizeof(log) - 1] = '\0';
	report(attr, rc, err, log);
	errno = err;
	return rc;
}
