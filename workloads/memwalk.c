// SPDX-License-Identifier: GPL-2.0-only
/*
 * memwalk: touches one word of every 64-byte line of a buffer, over and over; the memory model's yardstick.
 *
 *   memwalk -k KB [-s SECONDS] [-c CPU[,CPU...]] [-w] [-S] [-M]
 *
 * One thread per CPU of -c (pinned there; default: one thread, not pinned) walks a KB-kilobyte buffer in address
 * order for SECONDS (default 3), reading each line's first word, or with -w storing to it (one access per line either way). Each thread has its own
 * buffer, first touched by itself, unless -S gives all of them one buffer, touched by the main thread. Where the
 * memory lives is left to the caller (numactl --membind). With one access per line, a buffer that fits the
 * modeled LLC hits after its first pass, and one larger than the LLC misses on every access (LRU, in order).
 * The buffer is filled with ones, not zeros: a zeroed malloc may become calloc, whose untouched pages all map
 * the kernel's shared zero page, so every read would go to one page on one node.
 * -M asks the memory model for a begin snapshot once every buffer is filled and an end one when the walks are
 * over (memmark.h), so that its counts hold the walk alone: filling the buffer (rep stos) counts one access
 * per byte.
 * Prints "memwalk_passes: N", the passes of all threads.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memmark.h"

#define LINE 64
#define MAX_THREADS 64

static size_t bytes;
static double seconds = 3;
static int writes;
static volatile char *shared;
static pthread_barrier_t filled;

struct worker {
	pthread_t tid;
	int cpu;
	unsigned long passes;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *walk(void *arg)
{
	struct worker *w = arg;
	if (w->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(w->cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			perror("memwalk: sched_setaffinity");
			exit(1);
		}
	}
	volatile char *buf = shared;
	if (!buf) {
		buf = malloc(bytes);
		if (!buf) {
			perror("memwalk: malloc");
			exit(1);
		}
		memset((char *)buf, 1, bytes);
	}
	pthread_barrier_wait(&filled);
	/* Locals only inside the walk: its one access per line is the only memory access the loop makes. */
	const size_t len = bytes;
	const int store = writes;
	double end = now() + seconds;
	unsigned long sum = 0, passes = 0;
	while (now() < end) {
		if (store)
			for (size_t off = 0; off < len; off += LINE)
				*(volatile unsigned long *)(buf + off) = passes;
		else
			for (size_t off = 0; off < len; off += LINE)
				sum += *(volatile unsigned long *)(buf + off);
		passes++;
	}
	w->passes = passes;
	if (sum == 1)
		fprintf(stderr, "memwalk: (keeps the reads)\n");
	return NULL;
}

static int usage(void)
{
	fprintf(stderr, "usage: memwalk -k KB [-s SECONDS] [-c CPU[,CPU...]] [-w] [-S] [-M]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct worker w[MAX_THREADS];
	int nr = 0, share = 0, marks = 0, opt;
	char *cpus = NULL;
	while ((opt = getopt(argc, argv, "k:s:c:wSM")) != -1) {
		switch (opt) {
		case 'k': bytes = strtoul(optarg, NULL, 10) * 1024; break;
		case 's': seconds = atof(optarg); break;
		case 'c': cpus = optarg; break;
		case 'w': writes = 1; break;
		case 'S': share = 1; break;
		case 'M': marks = 1; break;
		default: return usage();
		}
	}
	if (bytes < LINE || seconds <= 0)
		return usage();
	if (cpus) {
		for (char *tok = strtok(cpus, ","); tok && nr < MAX_THREADS; tok = strtok(NULL, ","))
			w[nr++] = (struct worker){ .cpu = atoi(tok) };
	} else {
		w[nr++] = (struct worker){ .cpu = -1 };
	}
	if (share) {
		char *b = malloc(bytes);
		if (!b) {
			perror("memwalk: malloc");
			return 1;
		}
		memset(b, 1, bytes);
		shared = b;
	}
	pthread_barrier_init(&filled, NULL, nr + 1);
	for (int i = 0; i < nr; i++)
		if (pthread_create(&w[i].tid, NULL, walk, &w[i])) {
			perror("memwalk: pthread_create");
			return 1;
		}
	pthread_barrier_wait(&filled);
	if (marks)
		memmark_begin();
	unsigned long passes = 0;
	for (int i = 0; i < nr; i++) {
		pthread_join(w[i].tid, NULL);
		passes += w[i].passes;
	}
	if (marks)
		memmark_end();
	printf("memwalk_passes: %lu\n", passes);
	return 0;
}
