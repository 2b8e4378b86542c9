/* SPDX-License-Identifier: MIT */
/* <stdbool.h> for NVRTC: NVRTC compiles C++, where bool, true and false are
 * keywords; only the C feature macro is left to define. */
#ifndef BARECUDA_STDBOOL_H
#define BARECUDA_STDBOOL_H
#ifndef __bool_true_false_are_defined
#define __bool_true_false_are_defined 1
#endif
#endif
