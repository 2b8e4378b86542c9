/* SPDX-License-Identifier: MIT */
/* <sys/types.h> for NVRTC: the short unsigned names (also force-included by
 * barecuda_prelude.h) and ssize_t. */
#ifndef BARECUDA_SYS_TYPES_H
#define BARECUDA_SYS_TYPES_H

#include <stddef.h>

typedef unsigned char u_char;
typedef unsigned short u_short;
typedef unsigned int u_int;
typedef unsigned long u_long;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef long ssize_t;

#endif
