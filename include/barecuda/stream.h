/* SPDX-License-Identifier: MIT */
/* Streams (src/stream.c) and events (src/event.c). */
#ifndef BC_STREAM_H
#define BC_STREAM_H

#include "common.h"
#include "state.h"
#include "context.h"

typedef struct {
    PyObject_HEAD
    CUstream handle;
    bc_Context *ctx;  /* NULL for a borrowed handle whose context is unknown */
    PyObject *owner;  /* keeps a foreign stream's owner alive (from_handle) */
    PyObject *keep;   /* list of objects kept alive until the next synchronize */
    int owned;        /* 1: created here and destroyed on close */
    PyObject *weakreflist;
} bc_Stream;

typedef struct {
    PyObject_HEAD
    CUevent handle;
    bc_Context *ctx;
    int owned;
    PyObject *weakreflist;
} bc_Event;

/* Convert None (the legacy default stream, 0), a Stream, an object with
 * __cuda_stream__, or an int handle to a CUstream.  0 on success, -1 with
 * TypeError/LogicError set.  A released Stream is a LogicError. */
int bc_stream_convert(bc_State *st, PyObject *obj, CUstream *out);

/* The Stream object for obj if it is one (borrowed), else NULL (no exception). */
bc_Stream *bc_stream_check(bc_State *st, PyObject *obj);

/* Keep obj alive until `stream` is next known to be complete (synchronize,
 * is_done() true, or the stream closes).  No-op when stream is not a Stream
 * object (the default stream: callers synchronize instead).  0 or -1. */
int bc_stream_keep_alive(bc_State *st, PyObject *stream, PyObject *obj);

/* For detach(): every Stream made in ctx whose keep list holds objects is
 * synchronized (GIL released) and lets them go, so that host memory they hold
 * does not keep a detached context waiting.  A stream whose synchronize fails
 * keeps its list (its copies may still read those buffers).  GIL held; never
 * raises. */
void bc_stream_let_go_kept(bc_Context *ctx);

/* Graphs (src/graph.c): a Graph object for a captured CUgraph (takes ownership,
 * holds ctx).  NULL with an exception set (the graph is destroyed then). */
PyObject *bc_graph_wrap(bc_State *st, CUgraph graph, bc_Context *ctx);

#endif
