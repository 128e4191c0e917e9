/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memspan: one process whose threads need more than one node; where do its shared and private pages end up?
 *
 *   memspan [-t THREADS | -N NODES] [-S SHARED_MB] [-P PRIVATE_MB] [-r SECONDS] [-w WARMUP_SECONDS]
 *           [-i main|main-one-node|threads] [-s INSTANCE]
 *
 * The case of van Riel's 2014 "NUMA balancing for workloads that span nodes": a good placement
 * keeps each thread's private memory on its thread's node, spreads the shared memory over the nodes the
 * process runs on, leaves nothing on the nodes it does not run on, and migrates little.
 *
 * THREADS workers (default: as many as the first NODES nodes have CPUs, NODES = 2) read one SHARED_MB array
 * (default 128) and each has a PRIVATE_MB buffer (default 16) of its own. With -i main (the default, and the
 * hard case) the main thread first-touches the whole shared array before it starts the workers, so all of it
 * starts on the main thread's node, unless the scheduler moves the main thread to another node while it
 * touches; -i main-one-node binds the main thread to the CPUs of its node for the first touch only (its
 * affinity is restored before the workers start), so that all of it starts on one node whatever the
 * scheduler does; with -i threads worker i first-touches slice i of it. Every worker
 * first-touches its own private buffer (its own mapping, so no huge page straddles two of them). Then, for
 * WARMUP_SECONDS (default 1) and the measured SECONDS (default 20), every worker repeats one operation: a
 * read-modify-write pass over the next 64 KB of its private buffer, then 4096 reads at random places of the
 * shared array (over many operations every worker reads all of it); after each it notes the node it is on
 * (sched_getcpu). Apart from -i main-one-node's first touch, nothing in the program binds a thread, and
 * nothing in it moves a page: only the kernel or a scheduler can.
 *
 * At the end of the window, before anything is freed, the main thread asks the kernel the node of every page
 * (move_pages(2) with nodes = NULL only queries) and prints one figure a line, "name: value", with
 * " instance=K" appended when -s K is given so that concurrent instances can be told apart:
 *   memspan_shared_init_max    the largest share of the shared pages on one node right after the first touch
 *                              (with -i threads, after the workers' touches)
 *   memspan_ops_per_s          operations per second, all workers together
 *   memspan_mb_per_s           megabytes of private and shared memory touched per second
 *   memspan_thread_nodes       each worker's node: the one where it took most of its samples in the window
 *   memspan_active_nodes       how many nodes took >= 10% of all the workers' samples, then their list
 *   memspan_shared_node        per node: its shared pages, their share of the shared pages, active or not
 *   memspan_shared_imbalance   the largest share of the shared pages on one node times the number of active
 *                              nodes: 1.0 is an even spread over the active nodes, 2.0 with 2 active nodes
 *                              is all on one (a node that is not active counts too: all on it reads 2.0;
 *                              below 1.0 when part of the array sits on nodes that are not active)
 *   memspan_private_local      share of the private pages on their own worker's node (all workers)
 *   memspan_inactive_share     share of all the pages (shared and private) on nodes that are not active
 *   memspan_migrated_pages     rise of pgmigrate_success in /proc/vmstat from the end of the first touch to
 *   memspan_migrated_mb        the end of the window; system-wide: every process, the kernel's NUMA
 *                              balancing and move_pages(2) callers alike
 *   memspan_numa_hint_faults, memspan_numa_pages_migrated   the same rise of the kernel's NUMA balancing
 *                              counters (they move only for tasks of the fair class)
 * Shares count resident pages; a page that is not resident counts nowhere.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "numa_sysfs.h"

#define MAX_NODES 64
#define MAX_CPUS 4096
#define PRIVATE_CHUNK (64UL << 10) /* bytes of the private buffer one operation passes over */
#define SHARED_READS 4096	   /* random shared reads per operation */
#define ACTIVE_MIN 0.10		   /* a node with this share of the samples is active */

struct worker {
	pthread_t th;
	int id;
	uint64_t *priv;
	size_t priv_words, pos;
	uint64_t rng, sink, ops;
	uint64_t node_samples[MAX_NODES];
	int node; /* majority node, set by the main thread at the end */
} __attribute__((aligned(64)));

static uint64_t *shared;
static size_t shared_words, private_bytes;
static int nr_workers, init_threads, init_one_node, instance = -1, nr_nodes;
static short cpu_node[MAX_CPUS];
static int node_nr_cpus[MAX_NODES];
static pthread_barrier_t ready;
static _Atomic int stop, measuring;

static int current_node(void)
{
	int cpu = sched_getcpu();

	return cpu >= 0 && cpu < MAX_CPUS ? cpu_node[cpu] : 0;
}

/* A figure line; the instance is appended when -s was given. */
static void figure(const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (instance >= 0)
		printf(" instance=%d", instance);
	putchar('\n');
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("memspan: mmap");
		exit(1);
	}
	return p;
}

/* Writes every word of [a, a + n) (a page read before any write would map the shared zero page). */
static void touch(uint64_t *a, size_t n)
{
	for (size_t k = 0; k < n; k++)
		a[k] = k * 0x9E3779B97F4A7C15ull;
}

static uint64_t rnd(struct worker *w)
{
	/* xorshift64* */
	w->rng ^= w->rng >> 12;
	w->rng ^= w->rng << 25;
	w->rng ^= w->rng >> 27;
	return w->rng * 2685821657736338717ull;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	size_t chunk = PRIVATE_CHUNK / sizeof(uint64_t);

	w->priv = map(private_bytes);
	w->priv_words = private_bytes / sizeof(uint64_t);
	touch(w->priv, w->priv_words);
	if (init_threads) {
		size_t per = shared_words / (size_t)nr_workers, from = per * (size_t)w->id;
		size_t to = w->id == nr_workers - 1 ? shared_words : from + per;

		touch(shared + from, to - from);
	}
	pthread_barrier_wait(&ready);
	if (chunk > w->priv_words)
		chunk = w->priv_words;
	while (!atomic_load(&stop)) {
		uint64_t *p = w->priv + w->pos, sum = 0;

		for (size_t k = 0; k < chunk; k++)
			p[k] = p[k] * 3 + 1;
		w->pos = w->pos + 2 * chunk <= w->priv_words ? w->pos + chunk : 0;
		for (int k = 0; k < SHARED_READS; k++)
			sum += shared[rnd(w) % shared_words];
		w->sink += sum;
		if (atomic_load(&measuring)) {
			w->ops++;
			w->node_samples[current_node()]++;
		}
	}
	return NULL;
}

/* The node of each of n pages from a (move_pages with nodes = NULL), counted into per_node[]; the pages on
 * `own` (if >= 0) into *on_own. Returns the resident pages, or -1. */
static long count_pages(char *a, size_t bytes, long *per_node, int own, long *on_own)
{
	long page = sysconf(_SC_PAGESIZE), n = (long)((bytes + (size_t)page - 1) / (size_t)page), present = 0;
	void **pages = malloc(sizeof(*pages) * (size_t)n);
	int *status = malloc(sizeof(*status) * (size_t)n);

	if (!pages || !status)
		return -1;
	for (long k = 0; k < n; k++)
		pages[k] = a + (size_t)k * (size_t)page;
	if (syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status, 0) < 0) {
		perror("memspan: move_pages");
		present = -1;
		n = 0;
	}
	for (long k = 0; k < n; k++) {
		if (status[k] < 0 || status[k] >= MAX_NODES)
			continue;
		present++;
		per_node[status[k]]++;
		if (status[k] == own)
			(*on_own)++;
	}
	free(pages);
	free(status);
	return present;
}

/* Binds the calling thread to the CPUs of node @n it may use; its affinity before into *@was. */
static void bind_to_node(int n, cpu_set_t *was)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(*was), was)) {
		perror("memspan: sched_getaffinity");
		exit(1);
	}
	CPU_ZERO(&set);
	for (int c = 0; c < MAX_CPUS && c < CPU_SETSIZE; c++)
		if (cpu_node[c] == n && CPU_ISSET(c, was))
			CPU_SET(c, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("memspan: sched_setaffinity");
		exit(1);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: memspan [-t THREADS | -N NODES] [-S SHARED_MB] [-P PRIVATE_MB] [-r SECONDS] "
			"[-w WARMUP_SECONDS] [-i|--init main|main-one-node|threads] [-s INSTANCE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"init", required_argument, NULL, 'i'}, {NULL, 0, NULL, 0}};
	double runtime = 20, warmup = 1, t0, t1;
	long shared_mb = 128, private_mb = 16, span_nodes = 2;
	long shared_nodes[MAX_NODES] = {0}, private_nodes[MAX_NODES] = {0}, dummy = 0, private_own = 0;
	long init_nodes[MAX_NODES] = {0};
	long shared_present, private_present = 0, inactive = 0;
	uint64_t samples[MAX_NODES] = {0}, nr_samples = 0, ops = 0;
	unsigned long long mig0, hint0, numa0;
	int opt, active[MAX_NODES] = {0}, nr_active = 0, init_node;
	struct worker *w;
	char list[4 * MAX_NODES + 1] = "";
	double imbalance = 0, bytes_per_op;
	const char *init_name = "main";
	cpu_set_t was;

	nr_nodes = read_cpu_nodes(cpu_node, MAX_CPUS, node_nr_cpus, MAX_NODES);
	nr_workers = 0;
	while ((opt = getopt_long(argc, argv, "t:N:S:P:r:w:i:s:", longopts, NULL)) != -1) {
		switch (opt) {
		case 't': nr_workers = atoi(optarg); break;
		case 'N': span_nodes = atol(optarg); break;
		case 'S': shared_mb = atol(optarg); break;
		case 'P': private_mb = atol(optarg); break;
		case 'r': runtime = atof(optarg); break;
		case 'w': warmup = atof(optarg); break;
		case 'i':
			if (!strcmp(optarg, "threads"))
				init_threads = 1;
			else if (!strcmp(optarg, "main-one-node"))
				init_one_node = 1;
			else if (strcmp(optarg, "main"))
				usage();
			init_name = optarg;
			break;
		case 's': instance = atoi(optarg); break;
		default: usage();
		}
	}
	if (!nr_workers)
		for (int n = 0, seen = 0; n < nr_nodes && seen < span_nodes; n++)
			if (node_nr_cpus[n]) {
				nr_workers += node_nr_cpus[n];
				seen++;
			}
	if (nr_workers < 1 || shared_mb < 1 || private_mb < 1 || runtime <= 0 || warmup < 0) {
		fprintf(stderr, "memspan: bad arguments\n");
		return 2;
	}
	shared_words = ((size_t)shared_mb << 20) / sizeof(uint64_t);
	private_bytes = (size_t)private_mb << 20;
	printf("memspan: pid=%d threads=%d shared_mb=%ld private_mb=%ld init=%s runtime_s=%g nodes=%d",
	       (int)getpid(), nr_workers, shared_mb, private_mb, init_name, runtime, nr_nodes);
	if (instance >= 0)
		printf(" instance=%d", instance);
	putchar('\n');
	fflush(stdout);

	shared = map(shared_words * sizeof(uint64_t));
	if (init_one_node)
		bind_to_node(current_node(), &was);
	if (!init_threads)
		touch(shared, shared_words);
	init_node = current_node();
	if (init_one_node && sched_setaffinity(0, sizeof(was), &was)) {
		perror("memspan: sched_setaffinity");
		return 1;
	}
	w = aligned_alloc(64, sizeof(*w) * (size_t)nr_workers);
	if (!w)
		return 1;
	memset(w, 0, sizeof(*w) * (size_t)nr_workers);
	pthread_barrier_init(&ready, NULL, (unsigned)nr_workers + 1);
	for (int i = 0; i < nr_workers; i++) {
		w[i].id = i;
		w[i].rng = ((uint64_t)(instance + 2) * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(i + 1) * 0xBF58476D1CE4E5B9ull);
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i])) {
			perror("memspan: pthread_create");
			return 1;
		}
	}
	pthread_barrier_wait(&ready);
	/* where the first touch left the shared array (a query: no page moves) */
	if (count_pages((char *)shared, shared_words * sizeof(uint64_t), init_nodes, -1, &dummy) > 0) {
		long present = 0, most = 0;

		for (int n = 0; n < MAX_NODES; n++) {
			present += init_nodes[n];
			most = init_nodes[n] > most ? init_nodes[n] : most;
		}
		figure("memspan_shared_init_max", "%.3f", (double)most / (double)present);
	}
	mig0 = vmstat("pgmigrate_success");
	hint0 = vmstat("numa_hint_faults");
	numa0 = vmstat("numa_pages_migrated");
	usleep((useconds_t)(warmup * 1e6));
	atomic_store(&measuring, 1);
	t0 = now_s();
	usleep((useconds_t)(runtime * 1e6));
	atomic_store(&measuring, 0);
	t1 = now_s();
	atomic_store(&stop, 1);
	for (int i = 0; i < nr_workers; i++)
		pthread_join(w[i].th, NULL);

	/* Where the workers ran: each one's majority node, and the active nodes of the process. */
	for (int i = 0; i < nr_workers; i++) {
		w[i].node = 0;
		for (int n = 0; n < MAX_NODES; n++) {
			samples[n] += w[i].node_samples[n];
			nr_samples += w[i].node_samples[n];
			if (w[i].node_samples[n] > w[i].node_samples[w[i].node])
				w[i].node = n;
		}
		ops += w[i].ops;
	}
	for (int n = 0; n < MAX_NODES; n++)
		if (nr_samples && (double)samples[n] >= ACTIVE_MIN * (double)nr_samples) {
			active[n] = 1;
			nr_active++;
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%d", nr_active > 1 ? "," : "", n);
		}

	/* Where the pages are. */
	shared_present = count_pages((char *)shared, shared_words * sizeof(uint64_t), shared_nodes, -1, &dummy);
	for (int i = 0; i < nr_workers; i++) {
		long p = count_pages((char *)w[i].priv, private_bytes, private_nodes, w[i].node, &private_own);

		private_present += p > 0 ? p : 0;
	}
	for (int n = 0; n < MAX_NODES; n++) {
		if (!active[n])
			inactive += shared_nodes[n] + private_nodes[n];
		if (shared_present > 0 && (double)shared_nodes[n] / (double)shared_present * nr_active > imbalance)
			imbalance = (double)shared_nodes[n] / (double)shared_present * nr_active;
	}

	bytes_per_op = (double)PRIVATE_CHUNK * 2 + SHARED_READS * (double)sizeof(uint64_t);
	figure("memspan_ops_per_s", "%.1f", (double)ops / (t1 - t0));
	figure("memspan_mb_per_s", "%.1f", (double)ops * bytes_per_op / (t1 - t0) / 1e6);
	printf("memspan_thread_nodes:");
	for (int i = 0; i < nr_workers; i++)
		printf("%s%d", i ? "," : " ", w[i].node);
	if (instance >= 0)
		printf(" instance=%d", instance);
	putchar('\n');
	figure("memspan_init_node", "%d", init_node);
	figure("memspan_active_nodes", "%d nodes=%s", nr_active, list);
	for (int n = 0; n < nr_nodes; n++)
		figure("memspan_shared_node", "%d pages=%ld share=%.3f active=%d", n, shared_nodes[n],
		       shared_present > 0 ? (double)shared_nodes[n] / (double)shared_present : 0.0, active[n]);
	figure("memspan_shared_imbalance", "%.3f", imbalance);
	figure("memspan_private_local", "%.3f",
	       private_present ? (double)private_own / (double)private_present : -1.0);
	figure("memspan_inactive_share", "%.3f",
	       shared_present + private_present > 0 ? (double)inactive / (double)(shared_present + private_present)
						     : -1.0);
	{
		unsigned long long mig = vmstat("pgmigrate_success") - mig0;

		figure("memspan_migrated_pages", "%llu", mig);
		figure("memspan_migrated_mb", "%.1f", (double)mig * (double)sysconf(_SC_PAGESIZE) / (1 << 20));
	}
	figure("memspan_numa_hint_faults", "%llu", vmstat("numa_hint_faults") - hint0);
	figure("memspan_numa_pages_migrated", "%llu", vmstat("numa_pages_migrated") - numa0);
	if (w[0].sink == 42) /* keeps the shared reads */
		putchar(' ');
	return ops ? 0 : 1;
}
