/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rules.h - what the pure-rule headers (*_rules.h) need, compiled as BPF
 * or as host C.
 *
 * A pure rule is a static inline function of plain values (and of arrays
 * of them, filled by its caller): no maps, no helpers, no globals; knobs
 * and modes come in as arguments. The one that
 * writes, numa_rule_claim(), updates only the counter it is given. The BPF units
 * read their globals and call the rules; build.rs also compiles the rules
 * for the host (rules_host.c), where the agent's unit tests call the same
 * functions (src/rules.rs). So the tested rule is the scheduled one.
 */
#ifndef __LOCALITY_RULES_H
#define __LOCALITY_RULES_H

#ifdef __bpf__
#include <scx/common.bpf.h>	/* u32, s32, u64, s64, bool, __always_inline */
#else
#include <stdbool.h>
#include <stdint.h>
typedef uint32_t u32;
typedef int32_t s32;
typedef uint64_t u64;
typedef int64_t s64;
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#endif

#include "intf.h"

/*
 * A loop over [@start, @end) in a rule: bpf_for() in BPF (an open-coded
 * iterator: the verifier checks its body once, whatever the bound), a
 * plain for loop on the host. A rule indexes its arrays only below their
 * MAX_* size, which it checks itself.
 */
#ifdef __bpf__
#define rules_for(i, start, end) bpf_for(i, start, end)
#else
#define rules_for(i, start, end) for ((i) = (start); (i) < (end); (i)++)
#endif

#endif /* __LOCALITY_RULES_H */
