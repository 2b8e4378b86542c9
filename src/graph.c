/* SPDX-License-Identifier: MIT */
/* CUDA graphs: Graph (work recorded by Stream.begin_capture/end_capture) and
 * GraphExec (an instantiated graph, launched as a whole on a stream).
 *
 * Both hold their Context and are destroyed with it current, on close() or
 * collection.  A GraphExec keeps its Graph alive only for introspection; the
 * driver itself does not need the graph after instantiation.  The private
 * _bench_graph_launch is the C floor that graph replays are measured against. */
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/stream.h"
#include "barecuda/trace.h"


typedef struct {
    PyObject_HEAD
    CUgraph handle;
    bc_Context *ctx;
    PyObject *weakreflist;
} bc_Graph;

typedef struct {
    PyObject_HEAD
    CUgraphExec handle;
    bc_Context *ctx;
    PyObject *graph;
    PyObject *weakreflist;
} bc_GraphExec;

static int
graph_usable(bc_State *st, bc_Graph *g)
{
    if (g->handle == NULL)
        return bc_error_logic(st, "this Graph was closed");
    return bc_context_check_alive(st, g->ctx, "this Graph");
}

static int
exec_usable(bc_State *st, bc_GraphExec *g)
{
    if (g->handle == NULL)
        return bc_error_logic(st, "this GraphExec was closed");
    return bc_context_check_alive(st, g->ctx, "this GraphExec");
}

/* A Graph object for a captured CUgraph (Stream.end_capture, through the maker
 * registered with src/stream.c): takes ownership, holds ctx. */
static PyObject *
graph_wrap(bc_State *st, CUgraph graph, bc_Context *ctx)
{
    bc_Graph *self = PyObject_GC_New(bc_Graph, (PyTypeObject *)st->GraphType);
    if (self == NULL) {
        bc_drv.cuGraphDestroy(graph);
        return NULL;
    }
    self->handle = graph;
    self->ctx = (bc_Context *)Py_NewRef(ctx);
    self->weakreflist = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* Destroy with the context current; both kinds share the shape. */
static CUresult
release_in(bc_Context *ctx, CUresult (*destroy)(void *), void *h)
{
    if (h == NULL || ctx == NULL || ctx->let_go || !bc_drv_ready)
        return CUDA_SUCCESS;
    int entered = bc_context_enter(ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = destroy(h);
    bc_context_leave(entered);
    return rc;
}

static CUresult
destroy_graph(void *h)
{
    return bc_drv.cuGraphDestroy((CUgraph)h);
}

static CUresult
destroy_exec(void *h)
{
    return bc_drv.cuGraphExecDestroy((CUgraphExec)h);
}

static CUresult
graph_release(bc_Graph *self)
{
    void *h = self->handle;
    self->handle = NULL;
    return release_in(self->ctx, destroy_graph, h);
}

static CUresult
exec_release(bc_GraphExec *self)
{
    void *h = self->handle;
    self->handle = NULL;
    return release_in(self->ctx, destroy_exec, h);
}

/* ------------------------------------------------------------ Graph */

static int
graph_traverse(bc_Graph *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->ctx);
    return 0;
}

static void
graph_dealloc(bc_Graph *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->handle != NULL)
        bc_error_in_destructor(graph_release(self),
                               "cuGraphDestroy", (PyObject *)self);
    Py_CLEAR(self->ctx);
    tp->tp_free(self);
    Py_DECREF(tp);
}

PyDoc_STRVAR(instantiate_doc,
"instantiate($self, flags=0)\n--\n\n"
"An executable GraphExec of this graph (graph_instantiate_flags).");

static PyObject *
graph_instantiate(bc_Graph *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"flags", NULL};
    PyObject *flags_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:instantiate", kwlist, &flags_obj))
        return NULL;
    long long flags = 0;
    if (flags_obj && bc_arg_long(flags_obj, "instantiate(): flags", 0, 0xFFFFFFFFLL, &flags) < 0)
        return NULL;
    if (graph_usable(st, self) < 0)
        return NULL;
    int entered = bc_context_enter(self->ctx);
    if (entered < 0)
        return bc_error_logic(st, "instantiate(): cannot make the graph's context current"), NULL;
    CUgraphExec e = NULL;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuGraphInstantiateWithFlags(&e, self->handle, (unsigned long long)flags);
    Py_END_ALLOW_THREADS
    bc_context_leave(entered);
    if (bc_check(st, rc, "cuGraphInstantiateWithFlags") < 0)
        return NULL;
    bc_GraphExec *x = PyObject_GC_New(bc_GraphExec, (PyTypeObject *)st->GraphExecType);
    if (x == NULL) {
        bc_drv.cuGraphExecDestroy(e);
        return NULL;
    }
    x->handle = e;
    x->ctx = (bc_Context *)Py_NewRef(self->ctx);
    x->graph = Py_NewRef(self);
    x->weakreflist = NULL;
    PyObject_GC_Track(x);
    return (PyObject *)x;
}

static PyObject *
graph_get_num_nodes(bc_Graph *self, void *Py_UNUSED(closure))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (graph_usable(st, self) < 0)
        return NULL;
    size_t n = 0;
    if (bc_check(st, bc_drv.cuGraphGetNodes(self->handle, NULL, &n), "cuGraphGetNodes") < 0)
        return NULL;
    return PyLong_FromSize_t(n);
}

static PyObject *
graph_get_handle(bc_Graph *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr((void *)self->handle);
}

PyDoc_STRVAR(graph_close_doc, "close($self)\n--\n\nDestroy the graph now (idempotent).");

static PyObject *
graph_close(bc_Graph *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (self->handle != NULL && bc_check(st, graph_release(self), "cuGraphDestroy") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef graph_methods[] = {
    {"instantiate", (PyCFunction)(void (*)(void))graph_instantiate, METH_VARARGS | METH_KEYWORDS,
     instantiate_doc},
    {"close", (PyCFunction)graph_close, METH_NOARGS, graph_close_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef graph_getset[] = {
    {"num_nodes", (getter)graph_get_num_nodes, NULL, "Number of nodes in the graph.", NULL},
    {"handle", (getter)graph_get_handle, NULL, "The CUgraph as an int.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef graph_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Graph, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(graph_doc,
"A CUDA graph recorded by Stream.begin_capture() ... end_capture();\n"
"instantiate() it to launch it.");

static PyType_Slot graph_slots[] = {
    {Py_tp_dealloc, graph_dealloc},
    {Py_tp_traverse, graph_traverse},
    {Py_tp_methods, graph_methods},
    {Py_tp_getset, graph_getset},
    {Py_tp_members, graph_members},
    {Py_tp_doc, (void *)graph_doc},
    {0, NULL},
};

static PyType_Spec graph_spec = {
    .name = "barecuda.driver.Graph",
    .basicsize = sizeof(bc_Graph),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = graph_slots,
};

/* ------------------------------------------------------------ GraphExec */

static int
exec_traverse(bc_GraphExec *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->ctx);
    Py_VISIT(self->graph);
    return 0;
}

static int
exec_clear(bc_GraphExec *self)
{
    Py_CLEAR(self->graph);
    return 0;
}

static void
exec_dealloc(bc_GraphExec *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->handle != NULL)
        bc_error_in_destructor(exec_release(self),
                               "cuGraphExecDestroy", (PyObject *)self);
    exec_clear(self);
    Py_CLEAR(self->ctx);
    tp->tp_free(self);
    Py_DECREF(tp);
}

PyDoc_STRVAR(launch_doc,
"launch($self, stream=None)\n--\n\nRun the whole graph on `stream` (None: the default stream).");

static PyObject *
exec_launch(bc_GraphExec *self, PyObject *const *args, Py_ssize_t nargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "launch() takes at most one argument (stream)");
        return NULL;
    }
    CUstream s = NULL;
    if (exec_usable(st, self) < 0 || (nargs == 1 && bc_stream_convert(st, args[0], &s) < 0))
        return NULL;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_graph(st, s));
    CUresult rc = bc_drv.cuGraphLaunch(self->handle, s);
    if (rc == CUDA_ERROR_INVALID_CONTEXT) {
        int entered = bc_context_enter(self->ctx);
        if (entered == 1) {
            rc = bc_drv.cuGraphLaunch(self->handle, s);
            bc_context_leave(entered);
        }
    }
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, "cuGraphLaunch") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(upload_doc,
"upload($self, stream=None)\n--\n\nPrepare the graph's device resources ahead of the first launch.");

static PyObject *
exec_upload(bc_GraphExec *self, PyObject *const *args, Py_ssize_t nargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "upload() takes at most one argument (stream)");
        return NULL;
    }
    CUstream s = NULL;
    if (exec_usable(st, self) < 0 || (nargs == 1 && bc_stream_convert(st, args[0], &s) < 0))
        return NULL;
    if (bc_check(st, bc_drv.cuGraphUpload(self->handle, s), "cuGraphUpload") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(exec_close_doc, "close($self)\n--\n\nDestroy the executable graph now (idempotent).");

static PyObject *
exec_close(bc_GraphExec *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (self->handle != NULL && bc_check(st, exec_release(self), "cuGraphExecDestroy") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
exec_get_handle(bc_GraphExec *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr((void *)self->handle);
}

static PyObject *
exec_get_graph(bc_GraphExec *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->graph ? self->graph : Py_None);
}

static PyMethodDef exec_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))exec_launch, METH_FASTCALL, launch_doc},
    {"upload", (PyCFunction)(void (*)(void))exec_upload, METH_FASTCALL, upload_doc},
    {"close", (PyCFunction)exec_close, METH_NOARGS, exec_close_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef exec_getset[] = {
    {"handle", (getter)exec_get_handle, NULL, "The CUgraphExec as an int.", NULL},
    {"graph", (getter)exec_get_graph, NULL, "The Graph it was instantiated from.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef exec_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_GraphExec, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(exec_doc, "An instantiated graph (Graph.instantiate()); launch(stream) runs it.");

static PyType_Slot exec_slots[] = {
    {Py_tp_dealloc, exec_dealloc},
    {Py_tp_traverse, exec_traverse},
    {Py_tp_clear, exec_clear},
    {Py_tp_methods, exec_methods},
    {Py_tp_getset, exec_getset},
    {Py_tp_members, exec_members},
    {Py_tp_doc, (void *)exec_doc},
    {0, NULL},
};

static PyType_Spec exec_spec = {
    .name = "barecuda.driver.GraphExec",
    .basicsize = sizeof(bc_GraphExec),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = exec_slots,
};

/* ------------------------------------------------------------ C floor */

PyDoc_STRVAR(bench_graph_doc,
"_bench_graph_launch(graph_exec, stream, iterations)\n--\n\n"
"Private: launch `graph_exec` `iterations` times in a C loop (GIL released), then\n"
"synchronize the stream; seconds per launch.");

static PyObject *
bc_bench_graph_launch(PyObject *m, PyObject *args)
{
    bc_State *st = bc_state_from_module(m);
    PyObject *gobj, *stream;
    Py_ssize_t iters;
    if (!PyArg_ParseTuple(args, "O!On:_bench_graph_launch", (PyTypeObject *)st->GraphExecType,
                          &gobj, &stream, &iters))
        return NULL;
    bc_GraphExec *g = (bc_GraphExec *)gobj;
    CUstream s;
    if (iters < 1) {
        PyErr_SetString(PyExc_ValueError, "iterations must be positive");
        return NULL;
    }
    if (exec_usable(st, g) < 0 || bc_stream_convert(st, stream, &s) < 0)
        return NULL;
    CUresult rc = CUDA_SUCCESS;
    double t0, t1;
    Py_BEGIN_ALLOW_THREADS
    t0 = bc_monotonic_s();
    for (Py_ssize_t i = 0; i < iters && rc == CUDA_SUCCESS; i++)
        rc = bc_drv.cuGraphLaunch(g->handle, s);
    if (rc == CUDA_SUCCESS)
        rc = bc_drv.cuStreamSynchronize(s);
    t1 = bc_monotonic_s();
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuGraphLaunch") < 0)
        return NULL;
    return PyFloat_FromDouble((t1 - t0) / (double)iters);
}

static PyMethodDef graph_functions[] = {
    {"_bench_graph_launch", bc_bench_graph_launch, METH_VARARGS, bench_graph_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_graph_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &graph_spec, NULL, &st->GraphType) < 0 ||
        bc_add_type(m, &exec_spec, NULL, &st->GraphExecType) < 0)
        return -1;
    bc_stream_set_graph_maker(graph_wrap);
    return PyModule_AddFunctions(m, graph_functions);
}
