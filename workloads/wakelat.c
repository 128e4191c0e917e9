/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * wakelat: wakeup latency and request throughput of message threads that wake worker threads.
 *
 *   wakelat [-m MESSAGE_THREADS] [-t WORKERS_PER_MESSAGE_THREAD] [-r SECONDS] [-w WARMUP_SECONDS]
 *           [-c CACHE_KB] [-p PASSES]
 *
 * Each message thread owns a group of workers. In a loop it stamps the time, wakes every worker of its group
 * (a futex each) and sleeps until the last of them has finished its request. A worker, once woken, records
 * its wakeup latency (from the stamp to the moment it runs), serves the request (PASSES passes over a private
 * buffer of CACHE_KB kilobytes: cheap when the worker runs where its buffer is cached, dearer after a move to
 * another LLC), records the request's service time and sleeps again. The closed loop makes requests/s a
 * throughput figure and the wakeup latency a scheduling-delay figure.
 *
 * Output (one "key: value" per line, after a header):
 *   wakeup_p50_us, wakeup_p90_us, wakeup_p99_us, wakeup_p99.9_us, wakeup_max_us,
 *   request_p50_us, request_p99_us, requests_per_s, requests
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct samples {
	uint32_t *v;
	size_t n, cap;
};

struct group;

struct worker {
	struct group *g;
	_Atomic uint32_t gate; /* 0: idle, 1: a request is posted, 2: exit */
	_Atomic uint64_t posted_ns;
	unsigned char *buf;
	size_t buf_len;
	struct samples wake, req;
	uint64_t requests;
	pthread_t th;
} __attribute__((aligned(64)));

struct group {
	struct worker *workers;
	int nr_workers;
	_Atomic uint32_t pending;
	pthread_t th;
} __attribute__((aligned(64)));

static _Atomic int stop, measuring;
static int passes = 1;
static volatile uint64_t sink;

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
	return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void push(struct samples *s, uint32_t v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 4096;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v) {
			perror("wakelat: realloc");
			exit(1);
		}
	}
	s->v[s->n++] = v;
}

static void serve(struct worker *w)
{
	uint64_t sum = 0;

	for (int p = 0; p < passes; p++)
		for (size_t i = 0; i < w->buf_len; i += 64) {
			w->buf[i] += 1;
			sum += w->buf[i];
		}
	sink += sum;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (;;) {
		while (atomic_load(&w->gate) == 0)
			futex(&w->gate, FUTEX_WAIT_PRIVATE, 0);
		if (atomic_load(&w->gate) == 2) {
			if (atomic_fetch_sub(&w->g->pending, 1) == 1)
				futex(&w->g->pending, FUTEX_WAKE_PRIVATE, 1);
			return NULL;
		}
		uint64_t t_run = now_ns(), t_posted = atomic_load(&w->posted_ns);
		int rec = atomic_load(&measuring);

		atomic_store(&w->gate, 0);
		serve(w);
		uint64_t t_done = now_ns();

		if (rec) {
			uint64_t lat = (t_run - t_posted) / 1000, svc = (t_done - t_run) / 1000;

			push(&w->wake, lat > UINT32_MAX ? UINT32_MAX : (uint32_t)lat);
			push(&w->req, svc > UINT32_MAX ? UINT32_MAX : (uint32_t)svc);
			w->requests++;
		}
		if (atomic_fetch_sub(&w->g->pending, 1) == 1)
			futex(&w->g->pending, FUTEX_WAKE_PRIVATE, 1);
	}
}

static void post_all(struct group *g, uint32_t what)
{
	atomic_store(&g->pending, (uint32_t)g->nr_workers);
	for (int i = 0; i < g->nr_workers; i++) {
		struct worker *w = &g->workers[i];

		atomic_store(&w->posted_ns, now_ns());
		atomic_store(&w->gate, what);
		futex(&w->gate, FUTEX_WAKE_PRIVATE, 1);
	}
	for (;;) {
		uint32_t p = atomic_load(&g->pending);

		if (p == 0)
			break;
		futex(&g->pending, FUTEX_WAIT_PRIVATE, p);
	}
}

static void *message_main(void *arg)
{
	struct group *g = arg;

	while (!atomic_load(&stop))
		post_all(g, 1);
	post_all(g, 2); /* every worker exits */
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values. */
static uint32_t pct(const struct samples *s, double p)
{
	size_t rank;

	if (!s->n)
		return 0;
	rank = (size_t)((p / 100.0) * (double)s->n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > s->n)
		rank = s->n;
	return s->v[rank - 1];
}

static void merge(struct samples *dst, const struct samples *src)
{
	for (size_t i = 0; i < src->n; i++)
		push(dst, src->v[i]);
}

static void usage(void)
{
	fprintf(stderr, "usage: wakelat [-m MESSAGE_THREADS] [-t WORKERS] [-r SECONDS] [-w WARMUP_SECONDS] "
			"[-c CACHE_KB] [-p PASSES]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int nr_msg = 2, nr_workers = 4, opt;
	double runtime = 10, warmup = 1;
	long cache_kb = 256;
	struct group *groups;
	struct samples wake = {0}, req = {0};
	uint64_t requests = 0, t0, t1;

	while ((opt = getopt(argc, argv, "m:t:r:w:c:p:")) != -1) {
		switch (opt) {
		case 'm': nr_msg = atoi(optarg); break;
		case 't': nr_workers = atoi(optarg); break;
		case 'r': runtime = atof(optarg); break;
		case 'w': warmup = atof(optarg); break;
		case 'c': cache_kb = atol(optarg); break;
		case 'p': passes = atoi(optarg); break;
		default: usage();
		}
	}
	if (nr_msg < 1 || nr_workers < 1 || runtime <= 0 || warmup < 0 || cache_kb < 0 || passes < 0)
		usage();
	printf("wakelat: message_threads=%d workers_per_message_thread=%d runtime_s=%g warmup_s=%g "
	       "cache_kb=%ld passes=%d\n", nr_msg, nr_workers, runtime, warmup, cache_kb, passes);
	fflush(stdout);
	groups = aligned_alloc(64, sizeof(*groups) * nr_msg);
	if (!groups)
		return 1;
	memset(groups, 0, sizeof(*groups) * nr_msg);
	for (int m = 0; m < nr_msg; m++) {
		struct group *g = &groups[m];

		g->nr_workers = nr_workers;
		g->workers = aligned_alloc(64, sizeof(struct worker) * nr_workers);
		if (!g->workers)
			return 1;
		memset(g->workers, 0, sizeof(struct worker) * nr_workers);
		for (int i = 0; i < nr_workers; i++) {
			struct worker *w = &g->workers[i];

			w->g = g;
			w->buf_len = (size_t)cache_kb * 1024;
			w->buf = w->buf_len ? calloc(1, w->buf_len) : NULL;
			if (w->buf_len && !w->buf)
				return 1;
			if (pthread_create(&w->th, NULL, worker_main, w)) {
				perror("wakelat: pthread_create");
				return 1;
			}
		}
	}
	for (int m = 0; m < nr_msg; m++)
		if (pthread_create(&groups[m].th, NULL, message_main, &groups[m])) {
			perror("wakelat: pthread_create");
			return 1;
		}
	usleep((useconds_t)(warmup * 1e6));
	atomic_store(&measuring, 1);
	t0 = now_ns();
	usleep((useconds_t)(runtime * 1e6));
	atomic_store(&measuring, 0);
	t1 = now_ns();
	atomic_store(&stop, 1);
	for (int m = 0; m < nr_msg; m++)
		pthread_join(groups[m].th, NULL);
	for (int m = 0; m < nr_msg; m++)
		for (int i = 0; i < nr_workers; i++) {
			struct worker *w = &groups[m].workers[i];

			pthread_join(w->th, NULL);
			merge(&wake, &w->wake);
			merge(&req, &w->req);
			requests += w->requests;
		}
	qsort(wake.v, wake.n, sizeof(uint32_t), cmp_u32);
	qsort(req.v, req.n, sizeof(uint32_t), cmp_u32);
	printf("wakeup_p50_us: %u\n", pct(&wake, 50));
	printf("wakeup_p90_us: %u\n", pct(&wake, 90));
	printf("wakeup_p99_us: %u\n", pct(&wake, 99));
	printf("wakeup_p99.9_us: %u\n", pct(&wake, 99.9));
	printf("wakeup_max_us: %u\n", wake.n ? wake.v[wake.n - 1] : 0);
	printf("request_p50_us: %u\n", pct(&req, 50));
	printf("request_p99_us: %u\n", pct(&req, 99));
	printf("requests: %llu\n", (unsigned long long)requests);
	printf("requests_per_s: %.1f\n", (double)requests / ((double)(t1 - t0) / 1e9));
	return requests ? 0 : 1;
}
