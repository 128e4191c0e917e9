// SPDX-License-Identifier: GPL-2.0-only
/*
 * memwalk: touches one word of every 64-byte line of a buffer, over and over; the memory model's yardstick.
 *
 *   memwalk -k KB [-s SECONDS] [-c CPU[,CPU...]] [-w] [-S [-T]] [-M]
 *
 * One thread per CPU of -c (pinned there; default: one thread, not pinned) walks a KB-kilobyte buffer in address
 * order for SECONDS (default 3), reading each line's first word, or with -w storing to it (one access per line either way). Each thread has its own
 * buffer, first touched by itself, unless -S gives all of them one buffer, touched by the main thread. Where the
 * memory lives is left to the caller (numactl --membind). With one access per line, a buffer that fits the
 * modeled LLC hits after its first pass, and one larger than the LLC misses on every access (LRU, in order).
 * The buffer is filled with ones, not zeros: a zeroed malloc may become calloc, whose untouched pages all map
 * the kernel's shared zero page, so every read would go to one page on one node.
 * -T (with -S) makes the threads take turns: one whole pass each, in thread order, so that every pass finds the
 * buffer last written by another thread whether or not their CPUs run at the same time.
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
	int id;
	int cpu;
	unsigned long passes;
};

/* -T: whose pass it is, and whether time is up; under one mutex. */
static int turns, nr_threads, turn, done;
static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cond = PTHREAD_COND_INITIALIZER;

/* Wait for this thread's turn; false once time is up. */
static int take_turn(int id)
{
	pthread_mutex_lock(&turn_lock);
	while (turn != id && !done)
		pthread_cond_wait(&turn_cond, &turn_lock);
	int go = !done;
	pthread_mutex_unlock(&turn_lock);
	return go;
}

static void pass_turn(int id, int last)
{
	pthread_mutex_lock(&turn_lock);
	turn = (id + 1) % nr_threads;
	done |= last;
	pthread_cond_broadcast(&turn_cond);
	pthread_mutex_unlock(&turn_lock);
}

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
	while (turns ? take_turn(w->id) : now() < end) {
		if (store)
			for (size_t off = 0; off < len; off += LINE)
				*(volatile unsigned long *)(buf + off) = passes;
		else
			for (size_t off = 0; off < len; off += LINE)
				sum += *(volatile unsigned long *)(buf + off);
		passes++;
		if (turns)
			pass_turn(w->id, now() >= end);
	}
	w->passes = passes;
	if (sum == 1)
		fprintf(stderr, "memwalk: (keeps the reads)\n");
	return NULL;
}

static int usage(void)
{
	fprintf(stderr, "usage: memwalk -k KB [-s SECONDS] [-c CPU[,CPU...]] [-w] [-S [-T]] [-M]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct worker w[MAX_THREADS];
	int nr = 0, share = 0, marks = 0, opt;
	char *cpus = NULL;
	while ((opt = getopt(argc, argv, "k:s:c:wSTM")) != -1) {
		switch (opt) {
		case 'k': bytes = strtoul(optarg, NULL, 10) * 1024; break;
		case 's': seconds = atof(optarg); break;
		case 'c': cpus = optarg; break;
		case 'w': writes = 1; break;
		case 'S': share = 1; break;
		case 'M': marks = 1; break;
		case 'T': turns = 1; break;
		default: return usage();
		}
	}
	if (bytes < LINE || seconds <= 0 || (turns && !share))
		return usage();
	if (cpus) {
		for (char *tok = strtok(cpus, ","); tok && nr < MAX_THREADS; tok = strtok(NULL, ","))
			w[nr] = (struct worker){ .id = nr, .cpu = atoi(tok) }, nr++;
	} else {
		w[nr++] = (struct worker){ .id = 0, .cpu = -1 };
	}
	nr_threads = nr;
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
	if (marks) {
		memmark_end();
		memmark_settle();
	}
	printf("memwalk_passes: %lu\n", passes);
	return 0;
}
