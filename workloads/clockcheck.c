// SPDX-License-Identifier: GPL-2.0-only
/*
 * clockcheck - what a clock read costs on each CPU, and whether the clock
 * stays ordered across CPUs.
 *
 * The lab's guests choose a clocksource (TSC, HPET, ...). The scheduler
 * reads time on every wake-up and the benchmarks time themselves, so a slow
 * clock distorts both and an unsynchronised one makes their figures wrong.
 *
 *   cost:  per CPU, a thread pinned there reads CLOCK_MONOTONIC N times;
 *          prints the mean ns per read.
 *   order: two threads pinned on CPUs a and b pass a token back and forth
 *          through a shared word, each stamping the time it sends; the
 *          receiver's own read must not be earlier than the sender's stamp.
 *          Prints the number of backwards steps and the largest, over all
 *          CPU pairs (0 and 0 ns when the clock is ordered).
 *
 * Usage: clockcheck [reads per CPU (default 200000)] [round trips per pair (default 200)]
 * Output: one line per CPU "cpu N read_ns X", then
 *         "clocksource NAME mean_read_ns X backwards N max_backwards_ns X".
 * Exit: 0 ordered, 1 a backwards step was seen, 2 usage or system error.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* mean ns per clock read on @cpu over @n reads */
static double read_cost(int cpu, long n)
{
	uint64_t t0, t1, sink = 0;
	long i;

	if (pin(cpu))
		return -1;
	t0 = now_ns();
	for (i = 0; i < n; i++)
		sink += now_ns();
	t1 = now_ns();
	if (sink == 1)	/* keep the loop */
		putchar(' ');
	return (double)(t1 - t0) / (double)n;
}

struct pair {
	int cpu_a, cpu_b;
	long rounds;
	_Atomic uint64_t stamp;	/* sender's time; 0 = slot empty */
	_Atomic int turn;	/* 0: a sends, 1: b sends */
	long backwards;
	uint64_t max_back;
};

static void step(struct pair *pr, int me)
{
	uint64_t s, r;

	/* wait for the token, check its stamp against our clock */
	while (atomic_load_explicit(&pr->turn, memory_order_acquire) != me)
		;
	s = atomic_load_explicit(&pr->stamp, memory_order_acquire);
	r = now_ns();
	if (s && r < s) {
		pr->backwards++;
		if (s - r > pr->max_back)
			pr->max_back = s - r;
	}
	atomic_store_explicit(&pr->stamp, now_ns(), memory_order_release);
	atomic_store_explicit(&pr->turn, !me, memory_order_release);
}

static void *side_b(void *arg)
{
	struct pair *pr = arg;
	long i;

	if (pin(pr->cpu_b))
		return NULL;
	for (i = 0; i < pr->rounds; i++)
		step(pr, 1);
	return NULL;
}

/* 0 ok, -1 error; adds to *back and *max */
static int check_pair(int a, int b, long rounds, long *back, uint64_t *max)
{
	struct pair pr;
	pthread_t t;
	long i;

	memset(&pr, 0, sizeof(pr));
	pr.cpu_a = a;
	pr.cpu_b = b;
	pr.rounds = rounds;
	if (pin(a) || pthread_create(&t, NULL, side_b, &pr))
		return -1;
	for (i = 0; i < rounds; i++)
		step(&pr, 0);
	pthread_join(t, NULL);
	*back += pr.backwards;
	if (pr.max_back > *max)
		*max = pr.max_back;
	return 0;
}

int main(int argc, char **argv)
{
	long reads = argc > 1 ? atol(argv[1]) : 200000;
	long rounds = argc > 2 ? atol(argv[2]) : 200;
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN), a, b;
	char cs[64] = "unknown";
	double sum = 0, c;
	long back = 0;
	uint64_t max = 0;
	FILE *f;

	if (reads <= 0 || rounds <= 0 || ncpu <= 0) {
		fprintf(stderr, "usage: clockcheck [reads per CPU] [round trips per pair]\n");
		return 2;
	}
	f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
	if (f) {
		if (fscanf(f, "%63s", cs) != 1)
			strcpy(cs, "unknown");
		fclose(f);
	}
	for (a = 0; a < ncpu; a++) {
		c = read_cost(a, reads);
		if (c < 0) {
			perror("sched_setaffinity");
			return 2;
		}
		printf("cpu %d read_ns %.1f\n", a, c);
		sum += c;
	}
	for (a = 0; a < ncpu; a++)
		for (b = a + 1; b < ncpu; b++)
			if (check_pair(a, b, rounds, &back, &max)) {
				perror("check_pair");
				return 2;
			}
	printf("clocksource %s mean_read_ns %.1f backwards %ld max_backwards_ns %llu\n",
	       cs, sum / ncpu, back, (unsigned long long)max);
	return back ? 1 : 0;
}
