/* SPDX-License-Identifier: MIT */
/* barecuda._driver: module definition, multi-phase init and the module state.
 *
 * Each driver concept lives in its own file and registers its types and
 * functions through a bc_<concept>_setup(module, state) call made from the exec
 * slot below.  The state holds every heap type and exception class; GC support
 * of the state follows BC_STATE_OBJECTS in state.h.  The top floor of the C units
 * (src/layers.txt): it may call every unit, and none calls it; what they share
 * (the module definition, type registration, the NumPy table, enum classes) is
 * in src/state.c, on the lowest floor. */
#include "barecuda/common.h"
#include "barecuda/state.h"

PyDoc_STRVAR(set_enum_factory_doc,
"_set_enum_factory(factory)\n--\n\n"
"Register `factory(name) -> enum class` (barecuda.driver does at its import): values\n"
"of header enums that _driver hands out (Device.get_attributes() keys, ...) are then\n"
"members of those classes.  None unregisters it (plain ints again).");

static PyObject *
set_enum_factory(PyObject *m, PyObject *factory)
{
    bc_State *st = bc_state_from_module(m);
    if (factory != Py_None && !PyCallable_Check(factory)) {
        PyErr_Format(PyExc_TypeError, "_set_enum_factory() needs a callable or None, not %.100s",
                     Py_TYPE(factory)->tp_name);
        return NULL;
    }
    Py_CLEAR(st->enum_classes);
    Py_XSETREF(st->enum_factory, factory == Py_None ? NULL : Py_NewRef(factory));
    Py_RETURN_NONE;
}

PyDoc_STRVAR(set_awaiter_doc,
"_set_awaiter(awaiter)\n--\n\n"
"Register `awaiter(stream_or_event) -> asyncio future` (barecuda.driver does at its\n"
"import, from barecuda/_core/aio.py): what Stream.done(), Event.done() and `await`\n"
"on either return.  None unregisters it.");

static PyObject *
set_awaiter(PyObject *m, PyObject *awaiter)
{
    bc_State *st = bc_state_from_module(m);
    if (awaiter != Py_None && !PyCallable_Check(awaiter)) {
        PyErr_Format(PyExc_TypeError, "_set_awaiter() needs a callable or None, not %.100s",
                     Py_TYPE(awaiter)->tp_name);
        return NULL;
    }
    Py_XSETREF(st->awaiter, awaiter == Py_None ? NULL : Py_NewRef(awaiter));
    Py_RETURN_NONE;
}

static PyMethodDef module_functions[] = {
    {"_set_enum_factory", (PyCFunction)set_enum_factory, METH_O, set_enum_factory_doc},
    {"_set_awaiter", (PyCFunction)set_awaiter, METH_O, set_awaiter_doc},
    {NULL, NULL, 0, NULL},
};

static int
intern_strings(bc_State *st)
{
    static const struct {
        size_t offset;
        const char *text;
    } names[] = {
        {offsetof(bc_State, str_block), "block"},
        {offsetof(bc_State, str_grid), "grid"},
        {offsetof(bc_State, str_stream), "stream"},
        {offsetof(bc_State, str_shared), "shared"},
        {offsetof(bc_State, str_time_kernel), "time_kernel"},
        {offsetof(bc_State, str_shared_size), "shared_size"},
        {offsetof(bc_State, str_gpudata), "gpudata"},
        {offsetof(bc_State, str_cai), "__cuda_array_interface__"},
        {offsetof(bc_State, str_cuda_stream), "__cuda_stream__"},
        {offsetof(bc_State, str_done), "done"},
        {offsetof(bc_State, str_set_result), "set_result"},
        {offsetof(bc_State, str_time), "time"},
        {offsetof(bc_State, str_await), "__await__"},
    };
    for (size_t i = 0; i < BC_COUNT(names); i++) {
        PyObject *s = PyUnicode_InternFromString(names[i].text);
        if (s == NULL)
            return -1;
        *(PyObject **)((char *)st + names[i].offset) = s;
    }
    return 0;
}

static int
bc_exec(PyObject *m)
{
    bc_State *st = bc_state_from_module(m);
    if (bc_numpy_import() < 0)
        return -1;
    st->contexts = PyDict_New();
    if (st->contexts == NULL || intern_strings(st) < 0)
        return -1;
    int (*const setups[])(PyObject *, bc_State *) = {
        bc_error_setup,    bc_loader_setup,   bc_device_setup, bc_context_setup,
        /* waker before stream: its BC_CTX_DETACHING hook runs before stream.c's,
           which synchronizes streams (an await on the context learns of the
           detach, not of the work finishing under it) */
        bc_waker_setup,    bc_stream_setup,   bc_event_setup,    bc_memory_setup, bc_mempool_setup, bc_memcpy_setup,
        bc_cumodule_setup, bc_function_setup, bc_graph_setup,  bc_nvrtc_setup,
        bc_array_setup,    bc_texture_setup,  bc_dlpack_setup, bc_blockcache_setup,
        bc_staging_setup,  bc_gpuarray_setup, bc_hostmem_setup, bc_pointer_setup,
        bc_curand_setup,   bc_linker_setup,   bc_trace_setup,  bc_nvtx_setup,
        bc_nccl_setup,     bc_diskcache_setup, bc_hostpool_setup, bc_copybench_setup,
    };
    for (size_t i = 0; i < BC_COUNT(setups); i++)
        if (setups[i](m, st) < 0)
            return -1;
    if (PyModule_AddFunctions(m, module_functions) < 0 ||
        PyModule_AddIntConstant(m, "CUDA_VERSION", CUDA_VERSION) < 0)
        return -1;
    return 0;
}

static int
bc_traverse(PyObject *m, visitproc visit, void *arg)
{
    bc_State *st = bc_state_from_module(m);
#define BC_VISIT(name) Py_VISIT(st->name);
    BC_STATE_OBJECTS(BC_VISIT)
#undef BC_VISIT
    return 0;
}

static int
bc_clear(PyObject *m)
{
    bc_State *st = bc_state_from_module(m);
#define BC_CLEAR_FIELD(name) Py_CLEAR(st->name);
    BC_STATE_OBJECTS(BC_CLEAR_FIELD)
#undef BC_CLEAR_FIELD
    return 0;
}

static void
bc_free(void *m)
{
    bc_trace_discard(bc_state_from_module((PyObject *)m));
    bc_clear((PyObject *)m);
}

static PyModuleDef_Slot bc_slots[] = {
    {Py_mod_exec, bc_exec},
    {0, NULL},
};

/* The definition lives on the lowest floor (src/state.c: its address tells our
 * types' module); the top completes it here, before its first use. */
PyMODINIT_FUNC
PyInit__driver(void)
{
    bc_module_def.m_slots = bc_slots;
    bc_module_def.m_traverse = bc_traverse;
    bc_module_def.m_clear = bc_clear;
    bc_module_def.m_free = bc_free;
    return PyModuleDef_Init(&bc_module_def);
}
