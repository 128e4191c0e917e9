/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * heartbeat.bpf.h - the periodic timer of heartbeat.bpf.c.
 */
#ifndef __LOCALITY_HEARTBEAT_BPF_H
#define __LOCALITY_HEARTBEAT_BPF_H

#include "locality.bpf.h"

s32 heartbeat_start(void);

#endif /* __LOCALITY_HEARTBEAT_BPF_H */
