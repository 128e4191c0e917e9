/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memlocal: memory that was first touched on the wrong node, and how fast it comes home.
 *
 *   memlocal [-n MB] [-t THREADS] [-f FIRST_TOUCH_NODE] [-c COMPUTE_NODE] [-s SECONDS] [-p PERIOD_MS]
 *
 * THREADS threads (default: the CPUs of COMPUTE_NODE) each own one slice of an MB-megabyte anonymous buffer
 * (slices 2 MB aligned, so a transparent huge page never straddles two threads). Phase 1: every thread binds
 * itself (sched_setaffinity) to the CPUs of FIRST_TOUCH_NODE (default 1) and writes its slice: first touch
 * puts the pages there. Phase 2: every thread, and the main thread, bind to the CPUs of COMPUTE_NODE (default
 * 0) and stream over their slices (read-modify-write) for SECONDS. Nothing in the program moves memory: only
 * the kernel or a scheduler can.
 *
 * Every PERIOD_MS (default 500) the main thread asks the kernel where every 8th page of the buffer is
 * (move_pages(2) with nodes = NULL, which only queries) and prints
 *   memlocal: t=SECONDS local=FRACTION
 * where FRACTION is the share of the sampled resident pages on COMPUTE_NODE. At the end:
 *   memlocal_reach90_s: S     (seconds into phase 2 until FRACTION first reached 0.90; -1 if never)
 *   memlocal_final_local: F
 *   memlocal_mbytes_per_s: R  (bytes streamed per second by all threads in phase 2)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SLICE_ALIGN (2UL << 20)
#define SAMPLE_STRIDE 8

static char *buf;
static size_t slice_bytes;
static cpu_set_t first_set, compute_set;
static pthread_barrier_t touched;
static _Atomic int stop;
static _Atomic uint64_t streamed;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* CPUs of a node from sysfs ("0-3,8"); returns how many. */
static int node_cpus(int node, cpu_set_t *set)
{
	char path[96], line[4096], *p;
	FILE *f;
	int n = 0;

	CPU_ZERO(set);
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	f = fopen(path, "r");
	if (!f || !fgets(line, sizeof(line), f)) {
		if (f)
			fclose(f);
		return 0;
	}
	fclose(f);
	for (p = line; *p && *p != '\n';) {
		long a = strtol(p, &p, 10), b = a;

		if (*p == '-')
			b = strtol(p + 1, &p, 10);
		for (long c = a; c <= b; c++, n++)
			CPU_SET((int)c, set);
		if (*p == ',')
			p++;
	}
	return n;
}

static void bind_to(const cpu_set_t *set)
{
	if (sched_setaffinity(0, sizeof(*set), set))
		perror("memlocal: sched_setaffinity");
}

static void *worker(void *arg)
{
	long i = (long)arg;
	double *a = (double *)(buf + (size_t)i * slice_bytes);
	size_t n = slice_bytes / sizeof(double);
	uint64_t done = 0;

	bind_to(&first_set);
	for (size_t k = 0; k < n; k++)
		a[k] = (double)(k & 1023);
	pthread_barrier_wait(&touched);
	bind_to(&compute_set);
	pthread_barrier_wait(&touched);
	while (!atomic_load(&stop)) {
		for (size_t k = 0; k < n && !atomic_load(&stop); k += 4096) {
			size_t end = k + 4096 < n ? k + 4096 : n;

			for (size_t j = k; j < end; j++)
				a[j] = a[j] * 0.5 + 1.0;
			done += (end - k) * sizeof(double) * 2;
		}
	}
	atomic_fetch_add(&streamed, done);
	return NULL;
}

/* Share of the sampled resident pages on `node`; -1 if none is resident. */
static double locality(void **pages, int *status, long npages, int node)
{
	long here = 0, present = 0;

	if (syscall(SYS_move_pages, 0, (unsigned long)npages, pages, NULL, status, 0) < 0) {
		perror("memlocal: move_pages");
		return -1;
	}
	for (long k = 0; k < npages; k++) {
		if (status[k] < 0)
			continue;
		present++;
		here += status[k] == node;
	}
	return present ? (double)here / (double)present : -1;
}

int main(int argc, char **argv)
{
	long mb = 256, threads = 0, period_ms = 500, page = sysconf(_SC_PAGESIZE), npages;
	int from = 1, to = 0, opt;
	double seconds = 20, t0, t, reach = -1, last = -1;
	pthread_t *th;
	void **pages;
	int *status;

	while ((opt = getopt(argc, argv, "n:t:f:c:s:p:")) != -1) {
		switch (opt) {
		case 'n': mb = atol(optarg); break;
		case 't': threads = atol(optarg); break;
		case 'f': from = atoi(optarg); break;
		case 'c': to = atoi(optarg); break;
		case 's': seconds = atof(optarg); break;
		case 'p': period_ms = atol(optarg); break;
		default:
			fprintf(stderr, "usage: memlocal [-n MB] [-t THREADS] [-f FIRST_TOUCH_NODE] [-c COMPUTE_NODE] "
					"[-s SECONDS] [-p PERIOD_MS]\n");
			return 2;
		}
	}
	if (!node_cpus(from, &first_set) || !node_cpus(to, &compute_set)) {
		fprintf(stderr, "memlocal: node %d or %d has no CPUs\n", from, to);
		return 2;
	}
	if (!threads)
		threads = CPU_COUNT(&compute_set);
	if (mb < 1 || threads < 1 || seconds <= 0 || period_ms < 10) {
		fprintf(stderr, "memlocal: bad arguments\n");
		return 2;
	}
	slice_bytes = ((size_t)mb << 20) / (size_t)threads / SLICE_ALIGN * SLICE_ALIGN;
	if (!slice_bytes)
		slice_bytes = SLICE_ALIGN;
	/* 2 MB aligned start: over-allocate and round up */
	buf = mmap(NULL, slice_bytes * threads + SLICE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	if (buf == MAP_FAILED) {
		perror("memlocal: mmap");
		return 1;
	}
	buf = (char *)(((uintptr_t)buf + SLICE_ALIGN - 1) & ~(SLICE_ALIGN - 1));
	npages = (long)(slice_bytes * threads / (size_t)page / SAMPLE_STRIDE);
	pages = malloc(sizeof(*pages) * npages);
	status = malloc(sizeof(*status) * npages);
	th = malloc(sizeof(*th) * threads);
	if (!pages || !status || !th)
		return 1;
	for (long k = 0; k < npages; k++)
		pages[k] = buf + (size_t)k * SAMPLE_STRIDE * page;
	printf("memlocal: pid=%d mb=%zu threads=%ld first_touch_node=%d compute_node=%d seconds=%g\n", (int)getpid(),
	       slice_bytes * threads >> 20, threads, from, to, seconds);
	fflush(stdout);
	bind_to(&compute_set);
	pthread_barrier_init(&touched, NULL, (unsigned)threads + 1);
	for (long i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i)) {
			perror("memlocal: pthread_create");
			return 1;
		}
	pthread_barrier_wait(&touched);
	printf("memlocal: touched local=%.3f (on the compute node, before phase 2)\n",
	       locality(pages, status, npages, to));
	fflush(stdout);
	pthread_barrier_wait(&touched);
	t0 = now_s();
	for (t = 0; t < seconds; t = now_s() - t0) {
		last = locality(pages, status, npages, to);
		printf("memlocal: t=%.2f local=%.3f\n", t, last);
		fflush(stdout);
		if (reach < 0 && last >= 0.90)
			reach = t;
		usleep((useconds_t)period_ms * 1000);
	}
	atomic_store(&stop, 1);
	for (long i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	t = now_s() - t0;
	last = locality(pages, status, npages, to);
	if (reach < 0 && last >= 0.90)
		reach = t;
	printf("memlocal_reach90_s: %.2f\n", reach);
	printf("memlocal_final_local: %.3f\n", last);
	printf("memlocal_mbytes_per_s: %.1f\n", (double)atomic_load(&streamed) / t / 1e6);
	return 0;
}
