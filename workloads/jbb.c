/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * jbb: a SPECjbb-like throughput job: threads run order-processing transactions over a shared heap.
 *
 *   jbb [-t THREADS] [-W WAREHOUSES] [-m HEAP_MB] [-r SECONDS] [-w WARMUP_SECONDS] [-s SEED]
 *
 * The heap holds WAREHOUSES warehouses (default: one per thread), each with an item/stock table, a customer
 * table and a ring of recent orders; together about HEAP_MB megabytes. Thread i works mostly for warehouse
 * i % WAREHOUSES and initialises it (first touch), but 10% of the items of a new order and 15% of payments
 * go to another warehouse, so threads share memory the way the original's warehouses share a JVM heap.
 * Transaction mix: new order 45%, payment 43%, order status 4%, delivery 4%, stock level 4%. New orders
 * allocate an order object (malloc) and the ring frees the oldest. Locks are striped per warehouse.
 * Two instances run side by side model the two-JVM SPECjbb runs of the NUMA balancing papers.
 *
 * Output: "jbb_ops_per_s: N" (transactions per second over the measured window) and per-kind counts; and where
 * it ran and where its memory is: "jbb_home_node: N" (the node on which its threads did most transactions in
 * the window, from sched_getcpu() every 256 transactions), "jbb_node_ops_share: F" (their share on that node)
 * and "jbb_mem_local: F" (share of the resident pages of its item and customer tables on that node at the end
 * of the window, asked of the kernel with move_pages(2) and nodes = NULL, which only queries).
 * For instances bigger than a node (van Riel 2014's spanning case) also: "jbb_active_nodes: N" (the
 * nodes that took >= 10% of its transactions, "nodes=" their list), "jbb_wh_local: F" (share of the resident
 * pages of each warehouse's tables on its own node, the node where the threads working for that warehouse did
 * most transactions; over all warehouses), "jbb_inactive_share: F" (share of those pages on nodes that are not
 * active) and "jbb_migrated_mb: F" (rise of pgmigrate_success in /proc/vmstat over warm-up and window,
 * system-wide). With -s K every line of these four ends in " instance=K".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "numa_sysfs.h"

#define STRIPES 64
#define MAX_NODES 64
#define MAX_CPUS 4096
#define RING 4096
#define CUSTOMERS_PER_WH 3000

struct item {
	double price;
	int32_t stock;
	int32_t ytd;
	int32_t order_cnt;
	int32_t remote_cnt;
	char data[40];
};

struct customer {
	double balance;
	double ytd_payment;
	int32_t payment_cnt;
	int32_t delivery_cnt;
	int32_t last_order;
	char data[36];
};

struct order {
	int32_t id, customer, nr_lines, delivered;
	double total;
	struct {
		int32_t wh, item, qty;
		double amount;
	} line[15];
};

struct warehouse {
	pthread_mutex_t lock[STRIPES];
	double ytd;
	int32_t next_order;
	int32_t oldest_undelivered;
	long nr_items;
	struct item *items;
	struct customer *customers;
	struct order *ring[RING];
} __attribute__((aligned(64)));

static struct warehouse *wh;
static int nr_wh, nr_threads;
static long items_per_wh;
static _Atomic int stop, measuring;
static short cpu_node[MAX_CPUS];

/* Share of the resident pages of the warehouses' tables on `node`. */
static double heap_local(int node)
{
	long page = sysconf(_SC_PAGESIZE), n = 0, here = 0, present = 0;
	void **pages;
	int *status;

	for (int i = 0; i < nr_wh; i++)
		n += (long)(sizeof(struct item) * wh[i].nr_items / page + 2) +
		     (long)(sizeof(struct customer) * CUSTOMERS_PER_WH / page + 2);
	pages = malloc(sizeof(*pages) * n);
	status = malloc(sizeof(*status) * n);
	if (!pages || !status)
		return -1;
	n = 0;
	for (int i = 0; i < nr_wh; i++) {
		char *a = (char *)wh[i].items, *c = (char *)wh[i].customers;

		for (size_t off = 0; off < sizeof(struct item) * wh[i].nr_items; off += page)
			pages[n++] = a + off;
		for (size_t off = 0; off < sizeof(struct customer) * CUSTOMERS_PER_WH; off += page)
			pages[n++] = c + off;
	}
	if (syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status, 0) < 0)
		return -1;
	for (long k = 0; k < n; k++)
		if (status[k] >= 0) {
			present++;
			here += status[k] == node;
		}
	free(pages);
	free(status);
	return present ? (double)here / (double)present : -1;
}

/* Resident pages of [a, a + bytes) per node, added to per_node[]; returns how many were resident. */
static long pages_per_node(char *a, size_t bytes, long *per_node)
{
	long page = sysconf(_SC_PAGESIZE), n = (long)((bytes + (size_t)page - 1) / (size_t)page), present = 0;
	void **pages = malloc(sizeof(*pages) * (size_t)n);
	int *status = malloc(sizeof(*status) * (size_t)n);

	if (pages && status) {
		for (long k = 0; k < n; k++)
			pages[k] = a + (size_t)k * (size_t)page;
		if (syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status, 0) < 0)
			n = 0;
		for (long k = 0; k < n; k++)
			if (status[k] >= 0 && status[k] < MAX_NODES) {
				per_node[status[k]]++;
				present++;
			}
	}
	free(pages);
	free(status);
	return present;
}

enum { NEW_ORDER, PAYMENT, ORDER_STATUS, DELIVERY, STOCK_LEVEL, NR_KINDS };
static const char *kind_name[NR_KINDS] = {"new_order", "payment", "order_status", "delivery", "stock_level"};

struct thread {
	pthread_t th;
	int id, home;
	uint64_t rng;
	uint64_t count[NR_KINDS];
	uint64_t node_ops[MAX_NODES];
	pthread_barrier_t *ready;
} __attribute__((aligned(64)));

static uint64_t rnd(struct thread *t)
{
	/* xorshift64* */
	t->rng ^= t->rng >> 12;
	t->rng ^= t->rng << 25;
	t->rng ^= t->rng >> 27;
	return t->rng * 2685821657736338717ull;
}

static long rnd_below(struct thread *t, long n)
{
	return (long)(rnd(t) % (uint64_t)n);
}

static pthread_mutex_t *stripe(struct warehouse *w, long key)
{
	return &w->lock[key % STRIPES];
}

static int other_wh(struct thread *t)
{
	int w;

	if (nr_wh == 1)
		return t->home;
	do
		w = (int)rnd_below(t, nr_wh);
	while (w == t->home);
	return w;
}

static void init_warehouse(int i)
{
	struct warehouse *w = &wh[i];

	for (int s = 0; s < STRIPES; s++)
		pthread_mutex_init(&w->lock[s], NULL);
	w->nr_items = items_per_wh;
	w->items = malloc(sizeof(struct item) * items_per_wh);
	w->customers = malloc(sizeof(struct customer) * CUSTOMERS_PER_WH);
	if (!w->items || !w->customers) {
		fprintf(stderr, "jbb: out of memory\n");
		exit(1);
	}
	for (long k = 0; k < items_per_wh; k++) {
		memset(&w->items[k], 0, sizeof(struct item));
		w->items[k].price = 1.0 + (double)(k % 997) / 10.0;
		w->items[k].stock = 50 + (int)(k % 50);
	}
	for (long k = 0; k < CUSTOMERS_PER_WH; k++) {
		memset(&w->customers[k], 0, sizeof(struct customer));
		w->customers[k].balance = -10.0;
		w->customers[k].last_order = -1;
	}
}

static void new_order(struct thread *t)
{
	struct warehouse *w = &wh[t->home];
	struct order *o = malloc(sizeof(*o)), *old;
	int c = (int)rnd_below(t, CUSTOMERS_PER_WH);

	if (!o)
		return;
	o->customer = c;
	o->nr_lines = 5 + (int)rnd_below(t, 11);
	o->delivered = 0;
	o->total = 0;
	for (int l = 0; l < o->nr_lines; l++) {
		int ww = rnd_below(t, 10) == 0 ? other_wh(t) : t->home;
		struct warehouse *sw = &wh[ww];
		long it = rnd_below(t, sw->nr_items);
		int qty = 1 + (int)rnd_below(t, 10);
		struct item *item = &sw->items[it];

		pthread_mutex_lock(stripe(sw, it));
		item->stock = item->stock >= qty + 10 ? item->stock - qty : item->stock - qty + 91;
		item->ytd += qty;
		item->order_cnt++;
		if (ww != t->home)
			item->remote_cnt++;
		pthread_mutex_unlock(stripe(sw, it));
		o->line[l].wh = ww;
		o->line[l].item = (int32_t)it;
		o->line[l].qty = qty;
		o->line[l].amount = qty * item->price;
		o->total += o->line[l].amount;
	}
	pthread_mutex_lock(stripe(w, -1 + STRIPES));
	o->id = w->next_order++;
	old = w->ring[o->id % RING];
	w->ring[o->id % RING] = o;
	if (w->oldest_undelivered <= o->id - RING)
		w->oldest_undelivered = o->id - RING + 1;
	w->customers[c].last_order = o->id;
	pthread_mutex_unlock(stripe(w, -1 + STRIPES));
	free(old);
}

static void payment(struct thread *t)
{
	int ww = rnd_below(t, 100) < 15 ? other_wh(t) : t->home;
	struct warehouse *w = &wh[ww];
	long c = rnd_below(t, CUSTOMERS_PER_WH);
	double amount = 1.0 + (double)rnd_below(t, 500000) / 100.0;

	pthread_mutex_lock(stripe(w, c));
	w->customers[c].balance -= amount;
	w->customers[c].ytd_payment += amount;
	w->customers[c].payment_cnt++;
	pthread_mutex_unlock(stripe(w, c));
	pthread_mutex_lock(stripe(&wh[t->home], 0));
	wh[t->home].ytd += amount;
	pthread_mutex_unlock(stripe(&wh[t->home], 0));
}

static void order_status(struct thread *t)
{
	struct warehouse *w = &wh[t->home];
	long c = rnd_below(t, CUSTOMERS_PER_WH);
	double sum = 0;

	pthread_mutex_lock(stripe(w, -1 + STRIPES));
	int32_t id = w->customers[c].last_order;
	struct order *o = id >= 0 ? w->ring[id % RING] : NULL;

	if (o && o->id == id)
		for (int l = 0; l < o->nr_lines; l++)
			sum += o->line[l].amount;
	pthread_mutex_unlock(stripe(w, -1 + STRIPES));
	if (sum < 0)
		fprintf(stderr, "jbb: negative order\n");
}

static void delivery(struct thread *t)
{
	struct warehouse *w = &wh[t->home];

	pthread_mutex_lock(stripe(w, -1 + STRIPES));
	for (int k = 0; k < 10 && w->oldest_undelivered < w->next_order; k++) {
		struct order *o = w->ring[w->oldest_undelivered % RING];

		if (o && !o->delivered) {
			o->delivered = 1;
			w->customers[o->customer].balance += o->total;
			w->customers[o->customer].delivery_cnt++;
		}
		w->oldest_undelivered++;
	}
	pthread_mutex_unlock(stripe(w, -1 + STRIPES));
}

static void stock_level(struct thread *t)
{
	struct warehouse *w = &wh[t->home];
	long start = rnd_below(t, w->nr_items), low = 0;

	for (long k = 0; k < 200; k++)
		if (w->items[(start + k * 7) % w->nr_items].stock < 20)
			low++;
	if (low < 0)
		fprintf(stderr, "jbb: impossible\n");
}

static void *thread_main(void *arg)
{
	struct thread *t = arg;

	/* The first thread of each warehouse initialises it, so it sits on that thread's node. */
	if (t->id < nr_wh)
		init_warehouse(t->id);
	pthread_barrier_wait(t->ready);
	while (!atomic_load(&stop)) {
		long r = rnd_below(t, 100);
		int kind = r < 45 ? NEW_ORDER : r < 88 ? PAYMENT : r < 92 ? ORDER_STATUS : r < 96 ? DELIVERY
											 : STOCK_LEVEL;
		int rec = atomic_load(&measuring);

		switch (kind) {
		case NEW_ORDER: new_order(t); break;
		case PAYMENT: payment(t); break;
		case ORDER_STATUS: order_status(t); break;
		case DELIVERY: delivery(t); break;
		default: stock_level(t); break;
		}
		if (rec) {
			t->count[kind]++;
			if (!(t->count[kind] & 255)) {
				int cpu = sched_getcpu();

				t->node_ops[cpu >= 0 && cpu < MAX_CPUS ? cpu_node[cpu] : 0] += 256;
			}
		}
	}
	return NULL;
}

/* The spanning figures (see the top): active nodes, warehouse pages on their own node and on inactive nodes. */
static void span_report(const struct thread *th, unsigned long long mig0, long instance)
{
	uint64_t ops[MAX_NODES] = {0}, sum = 0;
	long present = 0, local = 0, inactive = 0;
	int active[MAX_NODES] = {0}, nr_active = 0;
	char list[4 * MAX_NODES + 1] = "", tag[32] = "";

	for (int i = 0; i < nr_threads; i++)
		for (int n = 0; n < MAX_NODES; n++) {
			ops[n] += th[i].node_ops[n];
			sum += th[i].node_ops[n];
		}
	for (int n = 0; n < MAX_NODES; n++)
		if (sum && (double)ops[n] >= 0.10 * (double)sum) {
			active[n] = 1;
			nr_active++;
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%d", nr_active > 1 ? "," : "", n);
		}
	for (int w = 0; w < nr_wh; w++) {
		uint64_t wops[MAX_NODES] = {0};
		long on_node[MAX_NODES] = {0};
		int own = 0;

		/* the warehouse's own node: where the threads working for it did most transactions */
		for (int i = 0; i < nr_threads; i++)
			if (th[i].home == w)
				for (int n = 0; n < MAX_NODES; n++)
					wops[n] += th[i].node_ops[n];
		for (int n = 1; n < MAX_NODES; n++)
			if (wops[n] > wops[own])
				own = n;
		present += pages_per_node((char *)wh[w].items, sizeof(struct item) * wh[w].nr_items, on_node);
		present += pages_per_node((char *)wh[w].customers, sizeof(struct customer) * CUSTOMERS_PER_WH, on_node);
		local += on_node[own];
		for (int n = 0; n < MAX_NODES; n++)
			if (!active[n])
				inactive += on_node[n];
	}
	if (instance >= 0)
		snprintf(tag, sizeof(tag), " instance=%ld", instance);
	printf("jbb_active_nodes: %d nodes=%s%s\n", nr_active, list, tag);
	printf("jbb_wh_local: %.3f%s\n", present ? (double)local / (double)present : -1.0, tag);
	printf("jbb_inactive_share: %.3f%s\n", present ? (double)inactive / (double)present : -1.0, tag);
	printf("jbb_migrated_mb: %.1f%s\n",
	       (double)(vmstat("pgmigrate_success") - mig0) * (double)sysconf(_SC_PAGESIZE) / (1 << 20), tag);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double runtime = 10, warmup = 1, t0, t1;
	long heap_mb = 128;
	unsigned long seed = 1;
	unsigned long long mig0;
	long instance = -1;
	int opt;
	struct thread *th;
	pthread_barrier_t ready;
	uint64_t total = 0, per_kind[NR_KINDS] = {0}, node_ops[MAX_NODES] = {0}, node_sum = 0;
	int home = 0;
	double local;

	nr_threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	read_cpu_nodes(cpu_node, MAX_CPUS, NULL, MAX_NODES);
	nr_wh = 0;
	while ((opt = getopt(argc, argv, "t:W:m:r:w:s:")) != -1) {
		switch (opt) {
		case 't': nr_threads = atoi(optarg); break;
		case 'W': nr_wh = atoi(optarg); break;
		case 'm': heap_mb = atol(optarg); break;
		case 'r': runtime = atof(optarg); break;
		case 'w': warmup = atof(optarg); break;
		case 's':
			seed = strtoul(optarg, NULL, 0);
			instance = (long)seed;
			break;
		default:
			fprintf(stderr, "usage: jbb [-t THREADS] [-W WAREHOUSES] [-m HEAP_MB] [-r SECONDS] "
					"[-w WARMUP_SECONDS] [-s SEED]\n");
			return 2;
		}
	}
	if (!nr_wh)
		nr_wh = nr_threads;
	if (nr_threads < 1 || nr_wh < 1 || nr_wh > nr_threads || heap_mb < 1 || runtime <= 0) {
		fprintf(stderr, "jbb: bad arguments (need 1 <= WAREHOUSES <= THREADS)\n");
		return 2;
	}
	items_per_wh = heap_mb * 1024 * 1024 / nr_wh / (long)sizeof(struct item);
	if (items_per_wh < 1000)
		items_per_wh = 1000;
	printf("jbb: pid=%d threads=%d warehouses=%d heap_mb=%ld items_per_warehouse=%ld runtime_s=%g\n",
	       (int)getpid(), nr_threads, nr_wh, heap_mb, items_per_wh, runtime);
	fflush(stdout);
	wh = aligned_alloc(64, sizeof(*wh) * nr_wh);
	th = aligned_alloc(64, sizeof(*th) * nr_threads);
	if (!wh || !th)
		return 1;
	memset(wh, 0, sizeof(*wh) * nr_wh);
	memset(th, 0, sizeof(*th) * nr_threads);
	pthread_barrier_init(&ready, NULL, (unsigned)nr_threads + 1);
	for (int i = 0; i < nr_threads; i++) {
		th[i].id = i;
		th[i].home = i % nr_wh;
		th[i].rng = (seed * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(i + 1) * 0xBF58476D1CE4E5B9ull);
		th[i].ready = &ready;
		if (pthread_create(&th[i].th, NULL, thread_main, &th[i])) {
			perror("jbb: pthread_create");
			return 1;
		}
	}
	pthread_barrier_wait(&ready);
	mig0 = vmstat("pgmigrate_success");
	usleep((useconds_t)(warmup * 1e6));
	atomic_store(&measuring, 1);
	t0 = now_s();
	usleep((useconds_t)(runtime * 1e6));
	atomic_store(&measuring, 0);
	t1 = now_s();
	atomic_store(&stop, 1);
	for (int i = 0; i < nr_threads; i++)
		pthread_join(th[i].th, NULL);
	for (int i = 0; i < nr_threads; i++)
		for (int n = 0; n < MAX_NODES; n++) {
			node_ops[n] += th[i].node_ops[n];
			node_sum += th[i].node_ops[n];
		}
	for (int n = 1; n < MAX_NODES; n++)
		if (node_ops[n] > node_ops[home])
			home = n;
	local = heap_local(home);
	for (int i = 0; i < nr_threads; i++) {
		for (int k = 0; k < NR_KINDS; k++) {
			per_kind[k] += th[i].count[k];
			total += th[i].count[k];
		}
	}
	for (int k = 0; k < NR_KINDS; k++)
		printf("jbb_%s: %llu\n", kind_name[k], (unsigned long long)per_kind[k]);
	printf("jbb_ops_per_s: %.1f\n", (double)total / (t1 - t0));
	printf("jbb_home_node: %d\n", home);
	printf("jbb_node_ops_share: %.3f\n", node_sum ? (double)node_ops[home] / (double)node_sum : 0.0);
	printf("jbb_mem_local: %.3f\n", local);
	span_report(th, mig0, instance);
	return total ? 0 : 1;
}
