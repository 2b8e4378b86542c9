/* SPDX-License-Identifier: MIT */
/* Included first by every C file of barecuda._driver: Python, NumPy and the CUDA
 * headers in the right order, plus the few helpers every concept uses. */
#ifndef BC_COMMON_H
#define BC_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* The __dict__ entry of a type whose instances carry a dict at __dictoffset__
 * (PyType_FromSpec adds none): first in its PyGetSetDef table. */
#define BC_DICT_GETSET {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL}
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <cuda.h>

#ifndef BC_NO_NUMPY
/* Every file shares the one C-API table that src/state.c imports. */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
/* The oldest NumPy we run with (pyproject.toml): its API, memory handlers included. */
#define NPY_TARGET_VERSION NPY_1_25_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL bc_numpy_api
#ifndef BC_NUMPY_IMPORTER
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>
#endif

#define BC_UNUSED(x) ((void)(x))

/* The launch path's functions (BC_HOT) are placed together, apart from the rest
 * of the module, and what launches call only on errors or rare options (BC_COLD)
 * is moved out of their way: between two launches the driver's own code and
 * CPython's evict much of the instruction cache, so the fewer lines a launch
 * runs through, the less it pays to fetch them again. */
#if defined(__GNUC__)
#define BC_HOT __attribute__((hot))
#define BC_COLD __attribute__((cold, noinline))
#else
#define BC_HOT
#define BC_COLD
#endif

/* CLOCK_MONOTONIC in nanoseconds: the one clock of the C timings (the benchmarks'
 * floors, trace records, the awaits' spin windows). */
static inline int64_t
bc_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The same, in seconds. */
static inline double
bc_monotonic_s(void)
{
    return (double)bc_monotonic_ns() * 1e-9;
}

/* Python-version shims. */
static inline int
bc_is_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

/* An IEEE half from a double, little-endian, into p (2 bytes): PyFloat_Pack2 is
 * public from 3.11; 3.10 has the same function as _PyFloat_Pack2. */
static inline int
bc_float_pack2(double x, void *p)
{
#if PY_VERSION_HEX >= 0x030B0000
    return PyFloat_Pack2(x, (char *)p, 1);
#else
    return _PyFloat_Pack2(x, (unsigned char *)p, 1);
#endif
}

/* New reference to a weakref's target, or NULL (no exception) when it is dead. */
static inline PyObject *
bc_weakref_get(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(ref, &obj) < 0)
        PyErr_Clear();
    return obj;
#else
    PyObject *obj = PyWeakref_GetObject(ref);
    return obj == NULL || obj == Py_None ? (PyErr_Clear(), NULL) : Py_NewRef(obj);
#endif
}

/* A generated table entry: one member of a CUDA enum or one #define flag. */
typedef struct {
    const char *name;
    long long value;
} bc_enum_member;

typedef struct {
    const char *name;
    const bc_enum_member *members;
} bc_enum_table;

/* Number of entries in a fixed array. */
#define BC_COUNT(a) (sizeof(a) / sizeof((a)[0]))

#endif
