// SPDX-License-Identifier: GPL-2.0-only
/*
 * memmark: asks the lab's memory model (lab/memmodel/, a QEMU TCG plugin) for a snapshot of its counters.
 *
 *   memmark begin | end           one snapshot, tagged
 *   memmark tick [-p MS]          a tick snapshot every MS ms (default 1000) until killed
 *
 * The request is memmark.h's marker NOP, harmless without the plugin.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memmark.h"


static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }

static int usage(void)
{
	fprintf(stderr, "usage: memmark begin | end | tick [-p MS]\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	if (!strcmp(argv[1], "begin")) {
		memmark_begin();
		memmark_settle();
		return 0;
	}
	if (!strcmp(argv[1], "end")) {
		memmark_end();
		memmark_settle();
		return 0;
	}
	if (strcmp(argv[1], "tick"))
		return usage();
	long ms = 1000;
	if (argc == 4 && !strcmp(argv[2], "-p"))
		ms = atol(argv[3]);
	else if (argc != 2)
		return usage();
	if (ms <= 0)
		return usage();
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (!stop) {
		if (nanosleep(&ts, NULL) == 0 && !stop)
			memmark_tick();
	}
	return 0;
}
