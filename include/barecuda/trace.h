/* SPDX-License-Identifier: MIT */
/* The timeline recorder (src/trace.c) behind barecuda.tools.trace().
 *
 * While a trace is active, st->trace points at the recorder; otherwise it is NULL
 * and that one test is all an instrumented call site pays:
 *
 *     bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_copy(st, BC_TRACE_HTOD, s, n));
 *     ... the driver call ...
 *     BC_TRACE_END(st, tt, rc);
 *
 * Begin and end are called with the GIL held (the driver call between them may
 * release it).  A record appended by begin is identified by a token (index and the
 * trace's epoch), so an op still in flight on another thread when its trace ends,
 * or after a new one started, finds its token stale and records nothing.
 * Recording never fails the operation: a record that cannot be made is dropped. */
#ifndef BC_TRACE_H
#define BC_TRACE_H

#include "common.h"
#include "state.h"

/* What a record is; trace.c's kind_names spells them for Python. */
enum {
    BC_TRACE_KERNEL,
    BC_TRACE_COPY,
    BC_TRACE_MEMSET,
    BC_TRACE_ALLOC,
    BC_TRACE_SYNC,
    BC_TRACE_GRAPH,
    BC_TRACE_RANGE,
    BC_TRACE_MARK,
};

/* Copy directions (the name of a copy record). */
enum {
    BC_TRACE_HTOD,
    BC_TRACE_DTOH,
    BC_TRACE_DTOD,
    BC_TRACE_PEER,
    BC_TRACE_HTOA,
    BC_TRACE_ATOH,
    BC_TRACE_DTOA,
    BC_TRACE_ATOD,
    BC_TRACE_ATOA,
    BC_TRACE_2D,
    BC_TRACE_3D,
};

typedef struct bc_trace bc_trace;

typedef struct {
    Py_ssize_t index; /* -1: nothing recorded */
    unsigned int epoch;
} bc_trace_tok;

#define BC_TRACE_NONE ((bc_trace_tok){-1, 0})
#define BC_TRACE_BEGIN(st, call) ((st)->trace != NULL ? (call) : BC_TRACE_NONE)
#define BC_TRACE_END(st, tok, rc)                                                  \
    do {                                                                         \
        if ((tok).index >= 0)                                                    \
            bc_trace_end((st), (tok), (rc));                                     \
    } while (0)

/* Begin records (GIL held; only when st->trace is set).  GPU records (kernels,
 * copies, memsets, graphs) put a timing event on stream `s` before the op. */
bc_trace_tok bc_trace_kernel(bc_State *st, PyObject *name, const unsigned int g[3],
                             const unsigned int b[3], unsigned int shared, CUstream s);
bc_trace_tok bc_trace_copy(bc_State *st, int dir, CUstream s, unsigned long long bytes);
bc_trace_tok bc_trace_memset(bc_State *st, CUstream s, unsigned long long bytes);
bc_trace_tok bc_trace_graph(bc_State *st, CUstream s);
/* Host-only records: `label` is a static string. */
bc_trace_tok bc_trace_host(bc_State *st, int kind, const char *label, unsigned long long bytes);

/* End the record: host end time, and the GPU end event after the op.  A failed op
 * (rc != CUDA_SUCCESS) is kept, marked failed. */
void bc_trace_end(bc_State *st, bc_trace_tok tok, CUresult rc);

/* NVTX ranges and marks in the active trace (no-ops when none is). `key` pairs a
 * start with its end: the thread id for push/pop (pass is_push=1), the NVTX range
 * id for start/end. */
void bc_trace_range_open(bc_State *st, const char *name, unsigned long long key, int is_push);
void bc_trace_range_close(bc_State *st, unsigned long long key, int is_push);
void bc_trace_mark(bc_State *st, const char *name);

/* _trace_start() makes the default context current when none is, through
 * bc_context_require, which src/context.c (a floor above) lends here at module
 * init. */
void bc_trace_set_context_require(int (*fn)(bc_State *st));

/* Drop an active trace without reading it (module teardown). */
void bc_trace_discard(bc_State *st);

#endif
