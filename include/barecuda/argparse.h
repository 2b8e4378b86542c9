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

/* Host memory must hold plain data: TypeError when `obj` is a NumPy array whose
 * dtype holds Python object references (copying those would copy raw pointers),
 * or when `view` (may be NULL; exported with PyBUF_FORMAT) has an 'O' format.
 * `fn` and `what` name the call and the argument in the message. */
int bc_arg_plain_host(PyObject *obj, const Py_buffer *view, const char *fn, const char *what);

#endif
