/* SPDX-License-Identifier: MIT */
/* <stddef.h> for NVRTC: size_t, ptrdiff_t and NULL are NVRTC built-ins;
 * offsetof and max_align_t are added. */
#ifndef BARECUDA_STDDEF_H
#define BARECUDA_STDDEF_H

#ifndef NULL
#define NULL 0
#endif

#ifndef offsetof
/* The member's distance from a (never dereferenced) null object. */
#define offsetof(type, member) ((size_t)((char *)&(((type *)0)->member) - (char *)0))
#endif

#ifndef BARECUDA_HAVE_MAX_ALIGN_T
#define BARECUDA_HAVE_MAX_ALIGN_T
typedef struct { alignas(16) long long bc_ll; alignas(16) double bc_d; } max_align_t;
#endif

#endif
