/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numajob: one CPU- and memory-bound job of a node-residency run (the shape of the 2003 numa_test: start N
 * such jobs at once, record on which node each one runs, and compare their run times).
 *
 *   numajob [-m MB] [-p PASSES] [-i ID]
 *
 * The job allocates MB megabytes and touches them first (so they land on the node it starts on), then makes
 * PASSES read-modify-write passes over them. It reports where its memory is, from /proc/self/numa_maps, and
 * how long the passes took:
 *   numajob id=ID pid=PID mem_pages=0:N0,1:N1,... elapsed_s=S
 * A job that spends its life away from its memory's node runs slower; that is what the residency table and
 * the run times show together.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_NODES 64

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Pages per node of the mapping that starts at addr, from /proc/self/numa_maps ("N<node>=<pages>"). */
static void mem_nodes(void *addr, long pages[MAX_NODES])
{
	char line[4096], want[32];
	FILE *f = fopen("/proc/self/numa_maps", "r");

	memset(pages, 0, sizeof(long) * MAX_NODES);
	if (!f)
		return;
	snprintf(want, sizeof(want), "%lx ", (unsigned long)(uintptr_t)addr);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, want, strlen(want)) != 0)
			continue;
		for (char *p = strstr(line, " N"); p; p = strstr(p + 1, " N")) {
			int node;
			long n;

			if (sscanf(p, " N%d=%ld", &node, &n) == 2 && node >= 0 && node < MAX_NODES)
				pages[node] += n;
		}
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	long mb = 64, passes = 20, pages[MAX_NODES];
	int opt, id = 0, first = 1;
	uint64_t *mem, sum = 0;
	size_t n;
	double t0, t1;

	while ((opt = getopt(argc, argv, "m:p:i:")) != -1) {
		switch (opt) {
		case 'm': mb = atol(optarg); break;
		case 'p': passes = atol(optarg); break;
		case 'i': id = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: numajob [-m MB] [-p PASSES] [-i ID]\n");
			return 2;
		}
	}
	if (mb < 1 || passes < 1) {
		fprintf(stderr, "numajob: bad arguments\n");
		return 2;
	}
	n = (size_t)mb * 1024 * 1024 / sizeof(uint64_t);
	mem = mmap(NULL, n * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("numajob: mmap");
		return 1;
	}
	t0 = now_s();
	for (size_t i = 0; i < n; i++)
		mem[i] = i;
	for (long p = 0; p < passes; p++)
		for (size_t i = 0; i < n; i += 8) /* one 64-byte line per step */
			sum += mem[i]++;
	t1 = now_s();
	mem_nodes(mem, pages);
	printf("numajob id=%d pid=%d sum=%llu mem_pages=", id, (int)getpid(), (unsigned long long)(sum & 0xffff));
	for (int i = 0; i < MAX_NODES; i++)
		if (pages[i]) {
			printf("%s%d:%ld", first ? "" : ",", i, pages[i]);
			first = 0;
		}
	printf(" elapsed_s=%.3f\n", t1 - t0);
	return 0;
}
