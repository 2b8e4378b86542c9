/* SPDX-License-Identifier: MIT */
/* Device memory: allocations (plain, pitched, stream-ordered, managed, IPC) and
 * pooled blocks.  The pointer conversion every copy and launch uses and pointer
 * attributes are in src/pointer.c, MemPool in src/mempool.c, host memory in
 * src/hostmem.c.
 *
 * Every allocation holds its Context; free()/close()/unregister() are idempotent
 * and release the memory with that context current, from any thread.  After a
 * release every use raises LogicError instead of touching freed memory, and a
 * release after the context was detached is skipped quietly.  Managed memory
 * handed out as a NumPy array lives as long as the array: the allocation object is
 * the array's base.
 *
 * What the floors above must hear of (an allocation an argument memo kept ends, a
 * block-cached allocation is collected, mem_alloc() runs out of memory) goes
 * through the hooks they register here (bc_memory_on_*, memory.h); this file
 * names none of them. */
#include "barecuda/memory.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/trace.h"
#include "barecuda/loader.h"
#include "barecuda/stream.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ hooks */

/* Registered at module init by the floors above (memory.h says who and why). */
static void (*on_watched_end)(void);
static int (*on_cached_end)(bc_Context *ctx, CUdeviceptr ptr, size_t size);
static int (*on_out_of_memory)(bc_Context *ctx, int step);

void
bc_memory_on_watched_end(void (*fn)(void))
{
    on_watched_end = fn;
}

void
bc_memory_on_cached_end(int (*fn)(bc_Context *ctx, CUdeviceptr ptr, size_t size))
{
    on_cached_end = fn;
}

void
bc_memory_on_out_of_memory(int (*fn)(bc_Context *ctx, int step))
{
    on_out_of_memory = fn;
}

/* ------------------------------------------------------------------ helpers */

/* A type's name without its module ("DeviceAllocation"). */
static const char *
short_name(PyObject *obj)
{
    const char *name = Py_TYPE(obj)->tp_name;
    const char *dot = strrchr(name, '.');
    return dot ? dot + 1 : name;
}

/* ---------------------------------------- DeviceAllocation and its relatives */

/* Release the memory (GIL held or not: touches no Python object).  `s` is the
 * stream an async allocation is freed on; `sync` asks for a context
 * synchronize first (its own stream was closed). */
static CUresult
allocation_release(bc_DeviceAllocation *self, CUstream s, int sync)
{
    CUresult rc = CUDA_SUCCESS;
    if (self->freed)
        return rc;
    self->freed = 1;
    if (self->in_memo && on_watched_end != NULL)
        on_watched_end();
    if (self->ctx == NULL || self->ctx->let_go || !bc_drv_ready)
        return rc;
    int entered = bc_context_enter(self->ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    switch (self->kind) {
    case BC_ALLOC_ASYNC:
        if (sync)
            rc = bc_drv.cuCtxSynchronize();
        if (rc == CUDA_SUCCESS)
            rc = bc_drv.cuMemFreeAsync(self->ptr, s);
        break;
    case BC_ALLOC_IPC:
        rc = bc_drv.cuIpcCloseMemHandle(self->ptr);
        break;
    default:
        rc = bc_drv.cuMemFree(self->ptr);
    }
    bc_context_leave(entered);
    return rc;
}

/* The stream an async allocation is freed on by default, and whether a
 * synchronize is needed because that Stream was closed meanwhile. */
static CUstream
own_stream(bc_State *st, bc_DeviceAllocation *self, int *sync)
{
    *sync = 0;
    if (self->stream == NULL)
        return self->stream_handle;
    bc_Stream *so = bc_stream_check(st, self->stream);
    if (so != NULL && so->handle == NULL) {
        *sync = 1;
        return NULL;
    }
    return self->stream_handle;
}

static const char *
release_routine(bc_DeviceAllocation *self)
{
    switch (self->kind) {
    case BC_ALLOC_ASYNC:
        return "cuMemFreeAsync";
    case BC_ALLOC_IPC:
        return "cuIpcCloseMemHandle";
    default:
        return "cuMemFree";
    }
}

static void
allocation_dealloc(bc_DeviceAllocation *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->in_memo && on_watched_end != NULL) /* its address may be the next allocation's */
        on_watched_end();
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->cached && !self->freed && self->ctx != NULL && !self->ctx->released &&
        on_cached_end != NULL && on_cached_end(self->ctx, self->ptr, self->size))
        self->freed = 1; /* kept for reuse by the next allocation of its size class */
    bc_State *st = bc_state_in_destructor((PyObject *)self);
    if (!self->freed && st != NULL) { /* no module: the process is ending, and the memory with it */
        int sync;
        CUstream s = own_stream(st, self, &sync);
        bc_error_in_destructor(allocation_release(self, s, sync), release_routine(self),
                               (PyObject *)self);
    }
    if (st != NULL) /* released above; not when the process is ending (no module) */
        bc_context_memory_freed(self->ctx, &self->counted);
    Py_CLEAR(self->stream);
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* tp_clear: only the instance dict (the parents stay until dealloc). */
static int
allocation_clear(bc_DeviceAllocation *self)
{
    Py_CLEAR(self->dict);
    return 0;
}

static int
allocation_traverse(bc_DeviceAllocation *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->ctx);
    Py_VISIT(self->stream);
    return 0;
}

/* Set self (zeroed by tp_alloc) over memory already allocated (takes new
 * references to ctx and stream). */
static void
allocation_fill(bc_DeviceAllocation *self, bc_Context *ctx, CUdeviceptr ptr, size_t size,
                int kind, PyObject *stream, CUstream stream_handle)
{
    self->ptr = ptr;
    self->size = size;
    self->ctx = (bc_Context *)Py_NewRef(ctx);
    self->stream = (stream == NULL || stream == Py_None) ? NULL : Py_NewRef(stream);
    self->stream_handle = stream_handle;
    self->kind = kind;
    self->freed = 0;
    self->cached = 0;
    self->exports = 0;
    self->in_memo = 0;
    bc_context_memory_made(ctx, &self->counted);
}

/* A new allocation object of `type` for memory already allocated (takes new
 * references to ctx and stream). */
static PyObject *
allocation_wrap(PyObject *type, bc_Context *ctx, CUdeviceptr ptr, size_t size, int kind,
                PyObject *stream, CUstream stream_handle)
{
    /* tp_alloc: zeroed (a subclass's __slots__ and __dict__ too) and tracked */
    bc_DeviceAllocation *self =
        (bc_DeviceAllocation *)((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
    if (self == NULL)
        return NULL;
    allocation_fill(self, ctx, ptr, size, kind, stream, stream_handle);
    return (PyObject *)self;
}

PyObject *
bc_allocation_new(bc_State *st, bc_Context *ctx, CUdeviceptr ptr, size_t size, int kind,
                  PyObject *stream, CUstream stream_handle)
{
    return allocation_wrap(st->DeviceAllocationType, ctx, ptr, size, kind, stream, stream_handle);
}

PyDoc_STRVAR(mem_alloc_doc,
"mem_alloc(nbytes)\n--\n\n"
"Allocate `nbytes` of device memory in the current context (cuMemAlloc) and\n"
"return a DeviceAllocation.  On out-of-memory the memory GPUArrays keep cached\n"
"(block cache, Context.array_pool) is given back and the allocation retried;\n"
"MemoryError when the device is still out of memory.");

static PyObject *
bc_mem_alloc(PyObject *m, PyObject *arg)
{
    bc_State *st = bc_state_from_module(m);
    size_t n;
    if (bc_arg_size(arg, "mem_alloc(): nbytes", &n) < 0)
        return NULL;
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "mem_alloc(): nbytes must be positive");
        return NULL;
    }
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    CUdeviceptr ptr;
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_host(st, BC_TRACE_ALLOC, "mem_alloc", n));
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemAlloc(&ptr, n);
    Py_END_ALLOW_THREADS
    /* memory the array layer keeps (block cache, Context.array_pool) goes back first */
    for (int step = 0; rc == CUDA_ERROR_OUT_OF_MEMORY && step < 2; step++) {
        if (on_out_of_memory == NULL || !on_out_of_memory(ctx, step))
            break;
        Py_BEGIN_ALLOW_THREADS
        rc = bc_drv.cuMemAlloc(&ptr, n);
        Py_END_ALLOW_THREADS
    }
    BC_TRACE_END(st, tt, rc);
    PyObject *out = NULL;
    if (bc_check(st, rc, "cuMemAlloc") == 0) {
        out = allocation_wrap(st->DeviceAllocationType, ctx, ptr, n, BC_ALLOC_DEVICE, NULL, NULL);
        if (out == NULL)
            bc_drv.cuMemFree(ptr);
    }
    Py_DECREF(ctx);
    return out;
}

PyDoc_STRVAR(mem_alloc_pitch_doc,
"mem_alloc_pitch(width, height, access_size)\n--\n\n"
"Allocate `height` rows of at least `width` bytes each, padded for coalesced\n"
"access by elements of `access_size` bytes (4, 8 or 16) (cuMemAllocPitch).\n"
"Returns (DeviceAllocation, pitch_in_bytes).");

static PyObject *
bc_mem_alloc_pitch(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"width", "height", "access_size", NULL};
    PyObject *ow, *oh, *oa;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:mem_alloc_pitch", kwlist, &ow, &oh, &oa))
        return NULL;
    size_t w, h;
    long long access;
    if (bc_arg_size(ow, "mem_alloc_pitch(): width", &w) < 0 ||
        bc_arg_size(oh, "mem_alloc_pitch(): height", &h) < 0 ||
        bc_arg_long(oa, "mem_alloc_pitch(): access_size", 0, 1024, &access) < 0)
        return NULL;
    if (w == 0 || h == 0) {
        PyErr_SetString(PyExc_ValueError, "mem_alloc_pitch(): width and height must be positive");
        return NULL;
    }
    if (access != 4 && access != 8 && access != 16) {
        PyErr_Format(PyExc_ValueError, "mem_alloc_pitch(): access_size must be 4, 8 or 16, got %lld",
                     access);
        return NULL;
    }
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    CUdeviceptr ptr;
    size_t pitch = 0;
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_host(st, BC_TRACE_ALLOC, "mem_alloc_pitch", (unsigned long long)w * h));
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemAllocPitch(&ptr, &pitch, w, h, (unsigned int)access);
    Py_END_ALLOW_THREADS
    BC_TRACE_END(st, tt, rc);
    PyObject *out = NULL;
    if (bc_check(st, rc, "cuMemAllocPitch") == 0) {
        PyObject *a = allocation_wrap(st->DeviceAllocationType, ctx, ptr, pitch * h,
                                      BC_ALLOC_DEVICE, NULL, NULL);
        if (a == NULL)
            bc_drv.cuMemFree(ptr);
        else
            out = Py_BuildValue("(Nn)", a, (Py_ssize_t)pitch);
    }
    Py_DECREF(ctx);
    return out;
}

PyDoc_STRVAR(mem_get_info_doc,
"mem_get_info()\n--\n\n(free, total) bytes of device memory of the current context's device.");

static PyObject *
bc_mem_get_info(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    if (bc_context_require(st) < 0)
        return NULL;
    size_t free_b, total;
    if (bc_check(st, bc_drv.cuMemGetInfo(&free_b, &total), "cuMemGetInfo") < 0)
        return NULL;
    return Py_BuildValue("(nn)", (Py_ssize_t)free_b, (Py_ssize_t)total);
}

PyDoc_STRVAR(free_doc,
"free($self, stream=None)\n--\n\n"
"Release the memory now (idempotent); later uses raise LogicError.  Memory\n"
"from mem_alloc_async() is freed in stream order on the stream it was\n"
"allocated on, or on `stream` when given; other memory ignores `stream`.");

static PyObject *
allocation_free(bc_DeviceAllocation *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"stream", NULL};
    PyObject *stream = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:free", kwlist, &stream))
        return NULL;
    if (self->freed)
        Py_RETURN_NONE;
    if (self->exports > 0) {
        PyErr_Format(PyExc_BufferError, "%s.free(): a host view of it (as_buffer or "
                     "memoryview) is still in use", short_name((PyObject *)self));
        return NULL;
    }
    int sync = 0;
    CUstream s = NULL;
    if (self->kind == BC_ALLOC_ASYNC) {
        if (stream != NULL) {
            if (bc_stream_convert(st, stream, &s) < 0)
                return NULL;
        }
        else
            s = own_stream(st, self, &sync);
    }
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = allocation_release(self, s, sync);
    Py_END_ALLOW_THREADS
    bc_context_memory_freed(self->ctx, &self->counted);
    if (bc_check(st, rc, release_routine(self)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
allocation_int(bc_DeviceAllocation *self)
{
    if (bc_allocation_usable(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)self->ptr);
}

static PyObject *
allocation_repr(bc_DeviceAllocation *self)
{
    if (self->kind == BC_ALLOC_UNSET)
        return PyUnicode_FromFormat("<barecuda.driver.%s (not initialised)>",
                                    short_name((PyObject *)self));
    return PyUnicode_FromFormat("<barecuda.driver.%s 0x%llx, %zu bytes%s>", short_name((PyObject *)self),
                                (unsigned long long)self->ptr, self->size,
                                self->freed ? (self->kind == BC_ALLOC_IPC ? ", closed" : ", freed")
                                            : "");
}

static PyObject *
allocation_get_size(bc_DeviceAllocation *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->size);
}

static PyObject *
allocation_get_context(bc_DeviceAllocation *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->ctx ? (PyObject *)self->ctx : Py_None);
}

static PyObject *
allocation_get_freed(bc_DeviceAllocation *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->freed && self->kind != BC_ALLOC_UNSET);
}

static PyObject *
allocation_get_stream(bc_DeviceAllocation *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->stream ? self->stream : Py_None);
}

static PyObject *
allocation_get_is_async(bc_DeviceAllocation *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->kind == BC_ALLOC_ASYNC);
}

PyDoc_STRVAR(as_buffer_doc,
"as_buffer($self, size, offset=0)\n--\n\n"
"A writable memoryview of `size` bytes from `offset` on, for the CPU (as PyCUDA).\n"
"Only memory the CPU can read directly (managed memory) can be viewed: plain\n"
"device memory raises driver.LogicError (copy it with memcpy_dtoh instead).\n"
"ValueError past the end; free() raises BufferError while the view lives.");

static PyObject *
allocation_as_buffer(bc_DeviceAllocation *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"size", "offset", NULL};
    PyObject *size, *offset = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:as_buffer", kwlist, &size, &offset) ||
        bc_allocation_usable(st, self) < 0)
        return NULL;
    int entered = bc_context_enter(self->ctx);
    PyObject *out = bc_host_view(st, (PyObject *)self, &self->exports, self->ptr, self->size,
                                 size, offset, "as_buffer");
    bc_context_leave(entered);
    /* size's or offset's __index__ runs Python code that may have freed it */
    if (out != NULL && bc_allocation_usable(st, self) < 0)
        Py_CLEAR(out);
    return out;
}

static PyMethodDef allocation_methods[] = {
    {"free", (PyCFunction)(void (*)(void))allocation_free, METH_VARARGS | METH_KEYWORDS, free_doc},
    {"as_buffer", (PyCFunction)(void (*)(void))allocation_as_buffer, METH_VARARGS | METH_KEYWORDS,
     as_buffer_doc},
    {NULL, NULL, 0, NULL},
};

/* CUDA Array Interface v3 of the raw bytes, so libraries that take device buffers
 * (mpi4py's CUDA-aware calls, Numba, CuPy) accept an allocation directly. */
static PyObject *
allocation_get_cai(bc_DeviceAllocation *self, void *Py_UNUSED(closure))
{
    if (bc_allocation_usable(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    return Py_BuildValue("{s:(n),s:s,s:(KO),s:i,s:O,s:O}", "shape", (Py_ssize_t)self->size,
                         "typestr", "|u1", "data", (unsigned long long)self->ptr, Py_False,
                         "version", 3, "strides", Py_None, "stream", Py_None);
}

static PyGetSetDef allocation_getset[] = {
    BC_DICT_GETSET,
    {"size", (getter)allocation_get_size, NULL, "Size in bytes.", NULL},
    {"__cuda_array_interface__", (getter)allocation_get_cai, NULL,
     "The memory as CUDA Array Interface v3 bytes: shape (size,), typestr '|u1'.", NULL},
    {"context", (getter)allocation_get_context, NULL, "The Context owning the memory.", NULL},
    {"freed", (getter)allocation_get_freed, NULL, "Whether the memory was released.", NULL},
    {"stream", (getter)allocation_get_stream, NULL,
     "The stream a stream-ordered allocation is freed on (None otherwise).", NULL},
    {"is_async", (getter)allocation_get_is_async, NULL,
     "Whether this memory came from mem_alloc_async().", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef allocation_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_DeviceAllocation, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_DeviceAllocation, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(allocation_doc,
"Device memory from mem_alloc(), mem_alloc_pitch() or mem_alloc_async().\n"
"int(a) is the device pointer; pass it to kernels and copies directly.");

static PyType_Slot allocation_slots[] = {
    {Py_tp_dealloc, allocation_dealloc},
    {Py_tp_traverse, allocation_traverse},
    {Py_tp_clear, allocation_clear},
    {Py_tp_repr, allocation_repr},
    {Py_nb_int, allocation_int},
    {Py_nb_index, allocation_int},
    {Py_tp_methods, allocation_methods},
    {Py_tp_getset, allocation_getset},
    {Py_tp_members, allocation_members},
    {Py_tp_doc, (void *)allocation_doc},
    {0, NULL},
};

static PyType_Spec allocation_spec = {
    .name = "barecuda.driver.DeviceAllocation",
    .basicsize = sizeof(bc_DeviceAllocation),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = allocation_slots,
};

/* ------------------------------------------------ stream-ordered allocation */

PyDoc_STRVAR(mem_alloc_async_doc,
"mem_alloc_async(nbytes, stream=None, pool=None)\n--\n\n"
"Allocate `nbytes` in stream order on `stream` from `pool` (a MemPool; default:\n"
"the current device's default pool) with cuMemAllocFromPoolAsync.  The\n"
"DeviceAllocation is freed with cuMemFreeAsync on the same stream (or the\n"
"stream given to free()).");

static PyObject *
bc_mem_alloc_async(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"nbytes", "stream", "pool", NULL};
    PyObject *on, *stream = Py_None, *pool = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:mem_alloc_async", kwlist, &on, &stream,
                                     &pool))
        return NULL;
    size_t n;
    if (bc_arg_size(on, "mem_alloc_async(): nbytes", &n) < 0)
        return NULL;
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "mem_alloc_async(): nbytes must be positive");
        return NULL;
    }
    if (pool != Py_None && Py_TYPE(pool) != (PyTypeObject *)st->MemPoolType) {
        PyErr_Format(PyExc_TypeError, "mem_alloc_async(): pool must be a MemPool or None, not %.100s",
                     Py_TYPE(pool)->tp_name);
        return NULL;
    }
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    PyObject *out = NULL;
    CUstream s;
    CUmemoryPool hpool;
    if (bc_stream_convert(st, stream, &s) < 0)
        goto done;
    if (pool != Py_None)
        hpool = ((bc_MemPool *)pool)->handle;
    else if (bc_check(st, bc_drv.cuDeviceGetDefaultMemPool(&hpool, ctx->device),
                      "cuDeviceGetDefaultMemPool") < 0)
        goto done;
    CUdeviceptr ptr;
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_host(st, BC_TRACE_ALLOC, "mem_alloc_async", n));
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemAllocFromPoolAsync(&ptr, n, hpool, s);
    Py_END_ALLOW_THREADS
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, "cuMemAllocFromPoolAsync") < 0)
        goto done;
    out = allocation_wrap(st->DeviceAllocationType, ctx, ptr, n, BC_ALLOC_ASYNC, stream, s);
    if (out == NULL)
        bc_drv.cuMemFreeAsync(ptr, s);
done:
    Py_DECREF(ctx);
    return out;
}

/* ---------------------------------------------------------- IPC memory */

PyDoc_STRVAR(mem_get_ipc_handle_doc,
"mem_get_ipc_handle(ptr)\n--\n\n"
"A 64-byte bytes handle another process opens with IPCMemoryHandle(handle)\n"
"(cuIpcGetMemHandle).  `ptr` must be the start of a mem_alloc() allocation.");

static PyObject *
bc_mem_get_ipc_handle(PyObject *m, PyObject *arg)
{
    bc_State *st = bc_state_from_module(m);
    CUdeviceptr ptr;
    if (bc_pointer_convert(st, arg, &ptr, NULL) < 0 || bc_context_require(st) < 0)
        return NULL;
    CUipcMemHandle h;
    if (bc_check(st, bc_drv.cuIpcGetMemHandle(&h, ptr), "cuIpcGetMemHandle") < 0)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(h.reserved, sizeof h.reserved);
    if (out != NULL && bc_ipc_note_export(st, out) < 0)
        Py_CLEAR(out);
    return out;
}

int
bc_ipc_note_export(bc_State *st, PyObject *handle)
{
    if (st->ipc_exported == NULL && (st->ipc_exported = PySet_New(NULL)) == NULL)
        return -1;
    return PySet_Add(st->ipc_exported, handle);
}

int
bc_ipc_check_foreign(bc_State *st, const char *data, Py_ssize_t len, const char *who)
{
    if (st->ipc_exported == NULL)
        return 0;
    PyObject *key = PyBytes_FromStringAndSize(data, len);
    if (key == NULL)
        return -1;
    int mine = PySet_Contains(st->ipc_exported, key);
    Py_DECREF(key);
    if (mine > 0)
        return bc_error_logic(st, "%s: this handle was exported by this same process; CUDA "
                              "opens IPC handles only in other processes (use the original "
                              "object here)", who);
    return mine;
}

/* Parse IPCMemoryHandle's arguments and open the handle in the current context:
 * 0 with *ptr, *size and a new reference *ctx, or -1. */
static int
ipc_open(bc_State *st, PyObject *args, PyObject *kwargs, bc_Context **ctx, CUdeviceptr *ptr,
         size_t *size)
{
    static char *kwlist[] = {"handle", "flags", NULL};
    PyObject *handle, *oflags = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:IPCMemoryHandle", kwlist, &handle, &oflags))
        return -1;
    unsigned int flags = CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS;
    if (oflags != NULL &&
        bc_arg_flags(oflags, "IPCMemoryHandle(): flags", CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
                     &flags) < 0)
        return -1;
    Py_buffer view;
    if (PyObject_GetBuffer(handle, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "IPCMemoryHandle(): handle must be the bytes from mem_get_ipc_handle(), "
                     "not %.100s",
                     Py_TYPE(handle)->tp_name);
        return -1;
    }
    CUipcMemHandle h;
    int bad = view.len != (Py_ssize_t)sizeof h.reserved;
    if (!bad)
        memcpy(h.reserved, view.buf, sizeof h.reserved);
    Py_ssize_t len = view.len;
    PyBuffer_Release(&view);
    if (bad) {
        PyErr_Format(PyExc_ValueError, "IPCMemoryHandle(): handle must be %d bytes, got %zd",
                     (int)sizeof h.reserved, len);
        return -1;
    }
    if (bc_ipc_check_foreign(st, h.reserved, (Py_ssize_t)sizeof h.reserved,
                             "IPCMemoryHandle()") < 0)
        return -1;
    *ctx = bc_context_current(st);
    if (*ctx == NULL)
        return -1;
    CUdeviceptr base;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuIpcOpenMemHandle(ptr, h, flags);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuIpcOpenMemHandle") < 0) {
        Py_CLEAR(*ctx);
        return -1;
    }
    if (bc_drv.cuMemGetAddressRange(&base, size, *ptr) != CUDA_SUCCESS)
        *size = SIZE_MAX;
    return 0;
}

/* IPCMemoryHandle(handle) opens the memory in __new__.  A subclass (PyCUDA's
 * classes are built in __init__, so its own __init__ may take other arguments)
 * gets an unset object from __new__ (kind BC_ALLOC_UNSET, counted as released)
 * and IPCMemoryHandle.__init__ opens the memory. */
static PyObject *
ipc_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type(type);
    if (st == NULL)
        return NULL;
    if (type != (PyTypeObject *)st->IPCMemoryHandleType) {
        bc_DeviceAllocation *self = (bc_DeviceAllocation *)type->tp_alloc(type, 0);
        if (self != NULL) {
            self->kind = BC_ALLOC_UNSET;
            self->freed = 1; /* nothing to release */
        }
        return (PyObject *)self;
    }
    bc_Context *ctx;
    CUdeviceptr ptr;
    size_t size;
    if (ipc_open(st, args, kwargs, &ctx, &ptr, &size) < 0)
        return NULL;
    PyObject *out = allocation_wrap((PyObject *)type, ctx, ptr, size, BC_ALLOC_IPC, NULL, NULL);
    if (out == NULL)
        bc_drv.cuIpcCloseMemHandle(ptr);
    Py_DECREF(ctx);
    return out;
}

static int
ipc_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of(self);
    if (Py_IS_TYPE(self, (PyTypeObject *)st->IPCMemoryHandleType))
        return 0; /* opened by __new__ from the same arguments */
    bc_DeviceAllocation *a = (bc_DeviceAllocation *)self;
    if (a->kind != BC_ALLOC_UNSET) {
        PyErr_Format(PyExc_TypeError, "IPCMemoryHandle.__init__() called twice on this %.100s",
                     Py_TYPE(self)->tp_name);
        return -1;
    }
    bc_Context *ctx;
    CUdeviceptr ptr;
    size_t size;
    if (ipc_open(st, args, kwargs, &ctx, &ptr, &size) < 0)
        return -1;
    allocation_fill(a, ctx, ptr, size, BC_ALLOC_IPC, NULL, NULL);
    Py_DECREF(ctx);
    return 0;
}

PyDoc_STRVAR(close_doc,
"close($self)\n--\n\nUnmap the other process's memory now (idempotent).");

static PyObject *
ipc_close(bc_DeviceAllocation *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = allocation_release(self, NULL, 0);
    Py_END_ALLOW_THREADS
    bc_context_memory_freed(self->ctx, &self->counted);
    if (bc_check(st, rc, "cuIpcCloseMemHandle") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef ipc_methods[] = {
    {"close", (PyCFunction)ipc_close, METH_NOARGS, close_doc},
    {"free", (PyCFunction)(void (*)(void))allocation_free, METH_VARARGS | METH_KEYWORDS, free_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(ipc_doc,
"IPCMemoryHandle(handle, flags=1)\n--\n\n"
"Open device memory of another process from its mem_get_ipc_handle() bytes\n"
"(cuIpcOpenMemHandle).  Used like a DeviceAllocation; close() unmaps it.\n"
"flags: ipc_mem_flags (1 = CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, the default).");

static PyType_Slot ipc_slots[] = {
    {Py_tp_new, ipc_new},
    {Py_tp_init, ipc_init},
    {Py_tp_dealloc, allocation_dealloc},
    {Py_tp_traverse, allocation_traverse},
    {Py_tp_clear, allocation_clear},
    {Py_tp_repr, allocation_repr},
    {Py_nb_int, allocation_int},
    {Py_nb_index, allocation_int},
    {Py_tp_methods, ipc_methods},
    {Py_tp_getset, allocation_getset},
    {Py_tp_members, allocation_members},
    {Py_tp_doc, (void *)ipc_doc},
    {0, NULL},
};

static PyType_Spec ipc_spec = {
    .name = "barecuda.driver.IPCMemoryHandle",
    .basicsize = sizeof(bc_DeviceAllocation),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_BASETYPE,
    .slots = ipc_slots,
};

/* ------------------------------------------------- pooled device blocks */

static int
pooled_give_back(bc_PooledAllocation *self)
{
    int rc = 0;
    if (self->freed)
        return 0;
    self->freed = 1;
    if (self->pool != NULL && self->block != NULL) {
        PyObject *res = PyObject_CallMethod(self->pool, "_return_block", "O", self->block);
        rc = res == NULL ? -1 : 0;
        Py_XDECREF(res);
    }
    Py_CLEAR(self->block);
    Py_CLEAR(self->pool);
    return rc;
}

static void
pooled_dealloc(bc_PooledAllocation *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (!self->freed && !bc_is_finalizing()) {
#if PY_VERSION_HEX >= 0x030C0000
        PyObject *exc = PyErr_GetRaisedException();
#else
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
#endif
        if (pooled_give_back(self) < 0)
            PyErr_WriteUnraisable((PyObject *)self);
#if PY_VERSION_HEX >= 0x030C0000
        PyErr_SetRaisedException(exc);
#else
        PyErr_Restore(et, ev, tb);
#endif
    }
    Py_CLEAR(self->block);
    Py_CLEAR(self->pool);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* tp_clear: only the instance dict (the parents stay until dealloc). */
static int
pooled_clear(bc_PooledAllocation *self)
{
    Py_CLEAR(self->dict);
    return 0;
}

static int
pooled_traverse(bc_PooledAllocation *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->block);
    Py_VISIT(self->pool);
    return 0;
}

PyDoc_STRVAR(pooled_free_doc,
"free($self)\n--\n\nGive the block back to its pool now (idempotent).");

static PyObject *
pooled_free(bc_PooledAllocation *self, PyObject *Py_UNUSED(ignored))
{
    if (pooled_give_back(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
pooled_int(bc_PooledAllocation *self)
{
    CUdeviceptr p;
    if (bc_pointer_convert(bc_state_of((PyObject *)self), (PyObject *)self, &p, NULL) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)p);
}

/* len(): the bytes asked for, as PyCUDA's pooled allocations (Sized).  Still
 * always true, as before, whatever its size. */
static Py_ssize_t
pooled_len(bc_PooledAllocation *self)
{
    return (Py_ssize_t)self->size;
}

static int
pooled_bool(PyObject *Py_UNUSED(self))
{
    return 1;
}

static PyObject *
pooled_get_size(bc_PooledAllocation *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->size);
}

static PyObject *
pooled_get_context(bc_PooledAllocation *self, void *Py_UNUSED(closure))
{
    bc_Context *ctx = self->block ? ((bc_DeviceAllocation *)self->block)->ctx : NULL;
    return Py_NewRef(ctx ? (PyObject *)ctx : Py_None);
}

static PyObject *
pooled_get_freed(bc_PooledAllocation *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->freed);
}

static PyObject *
pooled_repr(bc_PooledAllocation *self)
{
    return PyUnicode_FromFormat("<barecuda.driver.PooledDeviceAllocation 0x%llx, %zu bytes%s>",
                                (unsigned long long)self->ptr, self->size,
                                self->freed ? ", freed" : "");
}

static PyMethodDef pooled_methods[] = {
    {"free", (PyCFunction)pooled_free, METH_NOARGS, pooled_free_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef pooled_getset[] = {
    BC_DICT_GETSET,
    {"size", (getter)pooled_get_size, NULL, "Bytes asked for.", NULL},
    {"context", (getter)pooled_get_context, NULL, "The Context owning the memory.", NULL},
    {"freed", (getter)pooled_get_freed, NULL, "Whether the block went back to the pool.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef pooled_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_PooledAllocation, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_PooledAllocation, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(pooled_doc,
"Device memory lent by tools.DeviceMemoryPool; used like a DeviceAllocation.\n"
"free() (or collection) gives the block back to the pool.");

static PyType_Slot pooled_slots[] = {
    {Py_tp_dealloc, pooled_dealloc},
    {Py_tp_traverse, pooled_traverse},
    {Py_tp_clear, pooled_clear},
    {Py_tp_repr, pooled_repr},
    {Py_nb_int, pooled_int},
    {Py_nb_index, pooled_int},
    {Py_sq_length, pooled_len},
    {Py_nb_bool, pooled_bool},
    {Py_tp_methods, pooled_methods},
    {Py_tp_getset, pooled_getset},
    {Py_tp_members, pooled_members},
    {Py_tp_doc, (void *)pooled_doc},
    {0, NULL},
};

static PyType_Spec pooled_spec = {
    .name = "barecuda.driver.PooledDeviceAllocation",
    .basicsize = sizeof(bc_PooledAllocation),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = pooled_slots,
};

PyDoc_STRVAR(pooled_allocation_doc,
"_pooled_allocation(pool, block, size)\n--\n\n"
"Private (tools.DeviceMemoryPool): lend the first `size` bytes of `block`, a\n"
"DeviceAllocation; free() calls pool._return_block(block).");

static PyObject *
bc_pooled_allocation(PyObject *m, PyObject *args)
{
    bc_State *st = bc_state_from_module(m);
    PyObject *pool, *block, *osize;
    if (!PyArg_ParseTuple(args, "OOO:_pooled_allocation", &pool, &block, &osize))
        return NULL;
    if (Py_TYPE(block) != (PyTypeObject *)st->DeviceAllocationType) {
        PyErr_SetString(PyExc_TypeError, "_pooled_allocation(): block must be a DeviceAllocation");
        return NULL;
    }
    size_t size;
    if (bc_arg_size(osize, "_pooled_allocation(): size", &size) < 0 ||
        bc_allocation_usable(st, (bc_DeviceAllocation *)block) < 0)
        return NULL;
    if (size > ((bc_DeviceAllocation *)block)->size) {
        PyErr_SetString(PyExc_ValueError, "_pooled_allocation(): size exceeds the block");
        return NULL;
    }
    bc_PooledAllocation *self =
        PyObject_GC_New(bc_PooledAllocation, (PyTypeObject *)st->PooledAllocationType);
    if (self == NULL)
        return NULL;
    self->ptr = ((bc_DeviceAllocation *)block)->ptr;
    self->size = size;
    self->block = Py_NewRef(block);
    self->pool = Py_NewRef(pool);
    self->freed = 0;
    self->weakreflist = NULL;
    self->dict = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* --------------------------------------------------------- managed memory */

static int
managed_getbuffer(bc_DeviceAllocation *self, Py_buffer *view, int flags)
{
    if (bc_allocation_usable(bc_state_of((PyObject *)self), self) < 0)
        return -1;
    if (PyBuffer_FillInfo(view, (PyObject *)self, (void *)(uintptr_t)self->ptr,
                          (Py_ssize_t)self->size, 0, flags) < 0)
        return -1;
    self->exports++;
    return 0;
}

static void
managed_releasebuffer(bc_DeviceAllocation *self, Py_buffer *Py_UNUSED(view))
{
    self->exports--;
}

PyDoc_STRVAR(managed_get_device_pointer_doc,
"get_device_pointer($self)\n--\n\nThe device pointer of this managed memory (same as int()).");

static PyObject *
managed_get_device_pointer(bc_DeviceAllocation *self, PyObject *Py_UNUSED(ignored))
{
    return allocation_int(self);
}

PyDoc_STRVAR(attach_doc,
"attach($self, mem_flags, stream=None)\n--\n\n"
"Change which streams may access this memory (cuStreamAttachMemAsync with a\n"
"mem_attach_flags value: GLOBAL, HOST or SINGLE for `stream`).");

static PyObject *
managed_attach(bc_DeviceAllocation *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"mem_flags", "stream", NULL};
    PyObject *oflags, *stream = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:attach", kwlist, &oflags, &stream))
        return NULL;
    long long f;
    if (bc_arg_long(oflags, "attach(): mem_flags", 1, 4, &f) < 0)
        return NULL;
    if (f != CU_MEM_ATTACH_GLOBAL && f != CU_MEM_ATTACH_HOST && f != CU_MEM_ATTACH_SINGLE) {
        PyErr_SetString(PyExc_ValueError, "attach(): mem_flags must be mem_attach_flags.GLOBAL, "
                                          "HOST or SINGLE");
        return NULL;
    }
    CUstream s;
    if (bc_allocation_usable(st, self) < 0 || bc_stream_convert(st, stream, &s) < 0)
        return NULL;
    int entered = bc_context_enter(self->ctx);
    CUresult rc = bc_drv.cuStreamAttachMemAsync(s, self->ptr, 0, (unsigned int)f);
    bc_context_leave(entered);
    if (bc_check(st, rc, "cuStreamAttachMemAsync") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef managed_methods[] = {
    {"free", (PyCFunction)(void (*)(void))allocation_free, METH_VARARGS | METH_KEYWORDS, free_doc},
    {"get_device_pointer", (PyCFunction)managed_get_device_pointer, METH_NOARGS,
     managed_get_device_pointer_doc},
    {"attach", (PyCFunction)(void (*)(void))managed_attach, METH_VARARGS | METH_KEYWORDS,
     attach_doc},
    {"as_buffer", (PyCFunction)(void (*)(void))allocation_as_buffer, METH_VARARGS | METH_KEYWORDS,
     as_buffer_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(managed_doc,
"Managed (unified) memory from managed_*() (cuMemAllocManaged): the .base of\n"
"the NumPy array, usable as device memory (int() is its pointer) and through\n"
"the buffer protocol on the host.");

static PyType_Slot managed_slots[] = {
    {Py_tp_dealloc, allocation_dealloc},
    {Py_tp_traverse, allocation_traverse},
    {Py_tp_clear, allocation_clear},
    {Py_tp_repr, allocation_repr},
    {Py_nb_int, allocation_int},
    {Py_nb_index, allocation_int},
    {Py_bf_getbuffer, managed_getbuffer},
    {Py_bf_releasebuffer, managed_releasebuffer},
    {Py_tp_methods, managed_methods},
    {Py_tp_getset, allocation_getset},
    {Py_tp_members, allocation_members},
    {Py_tp_doc, (void *)managed_doc},
    {0, NULL},
};

static PyType_Spec managed_spec = {
    .name = "barecuda.driver.ManagedAllocation",
    .basicsize = sizeof(bc_DeviceAllocation),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = managed_slots,
};

static int
parse_attach_flags(PyObject *obj, unsigned int *out)
{
    *out = CU_MEM_ATTACH_GLOBAL;
    if (obj == NULL)
        return 0;
    long long f;
    if (bc_arg_long(obj, "mem_flags", 0, 4, &f) < 0)
        return -1;
    if (f == 0)
        f = CU_MEM_ATTACH_GLOBAL;
    if (f != CU_MEM_ATTACH_GLOBAL && f != CU_MEM_ATTACH_HOST) {
        PyErr_SetString(PyExc_ValueError,
                        "mem_flags must be mem_attach_flags.GLOBAL or mem_attach_flags.HOST");
        return -1;
    }
    *out = (unsigned int)f;
    return 0;
}

static PyObject *
managed_array(bc_State *st, bc_ArraySpec *s, unsigned int flags, int zero)
{
    PyObject *out = NULL;
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        goto done;
    size_t n = s->nbytes ? s->nbytes : 1;
    CUdeviceptr ptr;
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_host(st, BC_TRACE_ALLOC, "managed_empty", n));
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemAllocManaged(&ptr, n, flags);
    if (rc == CUDA_SUCCESS && zero)
        memset((void *)(uintptr_t)ptr, 0, n);
    Py_END_ALLOW_THREADS
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, "cuMemAllocManaged") < 0)
        goto done;
    PyObject *base = allocation_wrap(st->ManagedAllocationType, ctx, ptr, n, BC_ALLOC_MANAGED, NULL,
                                     NULL);
    if (base == NULL) {
        bc_drv.cuMemFree(ptr);
        goto done;
    }
    out = bc_array_over(s, (void *)(uintptr_t)ptr, base);
done:
    Py_XDECREF(ctx);
    bc_array_spec_clear(s);
    return out;
}

static PyObject *
managed_common(PyObject *m, PyObject *args, PyObject *kwargs, const char *fn, int zero)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"shape", "dtype", "order", "mem_flags", NULL};
    PyObject *shape, *dtype = NULL, *order = NULL, *oflags = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOO", kwlist, &shape, &dtype, &order, &oflags))
        return NULL;
    unsigned int flags;
    if (parse_attach_flags(oflags, &flags) < 0)
        return NULL;
    bc_ArraySpec s;
    if (bc_array_spec_parse(fn, shape, dtype, order, &s) < 0)
        return NULL;
    return managed_array(st, &s, flags, zero);
}

static PyObject *
managed_like_common(PyObject *m, PyObject *args, PyObject *kwargs, const char *fn, int zero)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"array", "mem_flags", NULL};
    PyObject *like, *oflags = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O", kwlist, &like, &oflags))
        return NULL;
    unsigned int flags;
    if (parse_attach_flags(oflags, &flags) < 0)
        return NULL;
    bc_ArraySpec s;
    if (bc_array_spec_like(fn, like, NULL, &s) < 0)
        return NULL;
    return managed_array(st, &s, flags, zero);
}

PyDoc_STRVAR(managed_empty_doc,
"managed_empty(shape, dtype=None, order='C', mem_flags=0)\n--\n\n"
"A NumPy array in managed memory (cuMemAllocManaged), reachable from host and\n"
"device; its .base is the ManagedAllocation.  mem_flags: mem_attach_flags\n"
"GLOBAL (also 0, the default) or HOST.  dtype None means float64.");
PyDoc_STRVAR(managed_zeros_doc,
"managed_zeros(shape, dtype=None, order='C', mem_flags=0)\n--\n\n"
"As managed_empty(), filled with zeros.");
PyDoc_STRVAR(managed_empty_like_doc,
"managed_empty_like(array, mem_flags=0)\n--\n\n"
"managed_empty() with the shape, dtype and layout of `array`.");
PyDoc_STRVAR(managed_zeros_like_doc,
"managed_zeros_like(array, mem_flags=0)\n--\n\n"
"managed_zeros() with the shape, dtype and layout of `array`.");

static PyObject *
bc_managed_empty(PyObject *m, PyObject *a, PyObject *k)
{
    return managed_common(m, a, k, "managed_empty", 0);
}
static PyObject *
bc_managed_zeros(PyObject *m, PyObject *a, PyObject *k)
{
    return managed_common(m, a, k, "managed_zeros", 1);
}
static PyObject *
bc_managed_empty_like(PyObject *m, PyObject *a, PyObject *k)
{
    return managed_like_common(m, a, k, "managed_empty_like", 0);
}
static PyObject *
bc_managed_zeros_like(PyObject *m, PyObject *a, PyObject *k)
{
    return managed_like_common(m, a, k, "managed_zeros_like", 1);
}

static int
span_count(PyObject *onbytes, size_t known, const char *fn, size_t *count)
{
    if (onbytes == NULL || onbytes == Py_None) {
        if (known == SIZE_MAX) {
            PyErr_Format(PyExc_ValueError, "%s(): nbytes is needed for a bare pointer", fn);
            return -1;
        }
        *count = known;
        return 0;
    }
    if (bc_arg_size(onbytes, "nbytes", count) < 0)
        return -1;
    if (*count > known) {
        PyErr_Format(PyExc_ValueError, "%s(): nbytes (%zu) exceeds the memory's %zu bytes", fn,
                     *count, known);
        return -1;
    }
    return 0;
}

/* A memory location: None (the current device), "host" or -1 (the host), a
 * Device or a device ordinal. */
static int
location_of(bc_State *st, PyObject *obj, CUmemLocation *loc)
{
    int host = 0;
    if (obj != NULL && PyUnicode_Check(obj))
        host = PyUnicode_CompareWithASCIIString(obj, "host") == 0;
    else if (obj != NULL && PyLong_Check(obj) && !PyBool_Check(obj)) {
        host = PyLong_AsLong(obj) == CU_DEVICE_CPU;
        PyErr_Clear();
    }
    if (host) {
        loc->type = CU_MEM_LOCATION_TYPE_HOST;
        loc->id = 0;
        return 0;
    }
    if (obj != NULL && PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_ValueError, "device must be a Device, an ordinal or 'host', not %R", obj);
        return -1;
    }
    CUdevice dev;
    if (bc_device_of(st, obj, &dev) < 0)
        return -1;
    loc->type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc->id = (int)dev;
    return 0;
}

#if CUDA_VERSION < 13000
/* The device a CUDA 12 build passes where CUDA 13 takes a CUmemLocation. */
static CUdevice
legacy_device(const CUmemLocation *loc)
{
    return loc->type == CU_MEM_LOCATION_TYPE_DEVICE ? (CUdevice)loc->id : CU_DEVICE_CPU;
}
#endif

PyDoc_STRVAR(mem_prefetch_async_doc,
"mem_prefetch_async(mem, nbytes=None, device=None, stream=None)\n--\n\n"
"Migrate managed memory (a managed array, a ManagedAllocation or a pointer) to\n"
"`device` (a Device or ordinal; None: the current one; 'host' or -1: the host)\n"
"in order on `stream` (cuMemPrefetchAsync).  `nbytes` defaults to the whole.");

static PyObject *
bc_mem_prefetch_async(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"mem", "nbytes", "device", "stream", NULL};
    PyObject *mem, *onbytes = NULL, *device = NULL, *stream = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOO:mem_prefetch_async", kwlist, &mem,
                                     &onbytes, &device, &stream))
        return NULL;
    CUdeviceptr ptr;
    size_t known, count;
    CUmemLocation loc;
    CUstream s;
    if (bc_memory_span(st, mem, &ptr, &known) < 0 ||
        span_count(onbytes, known, "mem_prefetch_async", &count) < 0 ||
        bc_context_require(st) < 0 || location_of(st, device, &loc) < 0 ||
        bc_stream_convert(st, stream, &s) < 0)
        return NULL;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
#if CUDA_VERSION >= 13000
    rc = bc_drv.cuMemPrefetchAsync(ptr, count, loc, 0, s);
#else /* CUDA 12's cuMemPrefetchAsync takes a device, CU_DEVICE_CPU for the host */
    rc = bc_drv.cuMemPrefetchAsync(ptr, count, legacy_device(&loc), s);
#endif
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuMemPrefetchAsync") < 0 || bc_stream_keep_alive(st, stream, mem) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(mem_advise_doc,
"mem_advise(mem, nbytes, advice, device=None)\n--\n\n"
"Advise the driver about managed memory (cuMemAdvise): `advice` is a\n"
"mem_advise value, `device` a Device, ordinal, None (current) or 'host'.\n"
"`nbytes` None means the whole of `mem`.");

static PyObject *
bc_mem_advise(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"mem", "nbytes", "advice", "device", NULL};
    PyObject *mem, *onbytes, *oadvice, *device = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|O:mem_advise", kwlist, &mem, &onbytes,
                                     &oadvice, &device))
        return NULL;
    long long advice;
    if (bc_arg_long(oadvice, "mem_advise(): advice", CU_MEM_ADVISE_SET_READ_MOSTLY,
                    CU_MEM_ADVISE_UNSET_ACCESSED_BY, &advice) < 0)
        return NULL;
    CUdeviceptr ptr;
    size_t known, count;
    CUmemLocation loc;
    if (bc_memory_span(st, mem, &ptr, &known) < 0 ||
        span_count(onbytes, known, "mem_advise", &count) < 0 || bc_context_require(st) < 0 ||
        location_of(st, device, &loc) < 0)
        return NULL;
#if CUDA_VERSION >= 13000
    CUresult rc = bc_drv.cuMemAdvise(ptr, count, (CUmem_advise)advice, loc);
#else /* CUDA 12's cuMemAdvise takes a device, CU_DEVICE_CPU for the host */
    CUresult rc = bc_drv.cuMemAdvise(ptr, count, (CUmem_advise)advice, legacy_device(&loc));
#endif
    if (bc_check(st, rc, "cuMemAdvise") < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ setup */

static PyMethodDef memory_methods[] = {
    {"mem_alloc", bc_mem_alloc, METH_O, mem_alloc_doc},
    {"mem_alloc_pitch", (PyCFunction)(void (*)(void))bc_mem_alloc_pitch,
     METH_VARARGS | METH_KEYWORDS, mem_alloc_pitch_doc},
    {"mem_get_info", bc_mem_get_info, METH_NOARGS, mem_get_info_doc},
    {"mem_alloc_async", (PyCFunction)(void (*)(void))bc_mem_alloc_async,
     METH_VARARGS | METH_KEYWORDS, mem_alloc_async_doc},
    {"mem_get_ipc_handle", bc_mem_get_ipc_handle, METH_O, mem_get_ipc_handle_doc},
    {"_pooled_allocation", bc_pooled_allocation, METH_VARARGS, pooled_allocation_doc},
#define BC_KW(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_VARARGS | METH_KEYWORDS, doc}
    BC_KW("managed_empty", bc_managed_empty, managed_empty_doc),
    BC_KW("managed_zeros", bc_managed_zeros, managed_zeros_doc),
    BC_KW("managed_empty_like", bc_managed_empty_like, managed_empty_like_doc),
    BC_KW("managed_zeros_like", bc_managed_zeros_like, managed_zeros_like_doc),
    BC_KW("mem_prefetch_async", bc_mem_prefetch_async, mem_prefetch_async_doc),
    BC_KW("mem_advise", bc_mem_advise, mem_advise_doc),
#undef BC_KW
    {NULL, NULL, 0, NULL},
};

int
bc_memory_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &allocation_spec, NULL, &st->DeviceAllocationType) < 0 ||
        bc_add_type(m, &managed_spec, NULL, &st->ManagedAllocationType) < 0 ||
        bc_add_type(m, &ipc_spec, NULL, &st->IPCMemoryHandleType) < 0 ||
        bc_add_type(m, &pooled_spec, NULL, &st->PooledAllocationType) < 0)
        return -1;
    return PyModule_AddFunctions(m, memory_methods);
}
