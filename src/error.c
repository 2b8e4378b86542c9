/* SPDX-License-Identifier: MIT */
/* Exceptions and the CUresult table.
 *
 * Error is the base of LogicError (misuse: bad values, handles, states),
 * RuntimeError (everything else the driver reports), MemoryError (out of memory;
 * also a builtins.MemoryError), LaunchError (kernel faults and launch failures;
 * the sticky ones leave the context unusable) and CompileError (NVRTC).  Every
 * instance raised for a driver call carries .code, .name and .routine.  The list
 * of codes comes from the headers (bc_tables.h); only the class of each is
 * decided here. */
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "bc_tables.h"

#include <stdarg.h>
#include <stdio.h>

static int
is_sticky(CUresult code)
{
    switch (code) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
        return 1;
    default:
        return 0;
    }
}

PyObject *
bc_error_class(bc_State *st, CUresult code)
{
    if (is_sticky(code))
        return st->LaunchError;
    switch (code) {
    case CUDA_ERROR_OUT_OF_MEMORY:
        return st->MemoryError;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING:
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
        return st->LaunchError;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_ALREADY_CURRENT:
    case CUDA_ERROR_ALREADY_MAPPED:
    case CUDA_ERROR_NOT_MAPPED:
    case CUDA_ERROR_ARRAY_IS_MAPPED:
    case CUDA_ERROR_ALREADY_ACQUIRED:
    case CUDA_ERROR_NOT_MAPPED_AS_ARRAY:
    case CUDA_ERROR_NOT_MAPPED_AS_POINTER:
    case CUDA_ERROR_CONTEXT_ALREADY_IN_USE:
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_INVALID_SOURCE:
    case CUDA_ERROR_FILE_NOT_FOUND:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_ILLEGAL_STATE:
    case CUDA_ERROR_NOT_FOUND:
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
    case CUDA_ERROR_PEER_ACCESS_NOT_ENABLED:
    case CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_NOT_PERMITTED:
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
    case CUDA_ERROR_CAPTURED_EVENT:
    case CUDA_ERROR_INVALID_GRAPHICS_CONTEXT:
        return st->LogicError;
    default:
        return st->RuntimeError;
    }
}

static const char *
code_name(CUresult code)
{
    for (const bc_enum_member *e = bc_error_names; e->name; e++)
        if (e->value == (long long)code)
            return e->name;
    return NULL;
}

/* Raise `cls(message)` with .code, .name and .routine set on the instance. */
static int
raise_with_attrs(PyObject *cls, PyObject *message, long code, const char *name,
                 const char *routine)
{
    PyObject *exc = PyObject_CallOneArg(cls, message);
    if (exc == NULL)
        return -1;
    PyObject *c = PyLong_FromLong(code);
    int bad = c == NULL || PyObject_SetAttrString(exc, "code", c) < 0;
    Py_XDECREF(c);
    if (!bad) {
        PyObject *n = name ? PyUnicode_FromString(name) : Py_NewRef(Py_None);
        bad = n == NULL || PyObject_SetAttrString(exc, "name", n) < 0;
        Py_XDECREF(n);
    }
    if (!bad) {
        PyObject *r = routine ? PyUnicode_FromString(routine) : Py_NewRef(Py_None);
        bad = r == NULL || PyObject_SetAttrString(exc, "routine", r) < 0;
        Py_XDECREF(r);
    }
    if (!bad)
        PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return -1;
}

/* A code image the driver refuses (PTX of a newer ISA, relocatable code it cannot
 * link) most often comes from an NVRTC newer than the driver: pip's
 * nvidia-cuda-nvrtc is the newest 13.x while the driver may support only 13.0.
 * CUBIN for the device itself still loads (minor-version compatibility), PTX and
 * -rdc objects do not.  Writes a hint saying so into `buf` and returns 1 when that
 * is the case, else 0. */
static int
toolchain_hint(CUresult code, char *buf, size_t size)
{
    if (code != CUDA_ERROR_UNSUPPORTED_PTX_VERSION && code != CUDA_ERROR_NO_BINARY_FOR_GPU &&
        code != CUDA_ERROR_INVALID_PTX)
        return 0;
    int driver = 0, major = 0, minor = 0;
    if (!bc_drv_ready || !bc_nvrtc_ready || bc_drv.cuDriverGetVersion(&driver) != CUDA_SUCCESS ||
        bc_nvrtc.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS ||
        major * 1000 + minor * 10 <= driver)
        return 0;
    int dmaj = driver / 1000, dmin = driver % 1000 / 10;
    snprintf(buf, size,
             " (NVRTC %d.%d is newer than this driver, which supports CUDA %d.%d: PTX and "
             "relocatable device code made by this NVRTC need a newer driver.  Compile to "
             "CUBIN for the device (SourceModule's default for a device NVRTC knows), install "
             "an NVRTC that matches the driver (pip install 'nvidia-cuda-nvrtc==%d.%d.*', or "
             "BARECUDA_NVRTC=path), or update the driver)",
             major, minor, dmaj, dmin, dmaj, dmin);
    return 1;
}

int
bc_error_raise(bc_State *st, CUresult code, const char *routine)
{
    const char *name = NULL, *text = NULL;
    if (bc_drv_ready) {
        bc_drv.cuGetErrorName(code, &name);
        bc_drv.cuGetErrorString(code, &text);
    }
    if (name == NULL)
        name = code_name(code);
    const char *why = "";
    if (bc_forked_child)
        why = " (this process was forked after CUDA was initialised in its parent, and CUDA "
              "cannot be used in a forked child: start workers with multiprocessing's "
              "'spawn' or 'forkserver' method)";
    else if (is_sticky(code))
        why = " (the context is now unusable: the driver cannot recover from this fault "
              "inside the process, so CUDA work must continue in a new process)";
    char hint[480];
    if (*why == '\0' && toolchain_hint(code, hint, sizeof hint))
        why = hint;
    PyObject *msg = PyUnicode_FromFormat("%s failed: %s%s%s%s", routine,
                                         name ? name : "CUDA_ERROR_UNKNOWN_CODE",
                                         text ? ": " : "", text ? text : "", why);
    if (msg == NULL)
        return -1;
    raise_with_attrs(bc_error_class(st, code), msg, (long)code, name, routine);
    Py_DECREF(msg);
    return -1;
}

int
bc_error_logic(bc_State *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg == NULL)
        return -1;
    raise_with_attrs(st->LogicError, msg, 0, NULL, NULL);
    Py_DECREF(msg);
    return -1;
}

void
bc_error_in_destructor(CUresult code, const char *routine, PyObject *obj)
{
    if (code == CUDA_SUCCESS || code == CUDA_ERROR_DEINITIALIZED ||
        code == CUDA_ERROR_CONTEXT_IS_DESTROYED || code == CUDA_ERROR_INVALID_CONTEXT ||
        is_sticky(code) || bc_is_finalizing())
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    const char *name = code_name(code);
    if (PyErr_WarnFormat(PyExc_ResourceWarning, 1, "%s failed while releasing %s: %s",
                         routine, Py_TYPE(obj)->tp_name, name ? name : "unknown error") < 0)
        PyErr_WriteUnraisable(obj);
    PyErr_Restore(type, value, tb);
}

/* ----------------------------------------------------------------- Python */

PyDoc_STRVAR(error_table_doc,
"_error_table()\n--\n\n"
"Every CUresult of the headers as a tuple of (code, name, exception class).");

static PyObject *
bc_error_table(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (const bc_enum_member *e = bc_error_names; e->name; e++) {
        PyObject *item = Py_BuildValue("(LsO)", e->value, e->name,
                                       bc_error_class(st, (CUresult)e->value));
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(item);
    }
    Py_SETREF(out, PyList_AsTuple(out));
    return out;
}

PyDoc_STRVAR(raise_error_doc,
"_raise_error(code, routine)\n--\n\n"
"Raise the exception barecuda raises when `routine` returns CUresult `code`.");

static PyObject *
bc_raise_error(PyObject *m, PyObject *args)
{
    int code;
    const char *routine;
    if (!PyArg_ParseTuple(args, "is:_raise_error", &code, &routine))
        return NULL;
    bc_error_raise(bc_state_from_module(m), (CUresult)code, routine);
    return NULL;
}

PyDoc_STRVAR(enum_tables_doc,
"_enum_tables()\n--\n\n"
"{name: ((member, value), ...)} for every enum and flag group of the headers.");

static PyObject *
bc_enum_tables_py(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    BC_UNUSED(m);
    PyObject *out = PyDict_New();
    for (const bc_enum_table *t = bc_enum_tables; out && t->name; t++) {
        Py_ssize_t n = 0;
        while (t->members[n].name)
            n++;
        PyObject *tuple = PyTuple_New(n);
        for (Py_ssize_t i = 0; tuple && i < n; i++) {
            PyObject *pair = Py_BuildValue("(sL)", t->members[i].name, t->members[i].value);
            if (pair == NULL)
                Py_CLEAR(tuple);
            else
                PyTuple_SET_ITEM(tuple, i, pair);
        }
        if (tuple == NULL || PyDict_SetItemString(out, t->name, tuple) < 0)
            Py_CLEAR(out);
        Py_XDECREF(tuple);
    }
    return out;
}

static PyMethodDef error_methods[] = {
    {"_error_table", bc_error_table, METH_NOARGS, error_table_doc},
    {"_raise_error", bc_raise_error, METH_VARARGS, raise_error_doc},
    {"_enum_tables", bc_enum_tables_py, METH_NOARGS, enum_tables_doc},
    {NULL, NULL, 0, NULL},
};

static int
new_exception(PyObject *m, PyObject **slot, const char *name, PyObject *bases,
              const char *doc)
{
    *slot = PyErr_NewExceptionWithDoc(name, doc, bases, NULL);
    if (*slot == NULL)
        return -1;
    return PyModule_AddObjectRef(m, strrchr(name, '.') + 1, *slot);
}

int
bc_error_setup(PyObject *m, bc_State *st)
{
    if (new_exception(m, &st->Error, "barecuda.driver.Error", NULL,
                      "Base of every barecuda error; .code, .name and .routine say which "
                      "driver call failed and how (None when no driver call was involved).") < 0)
        return -1;
    PyObject *mem_bases = PyTuple_Pack(2, st->Error, PyExc_MemoryError);
    if (mem_bases == NULL)
        return -1;
    int rc = new_exception(m, &st->MemoryError, "barecuda.driver.MemoryError", mem_bases,
                           "The device (or pinned host memory) is out of memory.");
    Py_DECREF(mem_bases);
    if (rc < 0 ||
        new_exception(m, &st->LogicError, "barecuda.driver.LogicError", st->Error,
                      "Misuse: an invalid value, handle, state or a released object.") < 0 ||
        new_exception(m, &st->RuntimeError, "barecuda.driver.RuntimeError", st->Error,
                      "A failure reported by the driver that is not misuse.") < 0 ||
        new_exception(m, &st->LaunchError, "barecuda.driver.LaunchError", st->Error,
                      "A kernel launch failed or a kernel faulted.  After a fault "
                      "(illegal address, misaligned address, launch failure) the context "
                      "is unusable.") < 0 ||
        new_exception(m, &st->CompileError, "barecuda.driver.CompileError", st->Error,
                      "NVRTC or nvcc rejected the source; .log holds the compiler's log.") < 0)
        return -1;
    return PyModule_AddFunctions(m, error_methods);
}
