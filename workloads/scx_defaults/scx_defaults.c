// SPDX-License-Identifier: GPL-2.0-only
/*
 * Loader of scx_defaults (defaults.bpf.c): attach the empty sched_ext_ops, stay until SIGINT or SIGTERM, detach.
 *   scx_defaults [--callbacks [--burn-us N]] [--queued-wakeups]
 * --callbacks attaches the same policy written as BPF callbacks (ops name "defaults_callbacks"), to measure what
 * calling BPF costs; --burn-us N makes each callback spin N microseconds as well (a policy's cost, without it).
 * --queued-wakeups attaches the empty ops with SCX_OPS_ALLOW_QUEUED_WAKEUP set (ops name "defaults_queued");
 * with --callbacks, the callbacks with that flag set (what calling BPF costs a scheduler that sets it).
 * Exit codes: 0 detached on a signal; 1 could not load or attach (or a wrong argument); 2 the kernel disabled
 * the scheduler.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

/* The BPF object, built beside this file and embedded here (see the Makefile). */
extern const char defaults_bpf_obj[], defaults_bpf_obj_end[];
__asm__(".section .rodata\n.balign 8\n.global defaults_bpf_obj\ndefaults_bpf_obj:\n"
	".incbin \"" BPF_OBJ "\"\n.global defaults_bpf_obj_end\ndefaults_bpf_obj_end:\n.previous\n");

/* The ops maps of defaults.bpf.c, one per variant, and what each runs. */
enum variant { PLAIN, CALLBACKS, QUEUED, NR_VARIANTS };
static const struct {
	const char *map, *what;
} variants[NR_VARIANTS] = {
	[PLAIN] = { "defaults_ops", "sched_ext with no callbacks" },
	[CALLBACKS] = { "callbacks_ops", "the built-in policy as BPF callbacks" },
	[QUEUED] = { "queued_ops", "sched_ext with no callbacks, queued wake-ups" },
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* The kernel's sched_ext state: "enabling", then "enabled" while a BPF scheduler runs. */
static int sched_ext_running(void)
{
	char buf[32] = "";
	FILE *f = fopen("/sys/kernel/sched_ext/state", "r");

	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return strncmp(buf, "enabled", 7) == 0 || strncmp(buf, "enabling", 8) == 0;
}

/* SCX_OPS_ALLOW_QUEUED_WAKEUP, as in the kernel's enum scx_ops_flags */
#define OPS_ALLOW_QUEUED_WAKEUP (1ULL << 5)

/*
 * Set SCX_OPS_ALLOW_QUEUED_WAKEUP in the flags of the ops map @ops before load. The member's offset is read
 * from the object's BTF (the struct as defaults.bpf.c compiled it), so no copy of the kernel's layout lives here.
 */
static int set_queued_flag(struct bpf_object *obj, struct bpf_map *ops)
{
	const struct btf *btf = bpf_object__btf(obj);
	const struct btf_type *t;
	const struct btf_member *m;
	size_t sz = 0;
	char *data = ops ? bpf_map__initial_value(ops, &sz) : NULL;
	int id, i;

	id = btf ? btf__find_by_name_kind(btf, "sched_ext_ops", BTF_KIND_STRUCT) : -1;
	if (!data || id < 0)
		return -1;
	t = btf__type_by_id(btf, id);
	m = btf_members(t);
	for (i = 0; i < btf_vlen(t); i++, m++) {
		unsigned int off = btf_member_bit_offset(t, i) / 8;

		if (strcmp(btf__name_by_offset(btf, m->name_off), "flags") || off + 8 > sz)
			continue;
		*(unsigned long long *)(data + off) |= OPS_ALLOW_QUEUED_WAKEUP;
		return 0;
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_map *ops, *unused;
	struct bpf_link *link;
	enum variant use = PLAIN;
	bool callbacks = false, queued = false;
	unsigned long long burn_us = 0;
	char *end = NULL;
	int err, rc = 0, i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--callbacks") == 0) {
			callbacks = true;
		} else if (strcmp(argv[i], "--queued-wakeups") == 0) {
			queued = true;
		} else if (strcmp(argv[i], "--burn-us") == 0 && i + 1 < argc) {
			errno = 0;
			burn_us = strtoull(argv[++i], &end, 10);
			if (errno || !end || *end || burn_us > 1000000) {
				fprintf(stderr, "scx_defaults: --burn-us takes 0 to 1000000 microseconds\n");
				return 1;
			}
		} else {
			fprintf(stderr, "usage: scx_defaults [--callbacks [--burn-us N]] [--queued-wakeups]\n");
			return 1;
		}
	}
	use = callbacks ? CALLBACKS : queued ? QUEUED : PLAIN;
	if (burn_us && use != CALLBACKS) {
		fprintf(stderr, "scx_defaults: --burn-us needs --callbacks (without callbacks nothing runs to spin)\n");
		return 1;
	}

	obj = bpf_object__open_mem(defaults_bpf_obj, defaults_bpf_obj_end - defaults_bpf_obj, NULL);
	if (!obj) {
		fprintf(stderr, "scx_defaults: cannot open the BPF object: %s\n", strerror(errno));
		return 1;
	}
	/* only the chosen ops are created; the others' programs are then not loaded either */
	for (i = 0; i < NR_VARIANTS; i++) {
		if (i == (int)use)
			continue;
		unused = bpf_object__find_map_by_name(obj, variants[i].map);
		if (unused)
			bpf_map__set_autocreate(unused, false);
	}
	if (burn_us) {
		struct bpf_map *ro = bpf_object__find_map_by_name(obj, ".rodata");
		size_t sz = 0;
		unsigned long long *v = ro ? bpf_map__initial_value(ro, &sz) : NULL;

		if (!v || sz < sizeof(*v)) {
			fprintf(stderr, "scx_defaults: the BPF object has no burn_ns to set\n");
			bpf_object__close(obj);
			return 1;
		}
		*v = burn_us * 1000;
	}
	if (callbacks && queued &&
	    set_queued_flag(obj, bpf_object__find_map_by_name(obj, variants[use].map))) {
		fprintf(stderr, "scx_defaults: cannot set the queued wake-up flag of the callbacks\n");
		bpf_object__close(obj);
		return 1;
	}
	err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "scx_defaults: cannot load the BPF object: %s\n", strerror(-err));
		return 1;
	}
	ops = bpf_object__find_map_by_name(obj, variants[use].map);
	link = ops ? bpf_map__attach_struct_ops(ops) : NULL;
	if (!link) {
		fprintf(stderr, "scx_defaults: cannot attach sched_ext_ops: %s\n", strerror(errno));
		bpf_object__close(obj);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("scx_defaults: attached (%s%s)\n", variants[use].what,
	       callbacks && queued ? ", queued wake-ups" : "");
	fflush(stdout);
	while (!stop) {
		if (!sched_ext_running()) {
			fprintf(stderr, "scx_defaults: the kernel disabled the scheduler (see the kernel log)\n");
			rc = 2;
			break;
		}
		sleep(1);
	}
	bpf_link__destroy(link);
	bpf_object__close(obj);
	return rc;
}
