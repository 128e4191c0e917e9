/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * locsample: run a command and record where its tasks ran.
 *
 *   locsample [-i MS] [-m MS] [-s MS] [-q MS] [-c PERCENT] [-b PERCENT] [-t SECONDS] [-k] -o PREFIX -- CMD...
 *
 * Forks CMD and, until it exits, every -i ms (default 100; longer when a scan would take more than -b percent,
 * default 10, of one CPU: with hundreds of tasks under TCG one scan can take tens of ms) reads field 39 ("processor", the CPU a task last ran
 * on) and the state of /proc/<pid>/task/<tid>/stat for every task of CMD and of all its descendants; every -m ms
 * (default 500) it also reads se.nr_migrations from /proc/<pid>/task/<tid>/sched when that file exists; every
 * -s ms (default 500) it copies the per-CPU lines of /proc/stat, and every -q ms (default 100, 0 = never;
 * longer when a sample would take more than -c percent, default 3, of one CPU) it records per CPU the idle time
 * (/proc/stat) and the run-queue wait (/proc/schedstat). locsample runs as SCHED_FIFO priority 1 (CMD does
 * not inherit it; its threads do), so that it keeps its period when CMD saturates every CPU: under SCHED_OTHER
 * it got a fair share among CMD's tasks and sampled only every second or two. It is a child subreaper, so
 * daemons that CMD starts stay its descendants. CMD runs in a process group of its own; when CMD exits,
 * whatever is left in that group (background jobs of a shell) is killed. With -t, CMD and all its descendants
 * are killed after SECONDS and the exit status is 124.
 *
 * PREFIX.tasks (written when CMD has exited):
 *   # locsample 1 interval_ms=100 budget_pct=10 rq_ms=100 rq_budget_pct=3
 *   end <elapsed_ms> <exit_status> [timeout]
 *   ticks <samples taken> <ms spent sampling>
 *   stat <samples taken> <us of CPU time spent>     (the thread that reads /proc/stat and /proc/schedstat)
 *   task <tgid> <tid> <comm> <first_ms> <last_ms> <nr_migrations or -1> <cpu>:<samples>:<running>,...
 * the last field run-length encodes the sequence of sampled CPUs: each entry is one stretch of consecutive
 * samples on one CPU, with how many of them found the task running (state R).
 * PREFIX.cpu: "<ms> cpuN user nice system idle iowait irq softirq steal ..." per CPU per sample, and with -q
 * one line per -q sample:
 *   <ms> rq [<cpu>:<idle_ms>:<wait_us> ...]
 * the change since the previous rq line (the first one has no entries and starts the record) of the CPU's
 * idle + iowait time (/proc/stat, kept in ns by the kernel, shown in 10 ms units) and of the time tasks
 * waited on its run queue before running (run_delay of /proc/schedstat, ns; charged when a wait ends).
 * CPUs with no change are left out. No rq lines when /proc/schedstat is missing.
 * PREFIX.ticks (only with -k; written as the samples are taken): which task was on which CPU at each sample,
 * so that tasks can be compared tick by tick (were two tasks on one node at the same moment?). Delta encoded:
 *   # locsample-ticks 1 interval_ms=100
 *   <ms> [<idx>:<cpu> ...] [-<idx> ...]
 * one line per sample (tick), in time order; <idx> is the 0-based position of the task's "task" line in
 * PREFIX.tasks. "<idx>:<cpu>" says the task was seen on <cpu> at this tick and either was not seen at the
 * previous tick or was then on another CPU; "-<idx>" says the task seen at the previous tick was not seen at
 * this one (it exited, or became a zombie). A task seen at the previous tick and not named is on the same CPU.
 * The CPU is the one the task last ran on, as in PREFIX.tasks. A tick line with no entries means no change.
 *
 * Exits with CMD's exit status (128+signal if a signal ended it).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "numa_sysfs.h"

struct run {
	int cpu;
	uint32_t samples;
	uint32_t running;
};

struct task {
	int tgid, tid;
	char comm[64];
	long first_ms, last_ms;
	long nr_migrations;
	struct run *runs;
	int nr_runs, cap_runs;
	long tick_seen; /* the tick (1-based) of its latest sample, 0 = never */
	int tick_cpu; /* its CPU at that sample */
};

static struct task *tasks;
static int nr_tasks, cap_tasks;

#define HASH_BITS 16
static int *hash_slots; /* index+1 into tasks, 0 = empty */

/* What the previous scan of /proc found out about each pid: 1 descends from CMD, 2 does not (0 unknown). */
static unsigned char *known, *seen_now;
static int max_pid;
static int scan_hi; /* one past the highest pid seen so far: the arrays are only touched below it */

static struct timespec t_start;

/* -k: the per-tick record (PREFIX.ticks). */
static FILE *tick_out;
static long tick_no;
static int *tick_live, nr_tick_live, cap_tick_live; /* indices of the tasks seen at the previous tick */

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t_start.tv_sec) * 1000 + (t.tv_nsec - t_start.tv_nsec) / 1000000;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p) {
		perror("locsample: realloc");
		exit(125);
	}
	return p;
}

static ssize_t read_file_at(int dirfd, const char *path, char *buf, size_t len)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

/* Parse a stat line: comm (between the first '(' and the last ')'), state, ppid, processor (field 39). */
static int parse_stat(char *buf, char *comm, size_t comm_len, char *state, int *ppid, int *cpu)
{
	char *open = strchr(buf, '('), *close = strrchr(buf, ')'), *p, *save;
	int field = 3;
	size_t n;

	if (!open || !close || close < open)
		return -1;
	n = (size_t)(close - open - 1);
	if (n >= comm_len)
		n = comm_len - 1;
	memcpy(comm, open + 1, n);
	comm[n] = 0;
	for (char *c = comm; *c; c++)
		if (*c == ' ' || *c == '\t' || *c == '\n')
			*c = '_';
	*cpu = -1;
	for (p = strtok_r(close + 1, " ", &save); p; p = strtok_r(NULL, " ", &save), field++) {
		if (field == 3)
			*state = p[0];
		else if (field == 4)
			*ppid = atoi(p);
		else if (field == 39) {
			*cpu = atoi(p);
			break;
		}
	}
	return *cpu >= 0 ? 0 : -1;
}

static struct task *find_task(int tgid, int tid, const char *comm)
{
	unsigned int h = (unsigned int)tid & ((1u << HASH_BITS) - 1);

	for (;;) {
		int idx = hash_slots[h];

		if (!idx)
			break;
		if (tasks[idx - 1].tid == tid) {
			struct task *t = &tasks[idx - 1];

			if (t->tgid == tgid)
				return t;
			/* The tid was reused by another process: start a new record in the same slot. */
			break;
		}
		h = (h + 1) & ((1u << HASH_BITS) - 1);
	}
	if (nr_tasks + 1 >= (1 << HASH_BITS) / 2) {
		fprintf(stderr, "locsample: too many tasks, not recording more\n");
		return NULL;
	}
	if (nr_tasks == cap_tasks) {
		cap_tasks = cap_tasks ? cap_tasks * 2 : 256;
		tasks = xrealloc(tasks, sizeof(*tasks) * cap_tasks);
	}
	memset(&tasks[nr_tasks], 0, sizeof(tasks[0]));
	tasks[nr_tasks].tgid = tgid;
	tasks[nr_tasks].tid = tid;
	tasks[nr_tasks].nr_migrations = -1;
	tasks[nr_tasks].first_ms = -1;
	snprintf(tasks[nr_tasks].comm, sizeof(tasks[nr_tasks].comm), "%s", comm);
	hash_slots[h] = ++nr_tasks;
	return &tasks[nr_tasks - 1];
}

static void add_sample(struct task *t, int cpu, int running, long ms)
{
	struct run *r = t->nr_runs ? &t->runs[t->nr_runs - 1] : NULL;

	if (t->first_ms < 0)
		t->first_ms = ms;
	t->last_ms = ms;
	if (!r || r->cpu != cpu) {
		if (t->nr_runs == t->cap_runs) {
			t->cap_runs = t->cap_runs ? t->cap_runs * 2 : 4;
			t->runs = xrealloc(t->runs, sizeof(*t->runs) * t->cap_runs);
		}
		r = &t->runs[t->nr_runs++];
		r->cpu = cpu;
		r->samples = 0;
		r->running = 0;
	}
	r->samples++;
	r->running += running;
}

static long read_nr_migrations(int taskdir)
{
	static char buf[8192];

	if (read_file_at(taskdir, "sched", buf, sizeof(buf)) < 0)
		return -1;
	return sched_nr_migrations(buf);
}

/* -k: a task seen at this tick; names it on the tick line when it is new or changed CPU. */
static void tick_note(struct task *t, int cpu)
{
	int was_live = t->tick_seen == tick_no - 1 && tick_no > 1;

	if (!tick_out || t->tick_seen == tick_no)
		return;
	if (!was_live || t->tick_cpu != cpu)
		fprintf(tick_out, " %d:%d", (int)(t - tasks), cpu);
	if (!was_live) {
		if (nr_tick_live == cap_tick_live) {
			cap_tick_live = cap_tick_live ? cap_tick_live * 2 : 64;
			tick_live = xrealloc(tick_live, sizeof(*tick_live) * cap_tick_live);
		}
		tick_live[nr_tick_live++] = (int)(t - tasks);
	}
	t->tick_seen = tick_no;
	t->tick_cpu = cpu;
}

/* -k: end of a tick: the tasks seen at the previous tick and not at this one are gone. */
static void tick_end(void)
{
	int n = 0;

	if (!tick_out)
		return;
	for (int i = 0; i < nr_tick_live; i++) {
		int idx = tick_live[i];

		if (tasks[idx].tick_seen == tick_no)
			tick_live[n++] = idx;
		else
			fprintf(tick_out, " -%d", idx);
	}
	nr_tick_live = n;
	fputc('\n', tick_out);
}

/* Pid -> parent pid for the processes of this scan (0 = unknown). */
static int *ppid_of;
static unsigned char *ours;

static int is_ours(int pid, int root, int depth)
{
	if (pid == root)
		return 1;
	if (pid <= 1 || pid >= max_pid || depth > 64)
		return 0;
	if (ours[pid])
		return ours[pid] == 1;
	if (!ppid_of[pid])
		return 0;
	ours[pid] = is_ours(ppid_of[pid], root, depth + 1) ? 1 : 2;
	return ours[pid] == 1;
}

static void sample_tasks(int root, int do_sched)
{
	static char buf[4096];
	long ms = now_ms();
	DIR *proc = opendir("/proc");
	struct dirent *de;
	int *pids = NULL, nr_pids = 0, cap_pids = 0;

	if (!proc)
		return;
	tick_no++;
	if (tick_out)
		fprintf(tick_out, "%ld", ms);
	memset(seen_now, 0, scan_hi);
	memset(ours, 0, scan_hi);
	/* Pass 1: parents of processes we have not ruled out. */
	while ((de = readdir(proc))) {
		int pid = atoi(de->d_name), ppid = 0, cpu;
		char comm[64], state;

		if (pid <= 0 || pid >= max_pid)
			continue;
		if (pid >= scan_hi)
			scan_hi = pid + 1;
		seen_now[pid] = 1;
		if (known[pid] == 2) {
			ppid_of[pid] = 0;
			continue;
		}
		if (known[pid] == 1) {
			/* Still ours: only reparenting to us (the subreaper) can change its parent. */
			ours[pid] = 1;
			goto keep;
		}
		snprintf(comm, sizeof(comm), "%d/stat", pid);
		if (read_file_at(dirfd(proc), comm, buf, sizeof(buf)) < 0 ||
		    parse_stat(buf, comm, sizeof(comm), &state, &ppid, &cpu) < 0) {
			ppid_of[pid] = 0;
			continue;
		}
		ppid_of[pid] = ppid;
keep:
		if (nr_pids == cap_pids) {
			cap_pids = cap_pids ? cap_pids * 2 : 256;
			pids = xrealloc(pids, sizeof(*pids) * cap_pids);
		}
		pids[nr_pids++] = pid;
	}
	/* A pid that disappeared may come back as another process: forget what we knew about it. */
	for (int pid = 0; pid < scan_hi; pid++)
		if (!seen_now[pid])
			known[pid] = 0;
	/* Pass 2: the threads of every process that descends from root. */
	for (int i = 0; i < nr_pids; i++) {
		int pid = pids[i], taskdir;
		char path[64];
		DIR *td;

		if (!is_ours(pid, root, 0)) {
			known[pid] = 2;
			continue;
		}
		known[pid] = 1;
		snprintf(path, sizeof(path), "%d/task", pid);
		taskdir = openat(dirfd(proc), path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (taskdir < 0)
			continue;
		td = fdopendir(taskdir);
		if (!td) {
			close(taskdir);
			continue;
		}
		while ((de = readdir(td))) {
			int tid = atoi(de->d_name), ppid, cpu, tdir;
			char comm[64], state;
			struct task *t;

			if (tid <= 0)
				continue;
			tdir = openat(dirfd(td), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (tdir < 0)
				continue;
			if (read_file_at(tdir, "stat", buf, sizeof(buf)) >= 0 &&
			    parse_stat(buf, comm, sizeof(comm), &state, &ppid, &cpu) == 0 && state != 'Z' &&
			    (t = find_task(pid, tid, comm))) {
				snprintf(t->comm, sizeof(t->comm), "%s", comm);
				add_sample(t, cpu, state == 'R', ms);
				tick_note(t, cpu);
				if (do_sched || t->nr_migrations < 0) {
					long m = read_nr_migrations(tdir);

					if (m >= 0)
						t->nr_migrations = m;
				}
			}
			close(tdir);
		}
		closedir(td);
	}
	closedir(proc);
	free(pids);
	tick_end();
}

/* SIGKILL CMD's process group and every process seen descending from it in the last scan. */
static void kill_descendants(int root)
{
	kill(-root, SIGKILL);
	for (int pid = 2; pid < scan_hi; pid++)
		if (seen_now[pid] && ours[pid] == 1)
			kill(pid, SIGKILL);
	kill(root, SIGKILL);
}

/*
 * The per-CPU sampler: a thread of its own, so that its period holds however long a task scan takes. Every
 * stat_every ms it copies the per-CPU lines of /proc/stat; every rq_every ms it writes an rq line.
 */
static FILE *cpu_out;
static long stat_every = 500, rq_every = 100, rq_budget = 3, clk_tck = 100;
static _Atomic int stat_stop;
static long stat_samples;
static long long stat_cpu_us;

/* A /proc file kept open and read whole from its start at every sample (the kernel regenerates it). */
struct procfile {
	const char *path;
	int fd;
	char *buf;
	size_t cap;
};

#ifndef PROC_SCHEDSTAT /* another file in its format, for trying locsample on a kernel without schedstats */
#define PROC_SCHEDSTAT "/proc/schedstat"
#endif
static struct procfile proc_stat = {"/proc/stat", -1, NULL, 0}, proc_schedstat = {PROC_SCHEDSTAT, -1, NULL, 0};

static ssize_t proc_read(struct procfile *p)
{
	size_t len = 0;

	if (p->fd < 0 && (p->fd = open(p->path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if (lseek(p->fd, 0, SEEK_SET) < 0)
		return -1;
	for (;;) {
		ssize_t n;

		if (p->cap - len < 4096) {
			p->cap = p->cap ? p->cap * 2 : 65536;
			p->buf = xrealloc(p->buf, p->cap);
		}
		n = read(p->fd, p->buf + len, p->cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	p->buf[len] = 0;
	return (ssize_t)len;
}

/* Per CPU: the cumulative idle ms and wait us, at the previous rq line and now. */
struct cpu_rq {
	long long idle_ms, wait_us, cur_idle_ms, cur_wait_us;
	int based, seen; /* seen: bit 0 idle read now, bit 1 wait read now */
};

static struct cpu_rq *rqs;
static int nr_rqs, rq_off;

static struct cpu_rq *rq_of(int cpu)
{
	if (cpu < 0 || cpu > 65535)
		return NULL;
	if (cpu >= nr_rqs) {
		int n = cpu + 64;

		rqs = xrealloc(rqs, sizeof(*rqs) * n);
		memset(rqs + nr_rqs, 0, sizeof(*rqs) * (n - nr_rqs));
		nr_rqs = n;
	}
	return &rqs[cpu];
}

/* "cpuN v0 v1 ...": N, and the values in vals (at most max); the number of values, or -1. */
static int parse_cpu_line(const char *line, int *cpu, long long *vals, int max)
{
	char *end;
	int n = 0;

	if (strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9')
		return -1;
	*cpu = (int)strtol(line + 3, &end, 10);
	while (n < max && *end == ' ') {
		char *p = end;

		vals[n] = strtoll(p, &end, 10);
		if (end == p)
			break;
		n++;
	}
	return n;
}

/* The run_delay (ns) of each CPU from /proc/schedstat (version 15 on: "cpuN" and 9 values, the 8th). */
static int read_schedstat(void)
{
	char *line, *next;
	long long v[9];
	int cpu;

	if (proc_read(&proc_schedstat) < 0)
		return -1;
	for (line = proc_schedstat.buf; *line; line = next) {
		struct cpu_rq *r;

		next = strchr(line, '\n');
		next = next ? next + 1 : line + strlen(line);
		if (!strncmp(line, "version ", 8) && atoi(line + 8) < 15)
			return -1;
		if (parse_cpu_line(line, &cpu, v, 9) == 9 && (r = rq_of(cpu))) {
			r->cur_wait_us = v[7] / 1000;
			r->seen |= 2;
		}
	}
	return 0;
}

/* One sample: copy the per-CPU lines of /proc/stat (copy) and write an rq line (rq). */
static void sample_stat(int copy, int rq)
{
	char *line, *next;
	long long v[5];
	long ms = now_ms();
	int cpu;

	rq = rq && !rq_off;
	if (proc_read(&proc_stat) < 0)
		return;
	stat_samples++;
	for (int i = 0; i < nr_rqs; i++)
		rqs[i].seen = 0;
	for (line = proc_stat.buf; *line; line = next) {
		struct cpu_rq *r;

		next = strchr(line, '\n');
		next = next ? next + 1 : line + strlen(line);
		if (strncmp(line, "cpu", 3) != 0)
			break;
		if (line[3] < '0' || line[3] > '9')
			continue;
		if (copy)
			fprintf(cpu_out, "%ld %.*s", ms, (int)(next - line), line);
		/* user nice system idle iowait: a CPU waiting for I/O is idle too */
		if (rq && parse_cpu_line(line, &cpu, v, 5) == 5 && (r = rq_of(cpu))) {
			r->cur_idle_ms = (v[3] + v[4]) * 1000 / clk_tck;
			r->seen |= 1;
		}
	}
	if (!rq)
		return;
	if (read_schedstat() < 0) {
		fprintf(stderr, "locsample: no usable /proc/schedstat, no rq lines\n");
		rq_off = 1;
		return;
	}
	fprintf(cpu_out, "%ld rq", ms);
	for (int i = 0; i < nr_rqs; i++) {
		struct cpu_rq *r = &rqs[i];
		long long d_idle, d_wait;

		if (r->seen != 3)
			continue;
		if (!r->based) {
			r->idle_ms = r->cur_idle_ms;
			r->wait_us = r->cur_wait_us;
			r->based = 1;
			continue;
		}
		/* idle + iowait can step back a little when a task starts or stops waiting for I/O: keep the highest */
		d_idle = r->cur_idle_ms > r->idle_ms ? r->cur_idle_ms - r->idle_ms : 0;
		d_wait = r->cur_wait_us > r->wait_us ? r->cur_wait_us - r->wait_us : 0;
		r->idle_ms += d_idle;
		r->wait_us += d_wait;
		if (d_idle || d_wait)
			fprintf(cpu_out, " %d:%lld:%lld", i, d_idle, d_wait);
	}
	fputc('\n', cpu_out);
}

static long long thread_cpu_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void usage(void)
{
	fprintf(stderr, "usage: locsample [-i MS] [-m MS] [-s MS] [-q MS] [-c PERCENT] [-b PERCENT] [-t SECONDS] "
			"[-k] -o PREFIX -- CMD [ARG...]\n");
	exit(2);
}

/* Sleep until t_start + at_ms. */
static void sleep_until_ms(long at_ms)
{
	struct timespec d = t_start;

	d.tv_sec += at_ms / 1000;
	d.tv_nsec += (at_ms % 1000) * 1000000L;
	while (d.tv_nsec >= 1000000000L) {
		d.tv_nsec -= 1000000000L;
		d.tv_sec++;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d, NULL) == EINTR)
		;
}

static void *stat_main(void *arg)
{
	long next_copy = 0, next_rq = 0;

	(void)arg;
	while (!atomic_load(&stat_stop)) {
		long ms = now_ms(), start = ms;
		int copy = ms >= next_copy, rq = rq_every > 0 && ms >= next_rq;
		long long cost = thread_cpu_us();

		sample_stat(copy, rq);
		cost = thread_cpu_us() - cost;
		ms = now_ms();
		if (copy)
			next_copy = next_copy + stat_every > ms ? next_copy + stat_every : ms;
		if (rq) {
			/* Stretch the rq period when a sample is dear, so that it takes at most rq_budget% of a CPU. */
			long step = (long)(cost / 10 / rq_budget);

			next_rq += rq_every;
			if (next_rq < start + step)
				next_rq = start + step;
			if (next_rq < ms)
				next_rq = ms;
		}
		sleep_until_ms(rq_every > 0 && next_rq < next_copy ? next_rq : next_copy);
	}
	stat_cpu_us = thread_cpu_us();
	return NULL;
}

int main(int argc, char **argv)
{
	long interval = 100, sched_every = 500, next_sched = 0, limit_ms = 0, budget = 10;
	int timed_out = 0;
	long nr_ticks = 0, busy_ms = 0;
	const char *prefix = NULL;
	char path[4096];
	FILE *task_out;
	pthread_t stat_thread;
	int opt, status = 0, rc, want_ticks = 0;
	pid_t child;

	while ((opt = getopt(argc, argv, "+i:m:s:q:c:b:t:ko:")) != -1) {
		switch (opt) {
		case 't': limit_ms = (long)(atof(optarg) * 1000); break;
		case 'b': budget = atol(optarg); break;
		case 'i': interval = atol(optarg); break;
		case 'm': sched_every = atol(optarg); break;
		case 's': stat_every = atol(optarg); break;
		case 'q': rq_every = atol(optarg); break;
		case 'c': rq_budget = atol(optarg); break;
		case 'o': prefix = optarg; break;
		case 'k': want_ticks = 1; break;
		default: usage();
		}
	}
	if (!prefix || optind >= argc || interval <= 0 || sched_every <= 0 || stat_every <= 0 || rq_every < 0 ||
	    rq_budget < 1 || rq_budget > 100 || budget < 1 || budget > 100)
		usage();
	clk_tck = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
	{
		FILE *f = fopen("/proc/sys/kernel/pid_max", "r");

		if (!f || fscanf(f, "%d", &max_pid) != 1)
			max_pid = 4194304;
		if (f)
			fclose(f);
		max_pid++;
	}
	known = calloc(max_pid, 1);
	seen_now = calloc(max_pid, 1);
	ours = calloc(max_pid, 1);
	ppid_of = calloc(max_pid, sizeof(int));
	hash_slots = calloc(1 << HASH_BITS, sizeof(int));
	if (!known || !seen_now || !ours || !ppid_of || !hash_slots) {
		perror("locsample: calloc");
		return 125;
	}
	snprintf(path, sizeof(path), "%s.cpu", prefix);
	cpu_out = fopen(path, "w");
	snprintf(path, sizeof(path), "%s.tasks", prefix);
	task_out = fopen(path, "w");
	if (want_ticks) {
		snprintf(path, sizeof(path), "%s.ticks", prefix);
		tick_out = fopen(path, "w");
	}
	if (!cpu_out || !task_out || (want_ticks && !tick_out)) {
		perror("locsample: cannot write output");
		return 125;
	}
	if (tick_out)
		fprintf(tick_out, "# locsample-ticks 1 interval_ms=%ld\n", interval);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	clock_gettime(CLOCK_MONOTONIC, &t_start);
	child = fork();
	if (child < 0) {
		perror("locsample: fork");
		return 125;
	}
	if (child == 0) {
		setpgid(0, 0);
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "locsample: cannot run %s: %s\n", argv[optind], strerror(errno));
		_exit(127);
	}
	{
		struct sched_param sp = {.sched_priority = 1};

		if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
			fprintf(stderr, "locsample: cannot use SCHED_FIFO (%s); sampling may lag\n", strerror(errno));
	}
	if (pthread_create(&stat_thread, NULL, stat_main, NULL) != 0) {
		perror("locsample: pthread_create");
		return 125;
	}
	for (;;) {
		long ms = now_ms();
		int done = 0, st;
		pid_t r;

		/* Reap CMD and any orphan handed to us as subreaper (so none lingers as a zombie). */
		while ((r = waitpid(-1, &st, WNOHANG)) > 0)
			if (r == child) {
				status = st;
				done = 1;
			}
		if (done || (r < 0 && errno == ECHILD))
			break;
		if (limit_ms && ms >= limit_ms && !timed_out) {
			timed_out = 1;
			kill_descendants(child);
		}
		sample_tasks(child, ms >= next_sched);
		if (ms >= next_sched)
			next_sched = ms + sched_every;
		{
			/* Stretch the period when a scan is dear, so that scans take at most budget% of a CPU. */
			long cost = now_ms() - ms, step = interval;

			if (cost * 100 / budget > step)
				step = cost * 100 / budget;
			nr_ticks++;
			busy_ms += cost;
			sleep_until_ms(ms + step);
		}
	}
	atomic_store(&stat_stop, 1);
	pthread_join(stat_thread, NULL);
	{
		long long t0 = thread_cpu_us();

		sample_stat(1, rq_every > 0);
		stat_cpu_us += thread_cpu_us() - t0;
	}
	kill(-child, SIGKILL);
	rc = timed_out ? 124 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	fprintf(task_out, "# locsample 1 interval_ms=%ld budget_pct=%ld rq_ms=%ld rq_budget_pct=%ld\n", interval,
		budget, rq_every, rq_budget);
	fprintf(task_out, "end %ld %d%s\n", now_ms(), rc, timed_out ? " timeout" : "");
	fprintf(task_out, "ticks %ld %ld\n", nr_ticks, busy_ms);
	fprintf(task_out, "stat %ld %lld\n", stat_samples, stat_cpu_us);
	for (int i = 0; i < nr_tasks; i++) {
		struct task *t = &tasks[i];

		fprintf(task_out, "task %d %d %s %ld %ld %ld ", t->tgid, t->tid, t->comm[0] ? t->comm : "?",
			t->first_ms, t->last_ms, t->nr_migrations);
		for (int j = 0; j < t->nr_runs; j++)
			fprintf(task_out, "%s%d:%u:%u", j ? "," : "", t->runs[j].cpu, t->runs[j].samples,
				t->runs[j].running);
		fprintf(task_out, "\n");
	}
	fclose(task_out);
	fclose(cpu_out);
	if (tick_out)
		fclose(tick_out);
	return rc;
}
