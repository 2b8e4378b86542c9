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
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_Stream;

typedef struct {
    PyObject_HEAD
    CUevent handle;
    bc_Context *ctx;
    int owned;
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_Event;

/* obj as a usable Event (borrowed): TypeError naming `what` when it is no Event,
 * LogicError when it was closed or its context is gone; NULL then. */
bc_Event *bc_event_check(bc_State *st, PyObject *obj, const char *what);

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

/* Stream.end_capture() hands the captured CUgraph to the Graph maker that
 * src/graph.c (a floor above) registers at module init: it takes ownership of the
 * graph and holds ctx, and returns the Graph object, or NULL with an exception
 * set (the graph destroyed then). */
/* Called, GIL held, just before a stream of ours is destroyed (close() or
 * collection), with its handle: src/waker.c registers it at module init to answer
 * the awaits on that stream.  Must not raise. */
typedef void (*bc_stream_closing_hook)(CUstream handle);
void bc_stream_on_close(bc_stream_closing_hook fn);

typedef PyObject *(*bc_graph_maker)(bc_State *st, CUgraph graph, bc_Context *ctx);
void bc_stream_set_graph_maker(bc_graph_maker fn);

#endif
