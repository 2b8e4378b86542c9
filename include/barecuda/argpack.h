/* SPDX-License-Identifier: MIT */
/* Kernel-argument packing (src/argpack.c), for the launches of src/function.c:
 * the launch shape, __call__'s arguments, prepare()'s signature and prepared
 * arguments, each into the bytes of one cuLaunchKernel parameter buffer. */
#ifndef BC_ARGPACK_H
#define BC_ARGPACK_H

#include "module.h"

#include <stdatomic.h>

/* The argument memo of one kind of launch of one Function (argpack.c): per
 * parameter slot, the object packed there last, and the packed bytes of them
 * all.  An argument that is the same object as last time is not converted
 * again.  Only objects whose bytes cannot change while they live are kept:
 * values of immutable types (int, float, the NumPy scalar types) by a strong
 * reference, DeviceAllocations by address alone (a reference would keep device
 * memory alive).  A kept DeviceAllocation that is freed or dies, and any
 * context that is released, moves bc_args_memo_epoch (through the hooks that
 * bc_argpack_setup registers with src/memory.c and src/context.c): every memo
 * filled before then starts over at its next launch.  A memo whose launches keep changing
 * most arguments rests for a while (argpack.c: memo_score). */
typedef struct bc_ArgMemo {
    uint64_t epoch;       /* bc_args_memo_epoch when the slots were last valid */
    int busy;             /* a launch is packing into or launching from buf */
    int dead;             /* prepare() replaced it while busy: freed when the launch is done */
    int cold;             /* launches in a row that found most slots changed */
    int rest;             /* launches left to the plain packing before it is tried again */
    Py_ssize_t n;         /* slots */
    PyObject **last;      /* n slots: the object whose bytes are in buf, or NULL */
    unsigned char *owned; /* n flags: last[i] is a strong reference */
    char *buf;            /* the packed parameters, zero between them */
} bc_ArgMemo;

extern _Atomic uint64_t bc_args_memo_epoch;

/* Every argument memo starts over (a kept DeviceAllocation ends, a context is
 * released).  Safe without the GIL. */
static inline void
bc_args_memo_invalidate(void)
{
    atomic_fetch_add_explicit(&bc_args_memo_epoch, 1, memory_order_relaxed);
}

/* *memo emptied and freed, or left to the launch using it (then freed when it
 * is done); *memo is NULL after.  For Function dealloc and prepare(). */
void bc_args_memo_free(bc_ArgMemo **memo);
/* Empty and free a memo that prepare() replaced while a launch held it (GIL held). */
void bc_args_memo_dead(bc_ArgMemo *memo);
static inline void
bc_args_memo_done(bc_ArgMemo *memo)
{
    if (memo->dead)
        bc_args_memo_dead(memo);
    else
        memo->busy = 0;
}

/* Whether a launch of n arguments may pack into memo m now: the count is m's, m
 * is not in use (a launch of its Function on another thread), and it is not
 * resting (most arguments changed at every launch lately: a rest is counted
 * down here). */
static inline int
bc_args_memo_ready(bc_ArgMemo *m, Py_ssize_t n)
{
    if (n != m->n || m->busy)
        return 0;
    if (m->rest == 0)
        return 1;
    m->rest--;
    return 0;
}

/* How a prepared parameter converts (bc_ArgSpec.conv), set by prepare()
 * (src/argsig.c): the kinds with a fast path in bc_args_pack_prepared;
 * BC_CONV_OTHER goes by the struct letter alone. */
enum { BC_CONV_OTHER, BC_CONV_INT, BC_CONV_PTR, BC_CONV_F32, BC_CONV_F64 };

/* v rounded up to a multiple of a (a power of two or not; 0 and 1: v). */
static inline size_t
bc_align_up(size_t v, size_t a)
{
    return a > 1 ? (v + a - 1) / a * a : v;
}

/* A parameter buffer: on the stack up to BC_ARGS_STACK bytes, then the heap, or
 * a Function's argument memo while a launch holds it. */
typedef struct {
    char *buf;
    size_t size; /* bytes used */
    size_t cap;
    PyObject *handlers; /* argument handlers (In/Out/InOut ...) met, or NULL */
    bc_ArgMemo *memo;   /* buf is this memo's (busy until bc_packbuf_free) */
    uint64_t stack[BC_ARGS_STACK / 8];
} bc_packbuf;

static inline void
bc_packbuf_init(bc_packbuf *pb)
{
    pb->buf = (char *)pb->stack;
    pb->size = 0;
    pb->cap = sizeof pb->stack;
    pb->handlers = NULL;
    pb->memo = NULL;
}

static inline void
bc_packbuf_free(bc_packbuf *pb)
{
    if (pb->memo != NULL)
        bc_args_memo_done(pb->memo);
    else if (pb->buf != (char *)pb->stack)
        PyMem_Free(pb->buf);
    pb->memo = NULL;
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
/* The same into f's __call__ memo m (made when NULL; n == f->nparams > 0, m not
 * busy); pb->memo names it then. */
int bc_args_memo_pack_call(bc_State *st, bc_Function *f, bc_ArgMemo *m, PyObject *const *args,
                           Py_ssize_t n, bc_packbuf *pb);
/* __call__'s packing: through f's memo when the kernel's layout is known and
 * the memo is free and not resting, else as bc_args_pack_call.  Inline, so
 * that launches the memo leaves to the plain packing pay nothing for it. */
static inline int
bc_args_pack_call_memo(bc_State *st, bc_Function *f, PyObject *const *args, Py_ssize_t n,
                       bc_packbuf *pb)
{
    bc_ArgMemo *m = f->call_memo;
    if (m != NULL ? bc_args_memo_ready(m, n) : n > 0 && n == f->nparams)
        return bc_args_memo_pack_call(st, f, m, args, n, pb);
    if (n == 0 && f->nparams == 0)
        return 0; /* pb->size is 0 already */
    return bc_args_pack_call(st, f, args, n, pb);
}
/* prepare(): parse `types` (struct-style string or list of dtypes) into f's
 * prepared layout; 0, or -1 with an exception (f unchanged then).  (src/argsig.c) */
int bc_args_prepare(bc_Function *f, PyObject *types);
/* Prepared arguments into buf (f->prepared_bytes bytes). */
int bc_args_pack_prepared(bc_State *st, bc_Function *f, PyObject *const *args, Py_ssize_t n,
                          char *buf);
/* The same into f's prepared memo m (made when NULL; n == f->nprepared > 0, m
 * not busy): 0 with *memo the memo, its buf packed (busy until
 * bc_args_memo_done), or -1 with an exception. */
int bc_args_memo_pack_prepared(bc_State *st, bc_Function *f, bc_ArgMemo *m, PyObject *const *args,
                               Py_ssize_t n, bc_ArgMemo **memo);
/* The prepared calls' packing: 0 with *memo as above, or NULL when there is
 * nothing to pack; 1 when the memo is in use (by a launch of f on another
 * thread) or resting, or the count is wrong: then pack with
 * bc_args_pack_prepared into a buffer of your own; -1 with an exception. */
static inline int
bc_args_pack_prepared_memo(bc_State *st, bc_Function *f, PyObject *const *args, Py_ssize_t n,
                           bc_ArgMemo **memo)
{
    bc_ArgMemo *m = f->prep_memo;
    *memo = NULL;
    if (m != NULL ? bc_args_memo_ready(m, n) : n > 0 && n == f->nprepared)
        return bc_args_memo_pack_prepared(st, f, m, args, n, memo);
    return n == 0 && f->nprepared == 0 ? 0 : 1;
}

/* Registers _pack_args and _pack_prepared. */
int bc_argpack_setup(PyObject *m, bc_State *st);

#endif
