/* SPDX-License-Identifier: MIT */
/* Context: a CUcontext and this thread's context stack.
 *
 * Three kinds: a device's primary context (retained; what the runtime API, CuPy
 * and PyTorch use, and barecuda's default), a context made with make_context
 * (destroyed on detach), and a borrowed one found current but not ours.  One
 * Python object per live handle is kept in a registry of weak references, so
 * get_current() returns the object that was pushed.  Every other object holds a
 * strong reference to its Context; detach() releases the context early and
 * makes those objects' later releases no-ops.  A primary context detached while
 * memory made in it lives keeps its retain (and its array pool) until the last
 * of that memory is freed: the objects are refused meanwhile, but their memory is
 * freed, not leaked, when another retain keeps the context alive.
 *
 * This is the floor of contexts: what the floors above keep for a context
 * (streams' keep lists, the array layer's block cache and pool, the argument
 * memos) hears of its detach, release and end through the hooks they register
 * here (bc_context_on); this file names none of them. */
#include "barecuda/context.h"
#include "barecuda/error.h"
#include "barecuda/trace.h"
#include "barecuda/loader.h"

#include <stdlib.h>

/* ------------------------------------------------------------ hooks */

#define HOOKS_PER_EVENT 4
static bc_context_hook hooks[BC_CTX_NEVENTS][HOOKS_PER_EVENT];
static bc_context_getter array_pool_getter;

int
bc_context_on(enum bc_context_event ev, bc_context_hook fn)
{
    for (int i = 0; i < HOOKS_PER_EVENT; i++) {
        if (hooks[ev][i] == fn)
            return 0;
        if (hooks[ev][i] == NULL) {
            hooks[ev][i] = fn;
            return 0;
        }
    }
    PyErr_Format(PyExc_RuntimeError, "bc_context_on: more than %d hooks for event %d",
                 HOOKS_PER_EVENT, (int)ev);
    return -1;
}

void
bc_context_set_array_pool_getter(bc_context_getter fn)
{
    array_pool_getter = fn;
}

static void
run_hooks(enum bc_context_event ev, bc_Context *ctx, int arg)
{
    for (int i = 0; i < HOOKS_PER_EVENT && hooks[ev][i] != NULL; i++)
        hooks[ev][i](ctx, arg);
}

/* ------------------------------------------------------------ the registry */

static PyObject *
handle_key(CUcontext handle)
{
    return PyLong_FromVoidPtr((void *)handle);
}

/* The registry maps each handle to a list of weak references: every wrapper made
 * for it, so reset_primary_context() can reach all of them. */
static PyObject *
registry_list(bc_State *st, CUcontext handle, int create)
{
    if (st->contexts == NULL)
        return NULL;
    PyObject *key = handle_key(handle);
    if (key == NULL)
        return NULL;
    PyObject *list = PyDict_GetItemWithError(st->contexts, key); /* borrowed */
    if (list == NULL && !PyErr_Occurred() && create) {
        list = PyList_New(0);
        if (list != NULL && PyDict_SetItem(st->contexts, key, list) < 0)
            Py_CLEAR(list);
        Py_XDECREF(list); /* the dict holds it */
    }
    Py_DECREF(key);
    return list;
}

/* The newest live, unreleased wrapper of `handle`, or NULL (no exception). */
static bc_Context *
registry_lookup(bc_State *st, CUcontext handle)
{
    PyObject *list = registry_list(st, handle, 0);
    if (list == NULL) {
        PyErr_Clear();
        return NULL;
    }
    for (Py_ssize_t i = PyList_GET_SIZE(list) - 1; i >= 0; i--) {
        PyObject *obj = bc_weakref_get(PyList_GET_ITEM(list, i));
        if (obj != NULL && !((bc_Context *)obj)->released)
            return (bc_Context *)obj;
        Py_XDECREF(obj);
    }
    return NULL;
}

static int
registry_add(bc_State *st, bc_Context *ctx)
{
    PyObject *list = registry_list(st, ctx->handle, 1);
    if (list == NULL)
        return -1;
    /* drop references whose wrapper is gone, so the list stays short */
    for (Py_ssize_t i = PyList_GET_SIZE(list) - 1; i >= 0; i--) {
        PyObject *obj = bc_weakref_get(PyList_GET_ITEM(list, i));
        if (obj == NULL && PySequence_DelItem(list, i) < 0)
            return -1;
        Py_XDECREF(obj);
    }
    PyObject *ref = PyWeakref_NewRef((PyObject *)ctx, NULL);
    int rc = ref ? PyList_Append(list, ref) : -1;
    Py_XDECREF(ref);
    return rc;
}

/* Empty the kernel cache, then the caches of the floors above (BC_CTX_DROP_CACHES:
 * the block cache; context_let_go's BC_CTX_LETTING_GO destroys the array pool
 * after them).  The kernel cache may hold GPUArrays (rand()'s generator state):
 * dropping it first frees them into the pool while the pool still exists, and
 * puts their small blocks into the block cache.  `release` gives the cached
 * memory back (the context stays valid: a primary context somebody else may
 * still retain); otherwise it may go with the context (src/blockcache.c frees
 * blocks of the array pool into it all the same, before it is destroyed). */
static void
context_drop_caches(bc_Context *self, int release)
{
    Py_CLEAR(self->kernels);
    run_hooks(BC_CTX_DROP_CACHES, self, release);
}

static bc_Context *
context_alloc(bc_State *st, CUcontext handle, CUdevice dev, int kind)
{
    bc_Context *self = PyObject_GC_New(bc_Context, (PyTypeObject *)st->ContextType);
    if (self == NULL)
        return NULL;
    self->handle = handle;
    self->device = dev;
    self->kind = kind;
    self->released = 0;
    self->let_go = 0;
    self->live_memory = 0;
    self->kernels = NULL;
    self->keeping = NULL;
    self->nblocks = 0;
    self->array_pool = NULL;
    self->array_pool_failed = 0;
    self->weakreflist = NULL;
    self->dict = NULL;
    PyObject_GC_Track(self);
    Py_CLEAR(st->context_memo); /* the registry's answer changes: newest wrapper first */
    if (registry_add(st, self) < 0) {
        self->released = self->let_go = 1; /* the caller gives the handle back */
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

PyObject *
bc_context_retain_primary(bc_State *st, CUdevice dev)
{
    BC_REQUIRE_DRIVER(st, NULL);
    CUcontext handle;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuDevicePrimaryCtxRetain(&handle, dev);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuDevicePrimaryCtxRetain") < 0)
        return NULL;
    bc_Context *ctx = context_alloc(st, handle, dev, BC_CTX_PRIMARY);
    if (ctx == NULL)
        bc_drv.cuDevicePrimaryCtxRelease(dev);
    return (PyObject *)ctx;
}

PyObject *
bc_context_create(bc_State *st, CUdevice dev, unsigned int flags)
{
    BC_REQUIRE_DRIVER(st, NULL);
    CUcontext handle;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
#if CUDA_VERSION >= 13000 /* cuCtxCreate is cuCtxCreate_v4 from CUDA 13's headers */
    rc = bc_drv.cuCtxCreate(&handle, NULL, flags, dev);
#else
    rc = bc_drv.cuCtxCreate(&handle, flags, dev);
#endif
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuCtxCreate") < 0)
        return NULL;
    bc_Context *ctx = context_alloc(st, handle, dev, BC_CTX_OWNED);
    if (ctx == NULL)
        bc_drv.cuCtxDestroy(handle);
    return (PyObject *)ctx;
}

bc_Context *
bc_context_wrap(bc_State *st, CUcontext handle)
{
    /* The answer of the last lookup, while it stands: every array operation asks. */
    if (st->context_memo != NULL) {
        bc_Context *memo = (bc_Context *)bc_weakref_get(st->context_memo);
        if (memo != NULL && memo->handle == handle && !memo->released)
            return memo;
        Py_XDECREF(memo);
    }
    bc_Context *found = registry_lookup(st, handle);
    if (found != NULL) {
        Py_XSETREF(st->context_memo, PyWeakref_NewRef((PyObject *)found, NULL));
        if (st->context_memo == NULL)
            PyErr_Clear(); /* only a cache */
        return found;
    }
    CUdevice dev;
    CUresult rc = bc_drv.cuCtxPushCurrent(handle);
    if (rc == CUDA_SUCCESS) {
        rc = bc_drv.cuCtxGetDevice(&dev);
        CUcontext popped;
        bc_drv.cuCtxPopCurrent(&popped);
    }
    if (bc_check(st, rc, "cuCtxGetDevice") < 0)
        return NULL;
    /* Somebody else's context: if it is the device's primary one, hold a retain
     * of our own so our objects keep it alive; otherwise borrow it. */
    unsigned int flags;
    int active = 0;
    if (bc_drv.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active) {
        CUcontext primary;
        if (bc_drv.cuDevicePrimaryCtxRetain(&primary, dev) == CUDA_SUCCESS) {
            if (primary == handle) {
                bc_Context *ctx = context_alloc(st, handle, dev, BC_CTX_PRIMARY);
                if (ctx == NULL)
                    bc_drv.cuDevicePrimaryCtxRelease(dev);
                return ctx;
            }
            bc_drv.cuDevicePrimaryCtxRelease(dev);
        }
    }
    return context_alloc(st, handle, dev, BC_CTX_BORROWED);
}

/* The device the default context lives on: $CUDA_DEVICE, else the first device
 * whose primary context can be retained. */
static int
activate_default(bc_State *st)
{
    if (st->default_context == NULL) {
        int count = 0;
        if (bc_check(st, bc_drv.cuDeviceGetCount(&count), "cuDeviceGetCount") < 0)
            return -1;
        const char *env = getenv("CUDA_DEVICE");
        int first = 0, last = count - 1;
        if (env && env[0]) {
            char *end;
            long want = strtol(env, &end, 10);
            if (*end != '\0' || want < 0 || want >= count)
                return bc_error_logic(st, "CUDA_DEVICE=%s does not name one of the %d device%s",
                                      env, count, count == 1 ? "" : "s");
            first = last = (int)want;
        }
        if (count == 0)
            return bc_error_raise(st, CUDA_ERROR_NO_DEVICE, "cuDeviceGetCount");
        for (int i = first; i <= last && st->default_context == NULL; i++) {
            CUdevice dev;
            if (bc_check(st, bc_drv.cuDeviceGet(&dev, i), "cuDeviceGet") < 0)
                return -1;
            st->default_context = bc_context_retain_primary(st, dev);
            if (st->default_context == NULL && i < last)
                PyErr_Clear();
        }
        if (st->default_context == NULL)
            return -1;
    }
    return bc_check(st, bc_drv.cuCtxSetCurrent(((bc_Context *)st->default_context)->handle),
                    "cuCtxSetCurrent");
}

bc_Context *
bc_context_current(bc_State *st)
{
    BC_REQUIRE_DRIVER(st, NULL);
    CUcontext cur = NULL;
    if (bc_check(st, bc_drv.cuCtxGetCurrent(&cur), "cuCtxGetCurrent") < 0)
        return NULL;
    if (cur == NULL) {
        if (activate_default(st) < 0)
            return NULL;
        return (bc_Context *)Py_NewRef(st->default_context);
    }
    return bc_context_wrap(st, cur);
}

/* Give back what a wrapper of `kind` holds; the driver's answer.  No GIL needed. */
static CUresult
release_handle(int kind, CUdevice dev, CUcontext handle)
{
    switch (kind) {
    case BC_CTX_PRIMARY:
        return bc_drv.cuDevicePrimaryCtxRelease(dev);
    case BC_CTX_OWNED:
        return bc_drv.cuCtxDestroy(handle);
    default:
        return CUDA_SUCCESS;
    }
}

/* Mark the wrapper released (GIL held): from here on, objects made in it refuse
 * to be used (context_let_go makes them skip their own release).  Returns 0 when
 * it already was.  Callers empty the caches first (context still valid):
 * context_drop_caches. */
static int
context_mark_released(bc_Context *self)
{
    if (self->released)
        return 0;
    self->released = 1;
    run_hooks(BC_CTX_RELEASED, self, 0); /* its allocations are no longer valid arguments */
    return 1;
}

static const char *
release_routine(int kind)
{
    return kind == BC_CTX_OWNED ? "cuCtxDestroy" : "cuDevicePrimaryCtxRelease";
}

/* Give the handle up (GIL held; released around the driver's calls): what lives
 * in it goes first (BC_CTX_LETTING_GO: the array pool), then the retain is
 * released or the context destroyed.  Objects made in
 * it skip their own release from here on.  Callers emptied the caches first. */
static CUresult
context_let_go(bc_Context *self)
{
    if (self->let_go)
        return CUDA_SUCCESS;
    run_hooks(BC_CTX_LETTING_GO, self, 0);
    self->let_go = 1;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = release_handle(self->kind, self->device, self->handle);
    Py_END_ALLOW_THREADS
    return rc;
}

void
bc_context_memory_freed(bc_Context *ctx, int *counted)
{
    if (!*counted)
        return;
    *counted = 0;
    if (--ctx->live_memory == 0 && ctx->released && !ctx->let_go && bc_drv_ready)
        bc_error_in_destructor(context_let_go(ctx), release_routine(ctx->kind), (PyObject *)ctx);
}

PyObject *
bc_context_reset_primary(bc_State *st, CUdevice dev)
{
    BC_REQUIRE_DRIVER(st, NULL);
    CUcontext handle = NULL;
    unsigned int flags;
    int active = 0;
    if (bc_check(st, bc_drv.cuDevicePrimaryCtxGetState(dev, &flags, &active),
                 "cuDevicePrimaryCtxGetState") < 0)
        return NULL;
    if (active && bc_drv.cuDevicePrimaryCtxRetain(&handle, dev) == CUDA_SUCCESS)
        bc_drv.cuDevicePrimaryCtxRelease(dev);
    /* Every wrapper of the old context is released first (its retain given back),
     * so its objects never touch the re-created context: their later use raises
     * LogicError and their release is skipped. */
    PyObject *list = handle ? registry_list(st, handle, 0) : NULL;
    if (list == NULL && PyErr_Occurred())
        return NULL;
    for (Py_ssize_t i = 0; list != NULL && i < PyList_GET_SIZE(list); i++) {
        bc_Context *c = (bc_Context *)bc_weakref_get(PyList_GET_ITEM(list, i));
        if (c != NULL && !c->let_go) { /* detached ones too, when memory kept their retain */
            context_drop_caches(c, 0); /* the reset frees the memory */
            context_mark_released(c);
            context_let_go(c);
        }
        Py_XDECREF(c);
    }
    if (st->default_context != NULL && ((bc_Context *)st->default_context)->handle == handle)
        Py_CLEAR(st->default_context);
    CUcontext cur = NULL;
    if (handle != NULL && bc_drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == handle)
        bc_drv.cuCtxSetCurrent(NULL);
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuDevicePrimaryCtxReset(dev);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuDevicePrimaryCtxReset") < 0)
        return NULL;
    Py_RETURN_NONE;
}

int
bc_context_require(bc_State *st)
{
    BC_REQUIRE_DRIVER(st, -1);
    CUcontext cur = NULL;
    if (bc_drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != NULL)
        return 0;
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return -1;
    Py_DECREF(ctx);
    return 0;
}

int
bc_context_check_alive(bc_State *st, bc_Context *ctx, const char *what)
{
    if (ctx != NULL && ctx->released)
        return bc_error_logic(st, "%s belongs to a context that was detached (or a primary "
                                  "context that was reset)", what);
    return 0;
}

int
bc_context_enter(bc_Context *ctx)
{
    return ctx->let_go ? -1 : bc_context_enter_handle(ctx->handle);
}

int
bc_context_enter_handle(CUcontext handle)
{
    CUcontext cur = NULL;
    /* In a forked child the parent's handles mean nothing: release nothing. */
    if (bc_forked_child || bc_drv.cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
        return -1;
    if (cur == handle)
        return 0;
    return bc_drv.cuCtxPushCurrent(handle) == CUDA_SUCCESS ? 1 : -1;
}

void
bc_context_leave(int entered)
{
    if (entered == 1) {
        CUcontext popped;
        bc_drv.cuCtxPopCurrent(&popped);
    }
}

static int
context_traverse(bc_Context *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->kernels);
    Py_VISIT(self->keeping);
    return 0;
}

/* The kernel cache holds modules that hold this context: a cycle the collector
 * breaks here (the modules unload while the context is still valid). */
static int
context_clear(bc_Context *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->kernels);
    Py_CLEAR(self->keeping);
    return 0;
}

static void
context_dealloc(bc_Context *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    context_drop_caches(self, self->kind != BC_CTX_OWNED);
    if (!self->let_go && bc_drv_ready) {
        context_mark_released(self);
        bc_error_in_destructor(context_let_go(self), release_routine(self->kind), (PyObject *)self);
    }
    Py_CLEAR(self->keeping);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
context_repr(bc_Context *self)
{
    static const char *const kinds[] = {"primary", "owned", "borrowed"};
    if (self->released && !self->let_go) /* detached, its retain held by memory made in it */
        return PyUnicode_FromFormat("<barecuda.driver.Context %p on device %d (%s, detached; "
                                    "retained until %zd allocation(s) made in it are freed)>",
                                    (void *)self->handle, (int)self->device, kinds[self->kind],
                                    self->live_memory);
    return PyUnicode_FromFormat("<barecuda.driver.Context %p on device %d (%s%s)>",
                                (void *)self->handle, (int)self->device, kinds[self->kind],
                                self->released ? ", detached" : "");
}

static Py_hash_t
context_hash(bc_Context *self)
{
    Py_hash_t h = (Py_hash_t)(uintptr_t)self->handle;
    return h == -1 ? -2 : h;
}

static PyObject *
context_richcompare(PyObject *a, PyObject *b, int op)
{
    if (Py_TYPE(a) != Py_TYPE(b) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = ((bc_Context *)a)->handle == ((bc_Context *)b)->handle;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static int
check_usable(bc_Context *self)
{
    if (self->released)
        return bc_error_logic(bc_state_of((PyObject *)self), "this Context was detached");
    return 0;
}

PyDoc_STRVAR(push_doc, "push($self)\n--\n\nMake this context current on this thread (cuCtxPushCurrent).");

static PyObject *
context_push(bc_Context *self, PyObject *Py_UNUSED(ignored))
{
    if (check_usable(self) < 0)
        return NULL;
    if (bc_check(bc_state_of((PyObject *)self), bc_drv.cuCtxPushCurrent(self->handle),
                 "cuCtxPushCurrent") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static bc_State *
type_state(PyObject *type)
{
    return bc_state_of_type((PyTypeObject *)type);
}

PyDoc_STRVAR(pop_doc,
"pop($type)\n--\n\n"
"Pop the current context off this thread's stack and return it (static).\n"
"LogicError when the stack is empty.");

static PyObject *
context_pop(PyObject *type, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = type_state(type);
    BC_REQUIRE_DRIVER(st, NULL);
    CUcontext cur = NULL;
    if (bc_check(st, bc_drv.cuCtxGetCurrent(&cur), "cuCtxGetCurrent") < 0)
        return NULL;
    if (cur == NULL)
        return bc_error_logic(st, "Context.pop(): no context is current on this thread"), NULL;
    bc_Context *ctx = bc_context_wrap(st, cur);
    if (ctx == NULL)
        return NULL;
    CUcontext popped;
    if (bc_check(st, bc_drv.cuCtxPopCurrent(&popped), "cuCtxPopCurrent") < 0) {
        Py_DECREF(ctx);
        return NULL;
    }
    return (PyObject *)ctx;
}

PyDoc_STRVAR(get_current_doc,
"get_current($type)\n--\n\n"
"The Context current on this thread (static), or None.  Reflects the driver's\n"
"state, so contexts made current by other libraries are seen too.");

static PyObject *
context_get_current(PyObject *type, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = type_state(type);
    BC_REQUIRE_DRIVER(st, NULL);
    CUcontext cur = NULL;
    if (bc_check(st, bc_drv.cuCtxGetCurrent(&cur), "cuCtxGetCurrent") < 0)
        return NULL;
    if (cur == NULL)
        Py_RETURN_NONE;
    return (PyObject *)bc_context_wrap(st, cur);
}

/* Run a static call on the current context, activating the default one. */
#define CURRENT_CONTEXT_OR_FAIL(st, type)                                      \
    bc_State *st = type_state(type);                                           \
    bc_Context *cur_ctx = bc_context_current(st);                              \
    if (cur_ctx == NULL)                                                       \
        return NULL;                                                           \
    Py_DECREF(cur_ctx)

PyDoc_STRVAR(synchronize_doc,
"synchronize($type)\n--\n\n"
"Wait for all work of the current context (static; the GIL is released).");

static PyObject *
context_synchronize(PyObject *type, PyObject *Py_UNUSED(ignored))
{
    CURRENT_CONTEXT_OR_FAIL(st, type);
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_host(st, BC_TRACE_SYNC, "Context.synchronize", 0));
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuCtxSynchronize();
    Py_END_ALLOW_THREADS
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, "cuCtxSynchronize") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(get_device_doc, "get_device($type)\n--\n\nThe Device of the current context (static).");

static PyObject *
context_get_device(PyObject *type, PyObject *Py_UNUSED(ignored))
{
    CURRENT_CONTEXT_OR_FAIL(st, type);
    CUdevice dev;
    if (bc_check(st, bc_drv.cuCtxGetDevice(&dev), "cuCtxGetDevice") < 0)
        return NULL;
    return bc_device_new(st, dev);
}

static int
int_arg(PyObject *arg, const char *what, long lo, long hi, long *out)
{
    if (!PyLong_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(arg)->tp_name);
        return -1;
    }
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(arg, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s out of range: %R", what, arg);
        return -1;
    }
    *out = v;
    return 0;
}

PyDoc_STRVAR(set_limit_doc,
"set_limit($type, limit, value)\n--\n\nSet a limit (limit.STACK_SIZE, ...) of the current context (static).\n"
"limit.DEV_RUNTIME_SYNC_DEPTH is accepted and ignored on devices where the driver\n"
"refuses it (compute capability 9.0 and newer: device code cannot synchronize there).");

static PyObject *
context_set_limit(PyObject *type, PyObject *args)
{
    PyObject *which;
    unsigned long long value;
    if (!PyArg_ParseTuple(args, "OK:set_limit", &which, &value))
        return NULL;
    long limit;
    if (int_arg(which, "limit", 0, CU_LIMIT_MAX - 1, &limit) < 0)
        return NULL;
    CURRENT_CONTEXT_OR_FAIL(st, type);
    CUresult rc = bc_drv.cuCtxSetLimit((CUlimit)limit, (size_t)value);
    /* From compute capability 9.0 on, device code cannot call cudaDeviceSynchronize
     * (CUDA 12's dynamic parallelism), so the sync depth limits nothing and the
     * driver refuses it: setting it is then a no-op, as older programs expect. */
    if (rc == CUDA_ERROR_UNSUPPORTED_LIMIT && limit == CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH)
        Py_RETURN_NONE;
    if (bc_check(st, rc, "cuCtxSetLimit") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(get_limit_doc, "get_limit($type, limit)\n--\n\nA limit of the current context (static).");

static PyObject *
context_get_limit(PyObject *type, PyObject *arg)
{
    long limit;
    if (int_arg(arg, "limit", 0, CU_LIMIT_MAX - 1, &limit) < 0)
        return NULL;
    CURRENT_CONTEXT_OR_FAIL(st, type);
    size_t value;
    if (bc_check(st, bc_drv.cuCtxGetLimit(&value, (CUlimit)limit), "cuCtxGetLimit") < 0)
        return NULL;
    return PyLong_FromSize_t(value);
}

PyDoc_STRVAR(set_cache_config_doc,
"set_cache_config($type, config)\n--\n\nPreferred L1/shared split (func_cache) of the current context (static).");

static PyObject *
context_set_cache_config(PyObject *type, PyObject *arg)
{
    long cfg;
    if (int_arg(arg, "cache config", 0, CU_FUNC_CACHE_PREFER_EQUAL, &cfg) < 0)
        return NULL;
    CURRENT_CONTEXT_OR_FAIL(st, type);
    if (bc_check(st, bc_drv.cuCtxSetCacheConfig((CUfunc_cache)cfg), "cuCtxSetCacheConfig") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(get_cache_config_doc,
"get_cache_config($type)\n--\n\n"
"Preferred L1/shared split of the current context (static): a func_cache member.");

static PyObject *
context_get_cache_config(PyObject *type, PyObject *Py_UNUSED(ignored))
{
    CURRENT_CONTEXT_OR_FAIL(st, type);
    CUfunc_cache cfg;
    if (bc_check(st, bc_drv.cuCtxGetCacheConfig(&cfg), "cuCtxGetCacheConfig") < 0)
        return NULL;
    return bc_driver_enum(st, "func_cache", (unsigned long)cfg);
}

PyDoc_STRVAR(set_shared_config_doc,
"set_shared_config($type, config)\n--\n\n"
"Shared memory bank size (shared_config) of the current context (static;\n"
"cuCtxSetSharedMemConfig, deprecated by CUDA: the GPUs CUDA 12 and 13 support\n"
"have fixed banks, so it has no effect).  A driver without the call raises\n"
"driver.Error naming it.");

static PyObject *
context_set_shared_config(PyObject *type, PyObject *arg)
{
    long cfg;
    if (int_arg(arg, "shared config", 0, CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE, &cfg) < 0)
        return NULL;
    CURRENT_CONTEXT_OR_FAIL(st, type);
    if (bc_check(st, bc_drv.cuCtxSetSharedMemConfig((CUsharedconfig)cfg),
                 "cuCtxSetSharedMemConfig") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(get_shared_config_doc,
"get_shared_config($type)\n--\n\n"
"Shared memory bank size of the current context (static): a shared_config member\n"
"(cuCtxGetSharedMemConfig, deprecated by CUDA; driver.Error naming it where the\n"
"driver lacks it).");

static PyObject *
context_get_shared_config(PyObject *type, PyObject *Py_UNUSED(ignored))
{
    CURRENT_CONTEXT_OR_FAIL(st, type);
    CUsharedconfig cfg;
    if (bc_check(st, bc_drv.cuCtxGetSharedMemConfig(&cfg), "cuCtxGetSharedMemConfig") < 0)
        return NULL;
    return bc_driver_enum(st, "shared_config", (unsigned long)cfg);
}

PyDoc_STRVAR(attach_doc,
"attach($type, flags=0)\n--\n\n"
"The Context current on this thread (static; PyCUDA's Context.attach, after\n"
"cuCtxAttach, which CUDA deprecated): LogicError when none is current.  `flags`\n"
"must be 0.  Its detach() lets this object go; the context stays with its owner.");

static PyObject *
context_attach(PyObject *type, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    bc_State *st = type_state(type);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nkw > 1 || (nkw == 1 && !PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0))) ||
        (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "flags") != 0)) {
        PyErr_SetString(PyExc_TypeError, "attach() takes one optional argument: flags");
        return NULL;
    }
    if (nargs + nkw == 1) {
        long flags;
        if (int_arg(args[0], "attach flags", 0, 0, &flags) < 0)
            return NULL;
    }
    BC_REQUIRE_DRIVER(st, NULL);
    CUcontext cur = NULL;
    if (bc_check(st, bc_drv.cuCtxGetCurrent(&cur), "cuCtxGetCurrent") < 0)
        return NULL;
    if (cur == NULL)
        return bc_error_logic(st, "Context.attach(): no context is current on this thread"),
               NULL;
    return (PyObject *)bc_context_wrap(st, cur);
}

PyDoc_STRVAR(enable_peer_access_doc,
"enable_peer_access($type, peer, flags=0)\n--\n\n"
"Let the current context access memory of Context `peer` (static).");

static PyObject *
context_peer_access(PyObject *type, PyObject *args, PyObject *kwargs, int enable)
{
    static char *kwlist[] = {"peer", "flags", NULL};
    PyObject *peer;
    unsigned int flags = 0;
    bc_State *st0 = type_state(type);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, enable ? "O!|I:enable_peer_access" : "O!:disable_peer_access",
                                     kwlist, (PyTypeObject *)st0->ContextType, &peer, &flags))
        return NULL;
    if (check_usable((bc_Context *)peer) < 0)
        return NULL;
    CURRENT_CONTEXT_OR_FAIL(st, type);
    CUcontext h = ((bc_Context *)peer)->handle;
    if (enable ? bc_check(st, bc_drv.cuCtxEnablePeerAccess(h, flags), "cuCtxEnablePeerAccess")
               : bc_check(st, bc_drv.cuCtxDisablePeerAccess(h), "cuCtxDisablePeerAccess"))
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
context_enable_peer_access(PyObject *type, PyObject *args, PyObject *kwargs)
{
    return context_peer_access(type, args, kwargs, 1);
}

PyDoc_STRVAR(disable_peer_access_doc,
"disable_peer_access($type, peer)\n--\n\nUndo enable_peer_access (static).");

static PyObject *
context_disable_peer_access(PyObject *type, PyObject *args, PyObject *kwargs)
{
    return context_peer_access(type, args, kwargs, 0);
}

PyDoc_STRVAR(stream_priority_range_doc,
"get_stream_priority_range($type)\n--\n\n(least, greatest) stream priority of the current context (static).");

static PyObject *
context_stream_priority_range(PyObject *type, PyObject *Py_UNUSED(ignored))
{
    CURRENT_CONTEXT_OR_FAIL(st, type);
    int least, greatest;
    if (bc_check(st, bc_drv.cuCtxGetStreamPriorityRange(&least, &greatest),
                 "cuCtxGetStreamPriorityRange") < 0)
        return NULL;
    return Py_BuildValue("(ii)", least, greatest);
}

PyDoc_STRVAR(get_api_version_doc, "get_api_version($self)\n--\n\nThe API version the context was made with.");

static PyObject *
context_get_api_version(bc_Context *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (check_usable(self) < 0)
        return NULL;
    unsigned int v;
    if (bc_check(st, bc_drv.cuCtxGetApiVersion(self->handle, &v), "cuCtxGetApiVersion") < 0)
        return NULL;
    return PyLong_FromUnsignedLong(v);
}

PyDoc_STRVAR(detach_doc,
"detach($self)\n--\n\n"
"Release the context now: a primary context's retain is dropped, a context of\n"
"make_context() is destroyed (and popped if current).  Idempotent.  Objects made\n"
"in it raise LogicError from then on.  A primary context keeps its retain while\n"
"memory allocated in it lives, until the last of it is freed or collected, so\n"
"that memory is given back rather than leaked when the context lives on (another\n"
"wrapper or library retains it); other objects' release is skipped.  Streams made\n"
"in it that still keep the host buffers of asynchronous copies are synchronized\n"
"first (GIL released) and let them go.");

static PyObject *
context_detach(bc_Context *self, PyObject *Py_UNUSED(ignored))
{
    if (self->released)
        Py_RETURN_NONE;
    /* first: the host buffers its streams keep are often all that memory is */
    run_hooks(BC_CTX_DETACHING, self, 0);
    context_drop_caches(self, self->kind != BC_CTX_OWNED);
    if (!context_mark_released(self)) /* detached meanwhile (another thread, a destructor) */
        Py_RETURN_NONE;
    if (self->kind == BC_CTX_PRIMARY && self->live_memory > 0) {
        run_hooks(BC_CTX_KEEP_NOTHING, self, 0);
        Py_RETURN_NONE; /* bc_context_memory_freed lets go with the last of it */
    }
    if (bc_check(bc_state_of((PyObject *)self), context_let_go(self), release_routine(self->kind)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
context_enter(bc_Context *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *r = context_push(self, NULL);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    return Py_NewRef(self);
}

static PyObject *
context_exit(bc_Context *self, PyObject *args)
{
    bc_State *st = bc_state_of((PyObject *)self);
    PyObject *exc_type = PyTuple_GET_SIZE(args) > 0 ? PyTuple_GET_ITEM(args, 0) : Py_None;
    CUcontext popped = NULL;
    CUresult rc = bc_drv.cuCtxPopCurrent(&popped);
    if (exc_type != Py_None)
        Py_RETURN_FALSE; /* let the original exception through */
    if (bc_check(st, rc, "cuCtxPopCurrent") < 0)
        return NULL;
    if (popped != self->handle && !(self->released && self->kind == BC_CTX_OWNED))
        return bc_error_logic(st, "leaving `with ctx:` popped another context: the context "
                                  "stack was changed inside the block and not restored"),
               NULL;
    Py_RETURN_FALSE;
}

static PyObject *
context_get_handle(bc_Context *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr((void *)self->handle);
}

static PyObject *
context_get_device_prop(bc_Context *self, void *Py_UNUSED(closure))
{
    return bc_device_new(bc_state_of((PyObject *)self), self->device);
}

static PyObject *
context_get_is_primary(bc_Context *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->kind == BC_CTX_PRIMARY);
}

static PyObject *
context_get_released(bc_Context *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->released);
}

static PyObject *
context_get_kernels(bc_Context *self, void *Py_UNUSED(closure))
{
    if (check_usable(self) < 0)
        return NULL;
    if (self->kernels == NULL && (self->kernels = PyDict_New()) == NULL)
        return NULL;
    return Py_NewRef(self->kernels);
}

static PyObject *
context_get_array_pool(bc_Context *self, void *Py_UNUSED(closure))
{
    if (array_pool_getter == NULL)
        Py_RETURN_NONE;
    return array_pool_getter(bc_state_of((PyObject *)self), self);
}

static PyMethodDef context_methods[] = {
    {"push", (PyCFunction)context_push, METH_NOARGS, push_doc},
    {"pop", (PyCFunction)context_pop, METH_NOARGS | METH_CLASS, pop_doc},
    {"get_current", (PyCFunction)context_get_current, METH_NOARGS | METH_CLASS, get_current_doc},
    {"synchronize", (PyCFunction)context_synchronize, METH_NOARGS | METH_CLASS, synchronize_doc},
    {"get_device", (PyCFunction)context_get_device, METH_NOARGS | METH_CLASS, get_device_doc},
    {"set_limit", (PyCFunction)context_set_limit, METH_VARARGS | METH_CLASS, set_limit_doc},
    {"get_limit", (PyCFunction)context_get_limit, METH_O | METH_CLASS, get_limit_doc},
    {"set_cache_config", (PyCFunction)context_set_cache_config, METH_O | METH_CLASS,
     set_cache_config_doc},
    {"get_cache_config", (PyCFunction)context_get_cache_config, METH_NOARGS | METH_CLASS,
     get_cache_config_doc},
    {"set_shared_config", (PyCFunction)context_set_shared_config, METH_O | METH_CLASS,
     set_shared_config_doc},
    {"get_shared_config", (PyCFunction)context_get_shared_config, METH_NOARGS | METH_CLASS,
     get_shared_config_doc},
    {"attach", (PyCFunction)(void (*)(void))context_attach,
     METH_FASTCALL | METH_KEYWORDS | METH_CLASS, attach_doc},
    {"enable_peer_access", (PyCFunction)(void (*)(void))context_enable_peer_access,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, enable_peer_access_doc},
    {"disable_peer_access", (PyCFunction)(void (*)(void))context_disable_peer_access,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, disable_peer_access_doc},
    {"get_stream_priority_range", (PyCFunction)context_stream_priority_range,
     METH_NOARGS | METH_CLASS, stream_priority_range_doc},
    {"get_api_version", (PyCFunction)context_get_api_version, METH_NOARGS, get_api_version_doc},
    {"detach", (PyCFunction)context_detach, METH_NOARGS, detach_doc},
    {"close", (PyCFunction)context_detach, METH_NOARGS, "close($self)\n--\n\nSame as detach()."},
    {"__enter__", (PyCFunction)context_enter, METH_NOARGS,
     "__enter__($self)\n--\n\nPush the context."},
    {"__exit__", (PyCFunction)context_exit, METH_VARARGS,
     "__exit__($self, *exc_info)\n--\n\nPop the context."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef context_getset[] = {
    BC_DICT_GETSET,
    {"handle", (getter)context_get_handle, NULL, "The CUcontext as an int.", NULL},
    {"device", (getter)context_get_device_prop, NULL, "The Device this context is on.", NULL},
    {"is_primary", (getter)context_get_is_primary, NULL, "Whether this is a primary context.", NULL},
    {"released", (getter)context_get_released, NULL, "Whether detach() was called.", NULL},
    {"kernel_cache", (getter)context_get_kernels, NULL,
     "A dict the array layer keeps its compiled kernels in: owned by this context\n"
     "and emptied when it is detached, so kernels never outlive it.  LogicError\n"
     "once detached.", NULL},
    {"array_pool", (getter)context_get_array_pool, NULL,
     "The MemPool GPUArray memory comes from: this context's own stream-ordered\n"
     "pool, which keeps freed memory for reuse (release threshold UINT64_MAX)\n"
     "instead of handing it back at every synchronize.  trim_to(0) gives unused\n"
     "memory back; used_mem_current/reserved_mem_current tell what it holds.  None\n"
     "before the first GPUArray allocation the block cache does not serve, where\n"
     "the device has no memory pools (the default pool is used then), and once the\n"
     "context is detached.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef context_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Context, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_Context, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(context_doc,
"A CUDA context.  Get one with Device.retain_primary_context() (shared with the\n"
"runtime API, CuPy and PyTorch) or Device.make_context().  `with ctx:` pushes it\n"
"for the block.  Methods marked static act on the current context.");

static PyType_Slot context_slots[] = {
    {Py_tp_dealloc, context_dealloc},
    {Py_tp_traverse, context_traverse},
    {Py_tp_clear, context_clear},
    {Py_tp_repr, context_repr},
    {Py_tp_hash, context_hash},
    {Py_tp_richcompare, context_richcompare},
    {Py_tp_methods, context_methods},
    {Py_tp_getset, context_getset},
    {Py_tp_members, context_members},
    {Py_tp_doc, (void *)context_doc},
    {0, NULL},
};

static PyType_Spec context_spec = {
    .name = "barecuda.driver.Context",
    .basicsize = sizeof(bc_Context),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION |
             Py_TPFLAGS_HAVE_GC,
    .slots = context_slots,
};

/* ---------------------------------------------------------------- profiler */

/* cuProfilerStart/Stop act on the current context: make the default one current
 * when none is, as every other call does. */
static PyObject *
profiler_call(PyObject *m, int start)
{
    bc_State *st = bc_state_from_module(m);
    if (bc_context_require(st) < 0)
        return NULL;
    CUresult rc = start ? bc_drv.cuProfilerStart() : bc_drv.cuProfilerStop();
    if (bc_check(st, rc, start ? "cuProfilerStart" : "cuProfilerStop") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(start_profiler_doc,
"start_profiler()\n--\n\n"
"Start collecting profile data in the current context (cuProfilerStart), for a\n"
"profiler such as Nsight Systems started with capture-range=cudaProfilerApi.\n"
"Nothing happens when no profiler is attached.");

static PyObject *
bc_start_profiler(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    return profiler_call(m, 1);
}

PyDoc_STRVAR(stop_profiler_doc,
"stop_profiler()\n--\n\n"
"Stop collecting profile data in the current context and flush it (cuProfilerStop).");

static PyObject *
bc_stop_profiler(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    return profiler_call(m, 0);
}

static PyMethodDef context_functions[] = {
    {"start_profiler", bc_start_profiler, METH_NOARGS, start_profiler_doc},
    {"stop_profiler", bc_stop_profiler, METH_NOARGS, stop_profiler_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_context_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &context_spec, NULL, &st->ContextType) < 0)
        return -1;
    bc_trace_set_context_require(bc_context_require); /* for _trace_start() */
    return PyModule_AddFunctions(m, context_functions);
}
