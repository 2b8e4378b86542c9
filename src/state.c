/* SPDX-License-Identifier: MIT */
/* The module state's shared machinery, on the lowest floor so that every concept
 * file may use it: the module definition (whose address identifies our types'
 * module, state.h: bc_module_of_type), the one NumPy C-API table, heap-type
 * registration (bc_add_type) and the enum classes the Python layer's factory makes
 * (bc_enum_class, bc_driver_enum).
 *
 * src/module.c, the top floor, completes bc_module_def (its exec slot, which calls
 * every concept's setup, and the state's traverse, clear and free) in
 * PyInit__driver before the definition is first used: this floor never names the
 * units above it. */
#define BC_NUMPY_IMPORTER
#include "barecuda/common.h"
#include "barecuda/state.h"

PyDoc_STRVAR(module_doc,
"Private C extension of barecuda: the CUDA Driver API and NVRTC, loaded at first use.\n"
"\n"
"Use it through barecuda.driver and barecuda.compiler.");

PyModuleDef bc_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "barecuda._driver",
    .m_doc = module_doc,
    .m_size = sizeof(bc_State),
    /* m_slots, m_traverse, m_clear, m_free: set by src/module.c */
};

int
bc_numpy_import(void)
{
    return PyArray_ImportNumPyAPI();
}

int
bc_add_type(PyObject *m, PyType_Spec *spec, PyObject *base, PyObject **slot)
{
    PyObject *type = PyType_FromModuleAndSpec(m, spec, base);
    if (type == NULL)
        return -1;
    *slot = type;
    const char *dot = strrchr(spec->name, '.');
    const char *name = dot ? dot + 1 : spec->name;
    return PyModule_AddObjectRef(m, name, type);
}

PyObject *
bc_enum_class(bc_State *st, const char *name)
{
    if (st->enum_factory == NULL)
        return NULL;
    if (st->enum_classes == NULL && (st->enum_classes = PyDict_New()) == NULL)
        return NULL;
    PyObject *cls = PyDict_GetItemString(st->enum_classes, name); /* borrowed */
    if (cls != NULL)
        return Py_NewRef(cls);
    cls = PyObject_CallFunction(st->enum_factory, "s", name);
    if (cls == NULL || PyDict_SetItemString(st->enum_classes, name, cls) < 0) {
        Py_XDECREF(cls);
        return NULL;
    }
    return cls;
}

PyObject *
bc_await_future(PyObject *obj)
{
    bc_State *st = bc_state_of(obj);
    if (st == NULL)
        return NULL;
    if (st->awaiter == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "awaiting needs barecuda.driver imported (it registers the awaiter)");
        return NULL;
    }
    return PyObject_CallOneArg(st->awaiter, obj);
}

PyObject *
bc_await_iter(PyObject *obj)
{
    PyObject *fut = bc_await_future(obj);
    if (fut == NULL)
        return NULL;
    PyTypeObject *tp = Py_TYPE(fut);
    PyObject *it = tp->tp_as_async != NULL && tp->tp_as_async->am_await != NULL
                       ? tp->tp_as_async->am_await(fut)
                       : PyObject_CallMethod(fut, "__await__", NULL);
    Py_DECREF(fut);
    return it;
}

PyObject *
bc_driver_enum(bc_State *st, const char *enum_name, unsigned long value)
{
    PyObject *cls = bc_enum_class(st, enum_name);
    if (cls == NULL)
        return PyErr_Occurred() ? NULL : PyLong_FromUnsignedLong(value);
    PyObject *out = PyObject_CallFunction(cls, "k", value);
    Py_DECREF(cls);
    if (out == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear();
        out = PyLong_FromUnsignedLong(value);
    }
    return out;
}
