/* SPDX-License-Identifier: MIT */
/* <string.h> for NVRTC: memcpy and memset are device built-ins, the only
 * <string.h> functions device code can call under nvcc too.  This header
 * gives size_t and NULL with them. */
#ifndef BARECUDA_STRING_H
#define BARECUDA_STRING_H
#include <stddef.h>
#endif
