/* SPDX-License-Identifier: MIT */
/* Kernel-argument packing (src/argpack.c), for the launches of src/function.c:
 * the launch shape, __call__'s arguments, prepare()'s signature and prepared
 * arguments, each into the bytes of one cuLaunchKernel parameter buffer. */
#ifndef BC_ARGPACK_H
#define BC_ARGPACK_H

#include "module.h"

/* A parameter buffer: on the stack up to BC_ARGS_STACK bytes, then the heap. */
typedef struct {
    char *buf;
    size_t size; /* bytes used */
    size_t cap;
    PyObject *handlers; /* argument handlers (In/Out/InOut ...) met, or NULL */
    uint64_t stack[BC_ARGS_STACK / 8];
} bc_packbuf;

static inline void
bc_packbuf_init(bc_packbuf *pb)
{
    pb->buf = (char *)pb->stack;
    pb->size = 0;
    pb->cap = sizeof pb->stack;
    pb->handlers = NULL;
}

static inline void
bc_packbuf_free(bc_packbuf *pb)
{
    if (pb->buf != (char *)pb->stack)
        PyMem_Free(pb->buf);
    pb->buf = (char *)pb->stack;
    Py_CLEAR(pb->handlers);
}

/* Room for `need` bytes (keeps what is packed); 0, or -1 with MemoryError. */
int bc_packbuf_reserve(bc_packbuf *pb, size_t need);

/* A (x[, y[, z]]) tuple or list (or one int) into d[3], missing ones 1. */
int bc_args_dims(PyObject *obj, const char *what, unsigned int d[3]);
/* grid (NULL or None: (1, 1, 1)) and block (required), checked against the
 * hardware limits and f's threads-per-block limit. */
int bc_args_parse_launch_dims(bc_Function *f, PyObject *grid, PyObject *block, unsigned int g[3],
                              unsigned int b[3]);
/* The same, inline where a loop passes the grid and block it passed last time
 * (the values remembered on f by bc_args_parse_launch_dims). */
static inline int
bc_args_launch_dims(bc_Function *f, PyObject *grid, PyObject *block, unsigned int g[3],
                    unsigned int b[3])
{
    if (block != NULL && block == f->dims_block && grid == f->dims_grid &&
        f->dims_max_threads == f->max_threads) {
        memcpy(g, f->dims_g, sizeof f->dims_g);
        memcpy(b, f->dims_b, sizeof f->dims_b);
        return 0;
    }
    return bc_args_parse_launch_dims(f, grid, block, g, b);
}
/* Dynamic shared memory bytes (NULL or None: 0). */
int bc_args_shared_slow(PyObject *obj, unsigned int *out);
static inline int
bc_args_shared(PyObject *obj, unsigned int *out)
{
    if (obj == NULL || obj == Py_None) {
        *out = 0;
        return 0;
    }
    return bc_args_shared_slow(obj, out);
}

/* Work out f->param_bytes and f->param_gaps from f's parameter offsets and
 * sizes (once, when they are known). */
void bc_args_layout(bc_Function *f);
/* __call__'s arguments into pb (handlers met are listed in pb->handlers). */
int bc_args_pack_call(bc_State *st, bc_Function *f, PyObject *const *args, Py_ssize_t n,
                      bc_packbuf *pb);
/* prepare(): parse `types` (struct-style string or list of dtypes) into f's
 * prepared layout; 0, or -1 with an exception (f unchanged then). */
int bc_args_prepare(bc_Function *f, PyObject *types);
/* Prepared arguments into buf (f->prepared_bytes bytes). */
int bc_args_pack_prepared(bc_State *st, bc_Function *f, PyObject *const *args, Py_ssize_t n,
                          char *buf);

/* Registers _pack_args and _pack_prepared. */
int bc_argpack_setup(PyObject *m, bc_State *st);

#endif
