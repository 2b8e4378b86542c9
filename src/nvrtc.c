/* SPDX-License-Identifier: MIT */
/* NVRTC: compiling CUDA C++ source to CUBIN or PTX inside the process.
 *
 * Two private functions for python/barecuda/compiler.py, which owns the policy
 * (extern "C" wrapping, option translation, architecture choice, the cache and
 * the final error message): `_nvrtc_compile` runs one NVRTC program from
 * creation to destruction and `_nvrtc_supported_archs` lists the architectures
 * the loaded NVRTC can target.  The whole NVRTC side of a compile (create, add
 * name expressions, compile, fetch log, image and lowered names, destroy) runs
 * with the GIL released on plain C copies of the inputs, so threads compile in
 * parallel: NVRTC programs are independent of each other. */
#include "barecuda/error.h"
#include "barecuda/loader.h"

#include <stdlib.h>
#include <string.h>

/* One compile: inputs borrowed from Python objects kept alive by the caller,
 * outputs malloc'ed by the worker, everything readable without the GIL. */
typedef struct {
    const char *source;
    const char *name;
    int nheaders;
    const char **header_names;
    const char **header_texts;
    int noptions;
    const char **options;
    int nexprs;
    const char **exprs;
    int want_cubin;
    /* results */
    nvrtcResult rc;
    const char *routine; /* the NVRTC call that failed */
    int bad_expr;        /* index of the name expression that failed, or -1 */
    char *log;
    size_t log_size;
    char *image;
    size_t image_size;
    char **lowered; /* nexprs strings */
} compile_job;

static char *
copy_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *out = malloc(n);
    if (out)
        memcpy(out, s, n);
    return out;
}

/* Runs without the GIL. */
static void
run_job(compile_job *job)
{
    nvrtcProgram prog = NULL;
    job->bad_expr = -1;
    job->routine = "nvrtcCreateProgram";
    job->rc = bc_nvrtc.nvrtcCreateProgram(&prog, job->source, job->name, job->nheaders,
                                          job->header_texts, job->header_names);
    if (job->rc != NVRTC_SUCCESS)
        return;
    for (int i = 0; i < job->nexprs; i++) {
        job->rc = bc_nvrtc.nvrtcAddNameExpression(prog, job->exprs[i]);
        if (job->rc != NVRTC_SUCCESS) {
            job->routine = "nvrtcAddNameExpression";
            job->bad_expr = i;
            goto done;
        }
    }
    job->routine = "nvrtcCompileProgram";
    nvrtcResult crc = bc_nvrtc.nvrtcCompileProgram(prog, job->noptions, job->options);

    size_t log_size = 0;
    if (bc_nvrtc.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 0) {
        job->log = malloc(log_size + 1);
        if (job->log &&
            bc_nvrtc.nvrtcGetProgramLog(prog, job->log) == NVRTC_SUCCESS) {
            job->log[log_size] = '\0';
            job->log_size = strlen(job->log);
        } else {
            free(job->log);
            job->log = NULL;
        }
    }
    job->rc = crc;
    if (crc != NVRTC_SUCCESS)
        goto done;

    size_t size = 0;
    if (job->want_cubin) {
        job->routine = "nvrtcGetCUBINSize";
        job->rc = bc_nvrtc.nvrtcGetCUBINSize(prog, &size);
    } else {
        job->routine = "nvrtcGetPTXSize";
        job->rc = bc_nvrtc.nvrtcGetPTXSize(prog, &size);
    }
    if (job->rc != NVRTC_SUCCESS)
        goto done;
    if (job->want_cubin && size == 0) {
        /* A virtual architecture (compute_XY) produces no CUBIN. */
        job->rc = NVRTC_ERROR_INVALID_OPTION;
        goto done;
    }
    job->image = malloc(size ? size : 1);
    if (job->image == NULL) {
        job->rc = NVRTC_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    if (job->want_cubin) {
        job->routine = "nvrtcGetCUBIN";
        job->rc = bc_nvrtc.nvrtcGetCUBIN(prog, job->image);
    } else {
        job->routine = "nvrtcGetPTX";
        job->rc = bc_nvrtc.nvrtcGetPTX(prog, job->image);
        /* PTX comes NUL-terminated; hand back the text only. */
        if (job->rc == NVRTC_SUCCESS && size > 0 && job->image[size - 1] == '\0')
            size--;
    }
    job->image_size = size;
    if (job->rc != NVRTC_SUCCESS)
        goto done;

    if (job->nexprs > 0) {
        job->lowered = calloc((size_t)job->nexprs, sizeof(char *));
        if (job->lowered == NULL) {
            job->rc = NVRTC_ERROR_OUT_OF_MEMORY;
            goto done;
        }
        job->routine = "nvrtcGetLoweredName";
        for (int i = 0; i < job->nexprs; i++) {
            const char *lowered = NULL;
            job->rc = bc_nvrtc.nvrtcGetLoweredName(prog, job->exprs[i], &lowered);
            if (job->rc != NVRTC_SUCCESS) {
                job->bad_expr = i;
                goto done;
            }
            job->lowered[i] = copy_string(lowered);
            if (job->lowered[i] == NULL) {
                job->rc = NVRTC_ERROR_OUT_OF_MEMORY;
                goto done;
            }
        }
    }
    job->rc = NVRTC_SUCCESS;
done:
    bc_nvrtc.nvrtcDestroyProgram(&prog);
}

static void
free_job(compile_job *job)
{
    free(job->header_names);
    free(job->header_texts);
    free(job->options);
    free(job->exprs);
    free(job->log);
    free(job->image);
    if (job->lowered) {
        for (int i = 0; i < job->nexprs; i++)
            free(job->lowered[i]);
        free(job->lowered);
    }
}

/* A C string for a str or bytes object (borrowed from it); NULL with TypeError
 * or ValueError (embedded NUL) naming `what`. */
static const char *
text_of(PyObject *obj, const char *what)
{
    const char *s;
    Py_ssize_t n;
    if (PyUnicode_Check(obj)) {
        s = PyUnicode_AsUTF8AndSize(obj, &n);
        if (s == NULL)
            return NULL;
    } else if (PyBytes_Check(obj)) {
        s = PyBytes_AS_STRING(obj);
        n = PyBytes_GET_SIZE(obj);
    } else {
        PyErr_Format(PyExc_TypeError, "%s must be str or bytes, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    if ((Py_ssize_t)strlen(s) != n) {
        PyErr_Format(PyExc_ValueError, "%s contains a NUL character", what);
        return NULL;
    }
    return s;
}

/* A list of the str items of `seq` (None: empty), with their C strings in *out
 * (malloc'ed array of borrowed pointers).  New reference or NULL. */
static PyObject *
string_list(PyObject *seq, const char *what, const char ***out, int *count)
{
    *out = NULL;
    *count = 0;
    if (seq == NULL || seq == Py_None)
        return PyList_New(0);
    if (PyUnicode_Check(seq) || PyBytes_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of str, not a single string", what);
        return NULL;
    }
    PyObject *list = PySequence_List(seq);
    if (list == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s must be a sequence of str, not %.100s", what,
                         Py_TYPE(seq)->tp_name);
        }
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n > 65536) {
        PyErr_Format(PyExc_ValueError, "%s: too many items (%zd)", what, n);
        goto error;
    }
    *out = calloc((size_t)n + 1, sizeof(char *));
    if (*out == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s[%zd] must be str, not %.100s", what, i,
                         Py_TYPE(item)->tp_name);
            goto error;
        }
        if (((*out)[i] = text_of(item, what)) == NULL)
            goto error;
    }
    *count = (int)n;
    return list;
error:
    free(*out);
    *out = NULL;
    Py_DECREF(list);
    return NULL;
}

/* Raise CompileError(message) with .log, .source, .options, .code, .name and
 * .routine set.  Always returns NULL. */
static PyObject *
raise_compile_error(bc_State *st, PyObject *message, const compile_job *job, PyObject *source,
                    PyObject *options)
{
    PyObject *exc = NULL, *log = NULL, *opts = NULL;
    if (message == NULL)
        return NULL;
    exc = PyObject_CallOneArg(st->CompileError, message);
    if (exc == NULL)
        goto done;
    log = PyUnicode_DecodeUTF8(job->log ? job->log : "", (Py_ssize_t)job->log_size, "replace");
    opts = PyList_AsTuple(options);
    PyObject *code = PyLong_FromLong((long)job->rc);
    PyObject *name = PyUnicode_FromString(bc_nvrtc.nvrtcGetErrorString(job->rc));
    PyObject *routine = PyUnicode_FromString(job->routine);
    int bad = log == NULL || opts == NULL || code == NULL || name == NULL || routine == NULL ||
              PyObject_SetAttrString(exc, "log", log) < 0 ||
              PyObject_SetAttrString(exc, "source", source) < 0 ||
              PyObject_SetAttrString(exc, "options", opts) < 0 ||
              PyObject_SetAttrString(exc, "code", code) < 0 ||
              PyObject_SetAttrString(exc, "name", name) < 0 ||
              PyObject_SetAttrString(exc, "routine", routine) < 0;
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_XDECREF(routine);
    if (!bad)
        PyErr_SetObject(st->CompileError, exc);
done:
    Py_XDECREF(exc);
    Py_XDECREF(log);
    Py_XDECREF(opts);
    Py_DECREF(message);
    return NULL;
}

PyDoc_STRVAR(nvrtc_compile_doc,
"_nvrtc_compile(source, name='kernel.cu', options=(), headers=None, name_expressions=(), target='cubin')\n--\n\n"
"Compile CUDA C++ `source` (str or bytes) with NVRTC, as program `name`, with\n"
"NVRTC `options` (a sequence of str, passed as they are), in-memory `headers`\n"
"(a sequence of (include_name, text) pairs) and `name_expressions` (C++ names\n"
"such as 'axpy<float>' whose mangled names are wanted).  `target` is 'cubin'\n"
"(needs an sm_XY architecture among the options) or 'ptx'.\n\n"
"Returns (image: bytes, log: str, {name_expression: lowered_name}).  The GIL\n"
"is released while NVRTC works.  On failure raises CompileError with .log,\n"
".source and .options set.");

static PyObject *
nvrtc_compile(PyObject *m, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"source", "name", "options", "headers", "name_expressions",
                             "target", NULL};
    bc_State *st = bc_state_from_module(m);
    PyObject *source, *options = NULL, *headers = Py_None, *exprs = NULL;
    const char *name = "kernel.cu", *target = "cubin";
    PyObject *opt_list = NULL, *expr_list = NULL, *hdr_list = NULL, *result = NULL;
    PyObject *image = NULL, *log = NULL, *lowered = NULL;
    compile_job job;
    memset(&job, 0, sizeof job);

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|sOOOs:_nvrtc_compile", kwlist, &source,
                                     &name, &options, &headers, &exprs, &target))
        return NULL;
    if (strcmp(target, "cubin") == 0)
        job.want_cubin = 1;
    else if (strcmp(target, "ptx") != 0) {
        PyErr_Format(PyExc_ValueError, "target must be 'cubin' or 'ptx', not '%s'", target);
        return NULL;
    }
    if ((job.source = text_of(source, "source")) == NULL)
        return NULL;
    job.name = name;
    if ((opt_list = string_list(options, "options", &job.options, &job.noptions)) == NULL)
        goto done;
    if ((expr_list = string_list(exprs, "name_expressions", &job.exprs, &job.nexprs)) == NULL)
        goto done;
    if (headers != Py_None) {
        if ((hdr_list = PySequence_List(headers)) == NULL)
            goto done;
        Py_ssize_t n = PyList_GET_SIZE(hdr_list);
        job.header_names = calloc((size_t)n + 1, sizeof(char *));
        job.header_texts = calloc((size_t)n + 1, sizeof(char *));
        if (job.header_names == NULL || job.header_texts == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *pair = PyList_GET_ITEM(hdr_list, i);
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
                PyErr_Format(PyExc_TypeError,
                             "headers[%zd] must be a (name, text) tuple, not %.100s", i,
                             Py_TYPE(pair)->tp_name);
                goto done;
            }
            if ((job.header_names[i] = text_of(PyTuple_GET_ITEM(pair, 0), "header name")) ==
                    NULL ||
                (job.header_texts[i] = text_of(PyTuple_GET_ITEM(pair, 1), "header text")) ==
                    NULL)
                goto done;
        }
        job.nheaders = (int)n;
    }
    if (bc_loader_load_nvrtc(st) < 0)
        goto done;

    Py_BEGIN_ALLOW_THREADS
    run_job(&job);
    Py_END_ALLOW_THREADS

    if (job.rc != NVRTC_SUCCESS) {
        PyObject *msg;
        const char *why = bc_nvrtc.nvrtcGetErrorString(job.rc);
        if (job.bad_expr >= 0)
            msg = PyUnicode_FromFormat("%s failed for name expression '%s': %s%s%s",
                                       job.routine, job.exprs[job.bad_expr], why,
                                       job.log_size ? "\n" : "", job.log ? job.log : "");
        else if (strcmp(job.routine, "nvrtcGetCUBINSize") == 0)
            msg = PyUnicode_FromFormat("NVRTC produced no CUBIN for %s: a virtual "
                                       "architecture (compute_XY) gives PTX only; use "
                                       "target='ptx' or an sm_XY architecture",
                                       name);
        else if (strcmp(job.routine, "nvrtcCompileProgram") == 0)
            msg = PyUnicode_FromFormat("NVRTC could not compile %s (%s)%s%s", name, why,
                                       job.log_size ? ":\n" : "", job.log ? job.log : "");
        else
            msg = PyUnicode_FromFormat("%s failed: %s", job.routine, why);
        raise_compile_error(st, msg, &job, source, opt_list);
        goto done;
    }

    image = PyBytes_FromStringAndSize(job.image, (Py_ssize_t)job.image_size);
    log = PyUnicode_DecodeUTF8(job.log ? job.log : "", (Py_ssize_t)job.log_size, "replace");
    lowered = PyDict_New();
    if (image == NULL || log == NULL || lowered == NULL)
        goto done;
    for (int i = 0; i < job.nexprs; i++) {
        PyObject *v = PyUnicode_FromString(job.lowered[i]);
        if (v == NULL || PyDict_SetItem(lowered, PyList_GET_ITEM(expr_list, i), v) < 0) {
            Py_XDECREF(v);
            goto done;
        }
        Py_DECREF(v);
    }
    result = PyTuple_Pack(3, image, log, lowered);
done:
    Py_XDECREF(image);
    Py_XDECREF(log);
    Py_XDECREF(lowered);
    Py_XDECREF(opt_list);
    Py_XDECREF(expr_list);
    Py_XDECREF(hdr_list);
    free_job(&job);
    return result;
}

PyDoc_STRVAR(nvrtc_supported_archs_doc,
"_nvrtc_supported_archs()\n--\n\n"
"The architectures the loaded NVRTC can compile for, as ints (90 for sm_90),\n"
"ascending.  Loads NVRTC if needed.");

static PyObject *
nvrtc_supported_archs(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    if (bc_loader_load_nvrtc(st) < 0)
        return NULL;
    int n = 0;
    if (bc_nvrtc.nvrtcGetNumSupportedArchs == NULL ||
        bc_nvrtc.nvrtcGetSupportedArchs == NULL)
        return PyList_New(0);
    nvrtcResult rc = bc_nvrtc.nvrtcGetNumSupportedArchs(&n);
    if (rc != NVRTC_SUCCESS || n < 0) {
        PyErr_Format(st->Error, "nvrtcGetNumSupportedArchs failed: %s",
                     bc_nvrtc.nvrtcGetErrorString(rc));
        return NULL;
    }
    int *archs = calloc((size_t)n + 1, sizeof(int));
    if (archs == NULL)
        return PyErr_NoMemory();
    rc = bc_nvrtc.nvrtcGetSupportedArchs(archs);
    if (rc != NVRTC_SUCCESS) {
        free(archs);
        PyErr_Format(st->Error, "nvrtcGetSupportedArchs failed: %s",
                     bc_nvrtc.nvrtcGetErrorString(rc));
        return NULL;
    }
    PyObject *out = PyList_New(n);
    for (int i = 0; out && i < n; i++) {
        PyObject *v = PyLong_FromLong(archs[i]);
        if (v == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, v);
    }
    free(archs);
    if (out && PyList_Sort(out) < 0)
        Py_CLEAR(out);
    return out;
}

static PyMethodDef nvrtc_methods[] = {
    {"_nvrtc_compile", (PyCFunction)(void (*)(void))nvrtc_compile, METH_VARARGS | METH_KEYWORDS,
     nvrtc_compile_doc},
    {"_nvrtc_supported_archs", nvrtc_supported_archs, METH_NOARGS, nvrtc_supported_archs_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_nvrtc_setup(PyObject *m, bc_State *st)
{
    BC_UNUSED(st);
    return PyModule_AddFunctions(m, nvrtc_methods);
}
