/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The memory model's snapshot request (lab/memmodel/): the 7-byte NOP nopl 0x4d4c00TT(%rax), TT the tag, which
 * the plugin recognises when it translates the instruction. A NOP on any x86-64 CPU, with or without the plugin.
 */
#ifndef MEMMARK_H
#define MEMMARK_H

static inline void memmark_begin(void) { __asm__ volatile(".byte 0x0f,0x1f,0x80,0x01,0x00,0x4c,0x4d" ::: "memory"); }
static inline void memmark_end(void) { __asm__ volatile(".byte 0x0f,0x1f,0x80,0x02,0x00,0x4c,0x4d" ::: "memory"); }
static inline void memmark_tick(void) { __asm__ volatile(".byte 0x0f,0x1f,0x80,0x03,0x00,0x4c,0x4d" ::: "memory"); }

#endif
