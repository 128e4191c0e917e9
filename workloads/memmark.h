/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The memory model's snapshot request (lab/memmodel/): the 7-byte NOP nopl 0x4d4c00TT(%rax), TT the tag, which
 * the plugin recognises when it translates the instruction. A NOP on any x86-64 CPU, with or without the plugin.
 */
#ifndef MEMMARK_H
#define MEMMARK_H

#include <time.h>

static inline void memmark_begin(void) { __asm__ volatile(".byte 0x0f,0x1f,0x80,0x01,0x00,0x4c,0x4d" ::: "memory"); }
static inline void memmark_end(void) { __asm__ volatile(".byte 0x0f,0x1f,0x80,0x02,0x00,0x4c,0x4d" ::: "memory"); }
static inline void memmark_tick(void) { __asm__ volatile(".byte 0x0f,0x1f,0x80,0x03,0x00,0x4c,0x4d" ::: "memory"); }
static inline void memmark_sync(void) { __asm__ volatile(".byte 0x0f,0x1f,0x80,0x04,0x00,0x4c,0x4d" ::: "memory"); }

/*
 * The plugin counts from a begin to its end; turning counting on or off re-translates the guest's code, which
 * QEMU does asynchronously and one change at a time. A few sync marks after a begin or an end (10 ms apart)
 * make sure the change is asked for once the previous one is done.
 */
static inline void memmark_settle(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	for (int i = 0; i < 10; i++) {
		nanosleep(&ts, NULL);
		memmark_sync();
	}
}

#endif
