/* SPDX-License-Identifier: MIT */
/* The module state (PEP 630): every heap type and exception class of _driver.
 * Add a type by adding one line to BC_STATE_OBJECTS; traverse and clear follow. */
#ifndef BC_STATE_H
#define BC_STATE_H

#include "common.h"

#define BC_STATE_OBJECTS(X)                                                    \
    /* exceptions (error.c) */                                                 \
    X(Error) X(LogicError) X(RuntimeError) X(MemoryError) X(LaunchError)       \
    X(CompileError)                                                            \
    /* types */                                                                \
    X(DeviceType) X(ContextType) X(StreamType) X(EventType)                    \
    X(DeviceAllocationType) X(PooledAllocationType) X(HostAllocationType)      \
    X(RegisteredHostMemoryType) X(ManagedAllocationType)                      \
    X(IPCMemoryHandleType) X(MemPoolType) X(Memcpy2DType) X(Memcpy3DType)      \
    X(Memcpy3DPeerType) X(ModuleType) X(FunctionType) X(GraphType)             \
    X(ModuleGlobalType)                                                        \
    X(GraphExecType) X(ArrayType) X(ArrayDescriptorType)                       \
    X(ArrayDescriptor3DType) X(TextureObjectType) X(SurfaceObjectType)         \
    X(ArrayBaseType) X(HotEntryType) X(OpTableType) X(HostViewType)            \
    X(LinkerType) X(NcclCommType) X(WakerType) X(WakerAwaitType)                             \
    /* other objects */                                                        \
    X(contexts)        /* dict: int(CUcontext) -> weakref to Context */        \
    X(default_context) /* Context activated when none is current */           \
    X(context_memo)    /* weakref: the Context bc_context_wrap found last */   \
    X(enum_factory)    /* callable(name) -> enum class, set by barecuda.driver */ \
    X(enum_classes)    /* dict: enum name -> class the factory made (a cache) */ \
    X(awaiter)         /* callable(obj) -> asyncio future, set by barecuda.driver */ \
    X(ipc_exported)    /* set: IPC handles this process exported (memory.c) */ \
    X(bench_armed)     /* (Function, bytes): the launch _bench_fire makes */   \
    X(str_block) X(str_grid) X(str_stream) X(str_shared) X(str_time_kernel)    \
    X(str_shared_size) X(str_gpudata) X(str_cai) X(str_cuda_stream)          \
    /* what an await asks of its future and loop (src/waker.c) */              \
    X(str_done) X(str_set_result) X(str_time) X(str_await)

typedef struct {
#define BC_STATE_FIELD(name) PyObject *name;
    BC_STATE_OBJECTS(BC_STATE_FIELD)
#undef BC_STATE_FIELD
    struct bc_trace *trace; /* the active timeline recorder (src/trace.c), or NULL */
} bc_State;

/* The module definition (src/state.c; src/module.c completes it at PyInit). */
extern PyModuleDef bc_module_def;

/* Import NumPy's C-API table that every file shares (src/state.c owns it); 0 or -1. */
int bc_numpy_import(void);

/* Our module among the bases of `tp`: the type itself for the types of _driver,
 * the nearest base of ours for a subclass made in Python (whose ht_module is
 * NULL) or by another extension (whose ht_module is its own).  NULL, with no
 * exception set, when there is none. */
static inline PyObject *
bc_module_of_type(PyTypeObject *tp)
{
    for (; tp != NULL; tp = tp->tp_base) {
        if (!PyType_HasFeature(tp, Py_TPFLAGS_HEAPTYPE))
            continue;
        PyObject *m = ((PyHeapTypeObject *)tp)->ht_module;
        if (m != NULL && PyModule_GetDef(m) == &bc_module_def)
            return m;
    }
    return NULL;
}

/* The state of the module that defined `tp` or the base of it that is ours. */
static inline bc_State *
bc_state_of_type(PyTypeObject *tp)
{
    PyObject *m = bc_module_of_type(tp);
    if (m == NULL) {
        PyErr_Format(PyExc_TypeError, "%.100s is not a barecuda type", tp->tp_name);
        return NULL;
    }
    return (bc_State *)PyModule_GetState(m);
}

/* The state of the module that defined an object's type (or, for an instance of
 * a subclass, the barecuda base of its type). */
static inline bc_State *
bc_state_of(PyObject *self)
{
    return (bc_State *)PyModule_GetState(bc_module_of_type(Py_TYPE(self)));
}

/* The same from a destructor: NULL (and no exception) once the module is gone,
 * as in the last collections of interpreter shutdown. */
static inline bc_State *
bc_state_in_destructor(PyObject *self)
{
    PyObject *m = bc_module_of_type(Py_TYPE(self));
    return m != NULL ? (bc_State *)PyModule_GetState(m) : NULL;
}

static inline bc_State *
bc_state_from_module(PyObject *module)
{
    return (bc_State *)PyModule_GetState(module);
}

/* Each concept file registers its types and functions with one of these. */
int bc_error_setup(PyObject *m, bc_State *st);
int bc_loader_setup(PyObject *m, bc_State *st);
int bc_device_setup(PyObject *m, bc_State *st);
int bc_context_setup(PyObject *m, bc_State *st);
int bc_stream_setup(PyObject *m, bc_State *st);
int bc_event_setup(PyObject *m, bc_State *st);
int bc_memory_setup(PyObject *m, bc_State *st);
int bc_mempool_setup(PyObject *m, bc_State *st);
int bc_hostmem_setup(PyObject *m, bc_State *st);
int bc_curand_setup(PyObject *m, bc_State *st);
int bc_memcpy_setup(PyObject *m, bc_State *st);
int bc_copybench_setup(PyObject *m, bc_State *st);
int bc_cumodule_setup(PyObject *m, bc_State *st);
int bc_linker_setup(PyObject *m, bc_State *st);
int bc_function_setup(PyObject *m, bc_State *st);
int bc_graph_setup(PyObject *m, bc_State *st);
int bc_nvrtc_setup(PyObject *m, bc_State *st);
int bc_array_setup(PyObject *m, bc_State *st);
int bc_texture_setup(PyObject *m, bc_State *st);
int bc_dlpack_setup(PyObject *m, bc_State *st);
int bc_blockcache_setup(PyObject *m, bc_State *st);
int bc_staging_setup(PyObject *m, bc_State *st);
int bc_hostpool_setup(PyObject *m, bc_State *st);
int bc_diskcache_setup(PyObject *m, bc_State *st);
int bc_gpuarray_setup(PyObject *m, bc_State *st);
int bc_pointer_setup(PyObject *m, bc_State *st);
int bc_trace_setup(PyObject *m, bc_State *st);
int bc_nvtx_setup(PyObject *m, bc_State *st);
void bc_trace_discard(bc_State *st);
int bc_nccl_setup(PyObject *m, bc_State *st);
int bc_waker_setup(PyObject *m, bc_State *st);

/* The enum class `name` (new reference; src/state.c) that the Python layer's factory makes
 * (barecuda.driver registers it with _set_enum_factory at its import: this floor
 * never imports the one above).  NULL with no exception set when no factory is
 * registered: callers then hand out plain ints. */
PyObject *bc_enum_class(bc_State *st, const char *name);

/* `stream.done()` / `await stream` (and Event's): the future the awaiter that
 * barecuda.driver registers (barecuda/_core/aio.py) makes for obj, or for
 * bc_await_iter, that future's __await__ iterator.  New reference, or NULL. */
PyObject *bc_await_future(PyObject *obj);
PyObject *bc_await_iter(PyObject *obj);

/* <enum_name>(value) (new reference) from the registered factory's class, or a
 * plain int when no factory is registered or the enum has no member of that
 * value (a newer driver's). */
PyObject *bc_driver_enum(bc_State *st, const char *enum_name, unsigned long value);

/* Create a heap type from spec bound to module m, store it in *slot, and add it to m. */
int bc_add_type(PyObject *m, PyType_Spec *spec, PyObject *base, PyObject **slot);

#endif
