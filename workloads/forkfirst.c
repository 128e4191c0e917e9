/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * forkfirst: where does a task forked on a full node first run?
 *
 *   forkfirst [-c CPU] [-n FORKS] [-w MS]
 *
 * Every CPU of CPU's node (default: node 0's last CPU) but CPU itself gets a spinner pinned to it; this
 * process pins itself to CPU and spins there too, so the node has no idle CPU. After -w MS (default 1500:
 * long enough for a scheduler's decayed load to see the node full), FORKS times (default 4): it checks it is
 * still on CPU, allows itself every CPU and forks at once, with no sleep between, so the fork's placement
 * starts from CPU. The child reads, before anything else, the CPU it runs on and how often the kernel has
 * migrated it (se.nr_migrations in /proc/self/sched: placing a new task at fork is not a migration, a move
 * from the queue it was put on is), and exits. The parent spins until the child has reported, then pins
 * itself back to CPU and spins 200 ms before the next fork. One line per fork:
 *
 *   forkfirst: PARENT_CPU CHILD_CPU CHILD_NODE MIGRATIONS
 *
 * A scheduler that pushes a new task off the full node puts the child on another node's CPU with 0
 * migrations; one that queues it near its parent runs it on this node, or on another only after a move.
 * Exit status 0, 1 on a bad argument, 2 when the machine cannot hold the case (one node, CPU outside it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "numa_sysfs.h"

#define MAX_CPUS 1024
#define MAX_NODES 64

static short cpu_node[MAX_CPUS];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void spin_for(double s)
{
	double end = now_s() + s;

	while (now_s() < end)
		;
}

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* se.nr_migrations of the calling task, -1 if /proc does not say */
static long own_migrations(void)
{
	char text[8192];
	size_t n;
	FILE *f = fopen("/proc/self/sched", "r");

	if (!f)
		return -1;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	return sched_nr_migrations(text);
}

int main(int argc, char **argv)
{
	int cpu = -1, forks = 4, warm_ms = 1500, nr_cpus, nr_nodes, opt;
	pid_t spinners[MAX_CPUS];
	int nr_spinners = 0, ret = 0;
	cpu_set_t all;

	while ((opt = getopt(argc, argv, "c:n:w:")) != -1) {
		switch (opt) {
		case 'c': cpu = atoi(optarg); break;
		case 'n': forks = atoi(optarg); break;
		case 'w': warm_ms = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: forkfirst [-c CPU] [-n FORKS] [-w MS]\n");
			return 1;
		}
	}
	if (forks < 1 || warm_ms < 0) {
		fprintf(stderr, "forkfirst: -n must be at least 1 and -w at least 0\n");
		return 1;
	}
	nr_cpus = (int)sysconf(_SC_NPROCESSORS_CONF);
	if (nr_cpus > MAX_CPUS)
		nr_cpus = MAX_CPUS;
	nr_nodes = read_cpu_nodes(cpu_node, nr_cpus, NULL, MAX_NODES);
	if (cpu < 0)
		for (int c = 0; c < nr_cpus; c++)
			if (cpu_node[c] == 0)
				cpu = c;
	if (nr_nodes < 2 || cpu < 0 || cpu >= nr_cpus) {
		fprintf(stderr, "forkfirst: needs a CPU of a machine with at least 2 nodes (nodes %d, CPU %d)\n",
			nr_nodes, cpu);
		return 2;
	}
	CPU_ZERO(&all);
	for (int c = 0; c < nr_cpus; c++)
		CPU_SET(c, &all);

	/* fill the rest of the node */
	for (int c = 0; c < nr_cpus; c++) {
		pid_t pid;

		if (c == cpu || cpu_node[c] != cpu_node[cpu])
			continue;
		pid = fork();
		if (pid < 0) {
			perror("forkfirst: fork");
			ret = 2;
			goto out;
		}
		if (!pid) {
			if (pin(c))
				_exit(3);
			for (;;)
				;
		}
		spinners[nr_spinners++] = pid;
	}
	if (pin(cpu)) {
		perror("forkfirst: sched_setaffinity");
		ret = 2;
		goto out;
	}
	spin_for(warm_ms / 1000.0);

	for (int i = 0; i < forks; i++) {
		int pfd[2], here;
		long fig[2];
		pid_t child;
		ssize_t got = 0;

		if (pipe2(pfd, O_NONBLOCK)) {
			perror("forkfirst: pipe");
			ret = 2;
			goto out;
		}
		if (sched_setaffinity(0, sizeof(all), &all)) {
			perror("forkfirst: sched_setaffinity");
			ret = 2;
			goto out;
		}
		/* a wider mask that still holds this CPU does not move the caller */
		here = sched_getcpu();
		child = fork();
		if (child < 0) {
			perror("forkfirst: fork");
			ret = 2;
			goto out;
		}
		if (!child) {
			long rep[2];

			rep[0] = sched_getcpu();
			rep[1] = own_migrations();
			_exit(write(pfd[1], rep, sizeof(rep)) == sizeof(rep) ? 0 : 3);
		}
		close(pfd[1]);	/* a child gone without a word reads as end of file */
		/* spin, never sleep: this CPU stays busy until the child has run */
		while (got < (ssize_t)sizeof(fig)) {
			ssize_t r = read(pfd[0], (char *)fig + got, sizeof(fig) - got);

			if (r > 0)
				got += r;
			else if (r == 0 || errno != EAGAIN)
				break;
		}
		waitpid(child, NULL, 0);
		close(pfd[0]);
		if (got != (ssize_t)sizeof(fig)) {
			fprintf(stderr, "forkfirst: child %d did not report\n", child);
			ret = 2;
			goto out;
		}
		printf("forkfirst: %d %ld %d %ld\n", here, fig[0],
		       fig[0] >= 0 && fig[0] < nr_cpus ? cpu_node[fig[0]] : -1, fig[1]);
		fflush(stdout);
		pin(cpu);
		spin_for(0.2);
	}
out:
	for (int k = 0; k < nr_spinners; k++)
		kill(spinners[k], SIGKILL);
	for (int k = 0; k < nr_spinners; k++)
		waitpid(spinners[k], NULL, 0);
	return ret;
}
