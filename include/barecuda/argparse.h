/* SPDX-License-Identifier: MIT */
/* Small argument converters shared by every concept (src/argparse.c).
 * Each returns 0, or -1 with TypeError/ValueError naming `what`. */
#ifndef BC_ARGPARSE_H
#define BC_ARGPARSE_H

#include "common.h"

/* A non-negative int that fits size_t ("what must not be negative", "is too large"). */
int bc_arg_size(PyObject *arg, const char *what, size_t *out);
/* An int in [lo, hi]. */
int bc_arg_long(PyObject *arg, const char *what, long long lo, long long hi, long long *out);
/* An unsigned flag word: int, no bits outside `allowed`. */
int bc_arg_flags(PyObject *arg, const char *what, unsigned int allowed, unsigned int *out);

#endif
