/* SPDX-License-Identifier: MIT */
/* Argument converters shared by every concept: sizes, bounded ints and flags,
 * with the messages users see for wrong types, negative and huge values. */
#include "barecuda/argparse.h"

#include <stdio.h>
#include <string.h>

static int
require_int(PyObject *arg, const char *what)
{
    if (PyLong_Check(arg) && !PyBool_Check(arg))
        return 0;
    if (PyIndex_Check(arg) && !PyBool_Check(arg) && !PyFloat_Check(arg))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(arg)->tp_name);
    return -1;
}

/* arg (an int, or an object with __index__ that is no bool or float) as a long
 * long into *v, with *overflow the sign of a value past its range.  0, or -1
 * with TypeError naming `what`. */
static int
as_long_long(PyObject *arg, const char *what, long long *v, int *overflow)
{
    if (require_int(arg, what) < 0)
        return -1;
    PyObject *num = PyNumber_Index(arg);
    if (num == NULL)
        return -1;
    *overflow = 0;
    *v = PyLong_AsLongLongAndOverflow(num, overflow);
    Py_DECREF(num);
    return *v == -1 && PyErr_Occurred() ? -1 : 0;
}

int
bc_arg_long(PyObject *arg, const char *what, long long lo, long long hi, long long *out)
{
    long long v;
    int overflow;
    if (as_long_long(arg, what, &v, &overflow) < 0)
        return -1;
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s must be in [%lld, %lld], got %R", what, lo, hi, arg);
        return -1;
    }
    *out = v;
    return 0;
}

int
bc_arg_size(PyObject *arg, const char *what, size_t *out)
{
    long long v;
    int overflow;
    if (as_long_long(arg, what, &v, &overflow) < 0)
        return -1;
    if (overflow < 0 || (!overflow && v < 0)) {
        PyErr_Format(PyExc_ValueError, "%s must not be negative, got %R", what, arg);
        return -1;
    }
    if (overflow > 0 || (unsigned long long)v > (unsigned long long)(SIZE_MAX >> 1)) {
        PyErr_Format(PyExc_ValueError, "%s is too large: %R", what, arg);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

int
bc_arg_flags(PyObject *arg, const char *what, unsigned int allowed, unsigned int *out)
{
    long long v;
    if (bc_arg_long(arg, what, 0, 0xFFFFFFFFLL, &v) < 0)
        return -1;
    if ((unsigned long long)v & ~(unsigned long long)allowed) {
        char bits[32];
        snprintf(bits, sizeof bits, "0x%llx", (unsigned long long)v & ~(unsigned long long)allowed);
        PyErr_Format(PyExc_ValueError, "%s: unknown bits %s (allowed: 0x%x)", what, bits, allowed);
        return -1;
    }
    *out = (unsigned int)v;
    return 0;
}

/* 1 when a buffer-protocol format string has the object code 'O' (field names,
 * written between colons, are skipped). */
static int
format_has_objects(const char *f)
{
    for (; *f; f++) {
        if (*f == ':') {
            const char *end = strchr(f + 1, ':');
            if (end == NULL)
                return 0;
            f = end;
        } else if (*f == 'O')
            return 1;
    }
    return 0;
}

int
bc_arg_plain_host(PyObject *obj, const Py_buffer *view, const char *fn, const char *what)
{
    const char *dtype = NULL;
    if (PyArray_Check(obj)) {
        if (PyDataType_REFCHK(PyArray_DESCR((PyArrayObject *)obj)))
            dtype = "an array of Python objects";
    } else if (view != NULL && view->format != NULL && format_has_objects(view->format))
        dtype = "a buffer of Python objects";
    if (dtype == NULL)
        return 0;
    PyErr_Format(PyExc_TypeError,
                 "%s(): %s is %s (%.100s); only plain data (numbers, structs of numbers) can "
                 "be copied to or from the GPU",
                 fn, what, dtype, Py_TYPE(obj)->tp_name);
    return -1;
}
