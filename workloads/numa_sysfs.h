/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numa_sysfs.h: what several workloads read about the machine and the kernel, each a few lines of plain libc.
 *
 * read_cpu_nodes(): the node of each CPU and the CPUs of each node, from /sys/devices/system/node/node<N>/cpulist
 * (CPUs of no node read as node 0); returns the number of nodes, one past the highest node seen, at least 1.
 * vmstat(): one counter of /proc/vmstat, 0 if absent.
 * sched_nr_migrations(): se.nr_migrations from the text of a task's /proc sched file, -1 if absent.
 */
#ifndef NUMA_SYSFS_H
#define NUMA_SYSFS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int read_cpu_nodes(short *cpu_node, int max_cpus, int *node_nr_cpus, int max_nodes)
{
	int nr_nodes = 0;

	for (int n = 0; n < max_nodes; n++) {
		char path[96], line[4096], *p;
		FILE *f;

		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", n);
		f = fopen(path, "r");
		if (!f)
			continue;
		nr_nodes = n + 1;
		if (fgets(line, sizeof(line), f))
			for (p = line; *p && *p != '\n';) {
				long a = strtol(p, &p, 10), b = a;

				if (*p == '-')
					b = strtol(p + 1, &p, 10);
				for (long c = a; c <= b && c < max_cpus; c++) {
					cpu_node[c] = (short)n;
					if (node_nr_cpus)
						node_nr_cpus[n]++;
				}
				if (*p == ',')
					p++;
			}
		fclose(f);
	}
	return nr_nodes ? nr_nodes : 1;
}

static inline unsigned long long vmstat(const char *name)
{
	char key[128];
	unsigned long long v, found = 0;
	FILE *f = fopen("/proc/vmstat", "r");

	if (!f)
		return 0;
	while (fscanf(f, "%127s %llu", key, &v) == 2)
		if (!strcmp(key, name)) {
			found = v;
			break;
		}
	fclose(f);
	return found;
}

static inline long sched_nr_migrations(const char *sched_text)
{
	const char *p = strstr(sched_text, "se.nr_migrations");

	if (!p)
		return -1;
	p = strchr(p, ':');
	return p ? atol(p + 1) : -1;
}

#endif
