/* SPDX-License-Identifier: MIT */
/* Linker: the driver's JIT linker (cuLinkCreate ... cuLinkComplete), which joins
 * relocatable device code (PTX, CUBIN, fatbins, objects, libraries such as
 * libcudadevrt.a) into one image and loads it as a Module.  PyCUDA's Linker.
 *
 * The link state is made at the first input, in the context current then, and
 * the Linker holds that Context from then on; every later call makes it current
 * for the driver call.  So constructing a Linker and checking the inputs (input
 * types, files, data) needs no GPU.  The JIT's info and error logs accumulate for
 * the whole link: a failure raises with the error log in its message, and a
 * message_handler(success, info_log, error_log) sees both.  Adding inputs and
 * completing the link run with the GIL released; a Linker used from a second
 * thread meanwhile raises LogicError instead of racing.  link_module() finishes
 * the Linker (PyCUDA's behaviour); close() and the context manager end it early.
 *
 * Also here: finding the toolkit's static device libraries (libcudadevrt.a) in
 * the directories src/loader.c searches for NVRTC. */
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/module.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    PyObject_HEAD
    CUlinkState state;  /* NULL before the first input and once finished */
    bc_Context *ctx;    /* the context of `state`; NULL before the first input */
    PyObject *handler;  /* callable or NULL */
    bc_jit_options opts; /* must outlive `state`: the driver writes the logs */
    int ninputs;
    int closed;         /* 1 once closed; -1: a subclass's Linker before Linker.__init__ */
    int linked;
    int busy;           /* a call has the GIL released: other threads keep off */
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_Linker;

static const char *const input_names[] = {"CUBIN", "PTX", "FATBINARY", "OBJECT", "LIBRARY",
                                          "NVVM"};

/* The name of an input type, for messages (newer headers may add types). */
static const char *
input_name(CUjitInputType type)
{
    return (size_t)type < BC_COUNT(input_names) ? input_names[type] : "input";
}

/* ------------------------------------------------------------ helpers */

/* 0, or -1 with LogicError for a subclass's Linker whose __init__ never called
 * Linker.__init__. */
static int
linker_ready(bc_State *st, bc_Linker *self)
{
    if (self->closed >= 0)
        return 0;
    return bc_error_logic(st, "this %.100s was not initialised: its __init__ must call "
                              "Linker.__init__(self, ...)", Py_TYPE(self)->tp_name);
}

static int
linker_open(bc_State *st, bc_Linker *self)
{
    if (self->closed < 0)
        return linker_ready(st, self);
    if (self->closed)
        return bc_error_logic(st, self->linked ? "this Linker was finished by link_module()"
                                               : "this Linker was closed");
    if (self->busy)
        return bc_error_logic(st, "this Linker is in use by another thread");
    return bc_context_check_alive(st, self->ctx, "this Linker");
}

/* Report a failed driver call: message_handler(False, info, error) first, then
 * raise with the error log attached.  Always -1. */
static int
linker_fail(bc_State *st, bc_Linker *self, CUresult rc, const char *routine)
{
    if (self->handler != NULL) {
        PyObject *info = bc_jit_log_str(self->opts.info_log);
        PyObject *err = bc_jit_log_str(self->opts.error_log);
        PyObject *res = info && err ? PyObject_CallFunction(self->handler, "OOO", Py_False,
                                                            info, err)
                                    : NULL;
        Py_XDECREF(info);
        Py_XDECREF(err);
        if (res == NULL)
            return -1;
        Py_DECREF(res);
    }
    bc_error_raise(st, rc, routine);
    bc_jit_attach_error_log(self->opts.error_log);
    return -1;
}

/* Make the link state in the current context when there is none yet. */
static int
linker_start(bc_State *st, bc_Linker *self)
{
    if (self->state != NULL)
        return 0;
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return -1;
    CUlinkState state = NULL;
    CUresult rc = bc_drv.cuLinkCreate(self->opts.n, self->opts.keys, self->opts.values, &state);
    if (rc != CUDA_SUCCESS) {
        Py_DECREF(ctx);
        return linker_fail(st, self, rc, "cuLinkCreate");
    }
    self->state = state;
    self->ctx = ctx;
    return 0;
}

static CUresult
linker_release(bc_Linker *self)
{
    CUlinkState state = self->state;
    self->state = NULL;
    if (state == NULL || self->ctx == NULL || self->ctx->let_go || !bc_drv_ready)
        return CUDA_SUCCESS;
    int entered = bc_context_enter(self->ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = bc_drv.cuLinkDestroy(state);
    bc_context_leave(entered);
    return rc;
}

static int
input_type_arg(PyObject *obj, CUjitInputType *out)
{
    long long v;
    if (bc_arg_long(obj, "input_type (a jit_input_type)", 0, CU_JIT_NUM_INPUT_TYPES - 1, &v) < 0)
        return -1;
    *out = (CUjitInputType)v;
    return 0;
}

/* ------------------------------------------------------------ Linker */

/* Parse Linker's arguments: 0 with *handler (borrowed, NULL for None) and *opts
 * (the caller frees them), or -1. */
static int
linker_parse(bc_State *st, PyObject *args, PyObject *kwargs, PyObject **handler,
             bc_jit_options *opts)
{
    static char *kwlist[] = {"message_handler", "options", "log_verbose", NULL};
    PyObject *h = Py_None, *options = Py_None;
    int verbose = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOp:Linker", kwlist, &h, &options,
                                     &verbose))
        return -1;
    if (h != Py_None && !PyCallable_Check(h)) {
        PyErr_Format(PyExc_TypeError, "Linker(): message_handler must be callable or None, "
                                      "not %.100s", Py_TYPE(h)->tp_name);
        return -1;
    }
    if (bc_jit_options_fill(st, options, opts) < 0)
        return -1;
    opts->keys[opts->n] = CU_JIT_LOG_VERBOSE;
    opts->values[opts->n++] = (void *)(uintptr_t)(verbose ? 1 : 0);
    *handler = h == Py_None ? NULL : h;
    return 0;
}

/* Linker(...) is set up in __new__.  A subclass (PyCUDA's classes are built in
 * __init__, so its own __init__ may take other arguments) gets an unset Linker
 * from __new__ (closed -1) and Linker.__init__ sets it up. */
static PyObject *
linker_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type(type);
    if (st == NULL)
        return NULL;
    if (type != (PyTypeObject *)st->LinkerType) {
        bc_Linker *self = (bc_Linker *)type->tp_alloc(type, 0);
        if (self != NULL)
            self->closed = -1;
        return (PyObject *)self;
    }
    PyObject *handler;
    bc_jit_options opts;
    if (linker_parse(st, args, kwargs, &handler, &opts) < 0)
        return NULL;
    /* tp_alloc: zeroed (a subclass's __slots__ and __dict__ too) and tracked */
    bc_Linker *self = (bc_Linker *)type->tp_alloc(type, 0);
    if (self == NULL) {
        bc_jit_options_free(&opts);
        return NULL;
    }
    self->handler = Py_XNewRef(handler);
    self->opts = opts;
    return (PyObject *)self;
}

static int
linker_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of(self);
    if (Py_IS_TYPE(self, (PyTypeObject *)st->LinkerType))
        return 0; /* set up by __new__ from the same arguments */
    bc_Linker *l = (bc_Linker *)self;
    if (l->closed >= 0) {
        PyErr_Format(PyExc_TypeError, "Linker.__init__() called twice on this %.100s",
                     Py_TYPE(self)->tp_name);
        return -1;
    }
    PyObject *handler;
    bc_jit_options opts;
    if (linker_parse(st, args, kwargs, &handler, &opts) < 0)
        return -1;
    l->handler = Py_XNewRef(handler);
    l->opts = opts;
    l->closed = 0;
    return 0;
}

static int
linker_traverse(bc_Linker *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->handler);
    Py_VISIT(self->ctx);
    return 0;
}

static int
linker_clear(bc_Linker *self)
{
    Py_CLEAR(self->dict);
    /* The context stays until dealloc: the link state is destroyed in it. */
    Py_CLEAR(self->handler);
    return 0;
}

static void
linker_dealloc(bc_Linker *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->state != NULL)
        bc_error_in_destructor(linker_release(self), "cuLinkDestroy", (PyObject *)self);
    Py_CLEAR(self->handler);
    Py_CLEAR(self->ctx);
    bc_jit_options_free(&self->opts);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* Add one input to the started link with the GIL released and the linker busy:
 * `data` (`size` bytes, named `name`) by cuLinkAddData, or, when data is NULL, the
 * file at path `name` by cuLinkAddFile.  0, or -1 with the exception set. */
static int
linker_add(bc_State *st, bc_Linker *self, CUjitInputType type, const char *data, size_t size,
           const char *name)
{
    CUresult rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    int entered = bc_context_enter(self->ctx);
    if (entered < 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else if (data != NULL)
        rc = bc_drv.cuLinkAddData(self->state, type, (void *)data, size, name, 0, NULL, NULL);
    else
        rc = bc_drv.cuLinkAddFile(self->state, type, name, 0, NULL, NULL);
    bc_context_leave(entered);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != CUDA_SUCCESS)
        return linker_fail(st, self, rc, data != NULL ? "cuLinkAddData" : "cuLinkAddFile");
    self->ninputs++;
    return 0;
}

/* cuLinkAddData of `data` (str, or bytes-like) with the GIL released. */
static PyObject *
add_data_impl(bc_Linker *self, PyObject *data, CUjitInputType type, PyObject *name)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (linker_open(st, self) < 0)
        return NULL;
    if (name != Py_None && !PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "name must be a str or None, not %.100s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    const char *cname = name == Py_None ? NULL : PyUnicode_AsUTF8(name);
    if (name != Py_None && cname == NULL)
        return NULL;
    Py_buffer view = {0};
    const char *src;
    Py_ssize_t len;
    if (PyUnicode_Check(data)) {
        if ((src = PyUnicode_AsUTF8AndSize(data, &len)) == NULL)
            return NULL;
    } else if (PyObject_GetBuffer(data, &view, PyBUF_CONTIG_RO) == 0) {
        src = view.buf;
        len = view.len;
    } else {
        PyErr_Format(PyExc_TypeError,
                     "data must be bytes-like (or str for PTX), not %.100s",
                     Py_TYPE(data)->tp_name);
        return NULL;
    }
    PyObject *out = NULL;
    char *copy = NULL;
    size_t size = (size_t)len;
    if (len == 0) {
        PyErr_Format(PyExc_ValueError, "%s data is empty", input_name(type));
        goto done;
    }
    if (type == CU_JIT_INPUT_PTX && src[len - 1] != '\0') {
        /* PTX is read up to its NUL: give the driver a terminated copy */
        if ((copy = PyMem_RawMalloc(size + 1)) == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        memcpy(copy, src, size);
        copy[size++] = '\0';
        src = copy;
    }
    if (linker_start(st, self) < 0)
        goto done;
    if (linker_add(st, self, type, src, size, cname) == 0)
        out = Py_NewRef(Py_None);
done:
    PyMem_RawFree(copy);
    if (view.obj != NULL)
        PyBuffer_Release(&view);
    return out;
}

PyDoc_STRVAR(add_data_doc,
"add_data($self, data, input_type, name=\"unknown\")\n--\n\n"
"Add one input from memory: PTX text (str or bytes), or the bytes of a CUBIN,\n"
"fatbin, object or library, as `input_type` (a jit_input_type) says.  `name`\n"
"appears in the JIT's logs.  The first input starts the link in the current\n"
"context.");

static PyObject *
linker_add_data(bc_Linker *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", "input_type", "name", NULL};
    PyObject *data, *type_obj, *name = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:add_data", kwlist, &data, &type_obj,
                                     &name))
        return NULL;
    CUjitInputType type;
    if (input_type_arg(type_obj, &type) < 0)
        return NULL;
    PyObject *dflt = NULL;
    if (name == NULL && (name = dflt = PyUnicode_FromString("unknown")) == NULL)
        return NULL;
    PyObject *out = add_data_impl(self, data, type, name);
    Py_XDECREF(dflt);
    return out;
}

/* add_source_<kind>(data, name="unknown"): add_data with a fixed input type. */
static PyObject *
add_kind(bc_Linker *self, PyObject *args, PyObject *kwargs, CUjitInputType type,
         const char *fmt)
{
    static char *kwlist[] = {"data", "name", NULL};
    PyObject *data, *name = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &data, &name))
        return NULL;
    PyObject *dflt = NULL;
    if (name == NULL && (name = dflt = PyUnicode_FromString("unknown")) == NULL)
        return NULL;
    PyObject *out = add_data_impl(self, data, type, name);
    Py_XDECREF(dflt);
    return out;
}

#define BC_ADD_KIND(fn, type, what)                                                      \
    PyDoc_STRVAR(fn##_doc, #fn "($self, data, name=\"unknown\")\n--\n\n"                     \
                           "add_data(data, jit_input_type." #type ", name): add " what "."); \
    static PyObject *linker_##fn(bc_Linker *self, PyObject *args, PyObject *kwargs)       \
    {                                                                                    \
        return add_kind(self, args, kwargs, CU_JIT_INPUT_##type, "O|O:" #fn);             \
    }
BC_ADD_KIND(add_source_ptx, PTX, "PTX text (str or bytes)")
BC_ADD_KIND(add_source_cubin, CUBIN, "a (relocatable) CUBIN image")
BC_ADD_KIND(add_source_fatbin, FATBINARY, "a fatbin image")
BC_ADD_KIND(add_source_object, OBJECT, "a host object file's bytes holding device code")
BC_ADD_KIND(add_source_library, LIBRARY, "a static library archive's bytes (lib*.a)")
#undef BC_ADD_KIND

PyDoc_STRVAR(add_file_doc,
"add_file($self, filename, input_type)\n--\n\n"
"Add one input read from a file (cuLinkAddFile), such as the toolkit's\n"
"libcudadevrt.a as jit_input_type.LIBRARY.  A missing or unreadable file raises\n"
"OSError (FileNotFoundError ...) before the driver is asked.");

static PyObject *
linker_add_file(bc_Linker *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"filename", "input_type", NULL};
    PyObject *path = NULL, *type_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O:add_file", kwlist, PyUnicode_FSConverter,
                                     &path, &type_obj))
        return NULL;
    PyObject *out = NULL;
    CUjitInputType type;
    if (linker_open(st, self) < 0 || input_type_arg(type_obj, &type) < 0)
        goto done;
    const char *cpath = PyBytes_AS_STRING(path);
    struct stat sb;
    int bad = stat(cpath, &sb) != 0 || access(cpath, R_OK) != 0 ? errno
              : S_ISDIR(sb.st_mode)                              ? EISDIR
                                                                 : 0;
    if (bad) {
        PyObject *shown = PyUnicode_DecodeFSDefaultAndSize(cpath, PyBytes_GET_SIZE(path));
        errno = bad;
        if (shown != NULL)
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, shown);
        Py_XDECREF(shown);
        goto done;
    }
    if (linker_start(st, self) < 0)
        goto done;
    if (linker_add(st, self, type, NULL, 0, cpath) == 0)
        out = Py_NewRef(Py_None);
done:
    Py_DECREF(path);
    return out;
}

PyDoc_STRVAR(link_module_doc,
"link_module($self)\n--\n\n"
"Complete the link (cuLinkComplete) and load the image as a Module of the\n"
"Linker's context.  On success message_handler(True, info_log, error_log) is\n"
"called when given, and the Linker is finished (further calls raise\n"
"LogicError).  A failed link raises with the JIT error log in the message\n"
"(undefined symbols are named there).");

static PyObject *
linker_link_module(bc_Linker *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (linker_open(st, self) < 0)
        return NULL;
    if (self->ninputs == 0 || self->state == NULL) {
        bc_error_logic(st, "this Linker has no inputs: add_data()/add_file() first");
        return NULL;
    }
    void *image = NULL;
    size_t size = 0;
    CUresult rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    int entered = bc_context_enter(self->ctx);
    rc = entered < 0 ? CUDA_ERROR_INVALID_CONTEXT
                     : bc_drv.cuLinkComplete(self->state, &image, &size);
    bc_context_leave(entered);
    Py_END_ALLOW_THREADS
    if (rc != CUDA_SUCCESS) {
        self->busy = 0;
        linker_fail(st, self, rc, "cuLinkComplete");
        return NULL;
    }
    /* The image belongs to the link state: load it before the state goes.  The
     * load releases the GIL, so stay busy: a close() from another thread
     * meanwhile would destroy the state and the image with it. */
    int entered2 = bc_context_enter(self->ctx);
    if (entered2 < 0) {
        self->busy = 0;
        bc_error_raise(st, CUDA_ERROR_INVALID_CONTEXT, "cuCtxPushCurrent");
        return NULL;
    }
    PyObject *module = bc_module_load_image(st, image, NULL, NULL);
    bc_context_leave(entered2);
    self->busy = 0;
    if (module == NULL)
        return NULL;
    if (self->handler != NULL) {
        PyObject *info = bc_jit_log_str(self->opts.info_log);
        PyObject *err = bc_jit_log_str(self->opts.error_log);
        PyObject *res = info && err ? PyObject_CallFunction(self->handler, "OOO", Py_True,
                                                            info, err)
                                    : NULL;
        Py_XDECREF(info);
        Py_XDECREF(err);
        if (res == NULL) {
            Py_DECREF(module);
            return NULL;
        }
        Py_DECREF(res);
    }
    self->linked = 1;
    self->closed = 1;
    if (bc_check(st, linker_release(self), "cuLinkDestroy") < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

PyDoc_STRVAR(close_doc,
"close($self)\n--\n\n"
"Destroy the link state now (idempotent); later calls raise LogicError.");

static PyObject *
linker_close(bc_Linker *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (self->closed < 0)
        Py_RETURN_NONE; /* never set up: nothing to destroy */
    if (self->busy) {
        bc_error_logic(st, "this Linker is in use by another thread");
        return NULL;
    }
    self->closed = 1;
    if (bc_check(st, linker_release(self), "cuLinkDestroy") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
linker_enter(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self);
}

static PyObject *
linker_exit(bc_Linker *self, PyObject *Py_UNUSED(args))
{
    return linker_close(self, NULL);
}

static PyObject *
linker_get_context(bc_Linker *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->ctx ? (PyObject *)self->ctx : Py_None);
}

static PyObject *
linker_get_closed(bc_Linker *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->closed > 0);
}

static PyObject *
linker_get_ninputs(bc_Linker *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(self->ninputs);
}

static PyObject *
linker_get_info_log(bc_Linker *self, void *Py_UNUSED(closure))
{
    if (linker_ready(bc_state_of((PyObject *)self), self) < 0)
        return NULL; /* no log buffers yet */
    return self->busy ? PyUnicode_FromString("") : bc_jit_log_str(self->opts.info_log);
}

static PyObject *
linker_get_error_log(bc_Linker *self, void *Py_UNUSED(closure))
{
    if (linker_ready(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    return self->busy ? PyUnicode_FromString("") : bc_jit_log_str(self->opts.error_log);
}

static PyObject *
linker_repr(bc_Linker *self)
{
    if (self->closed < 0)
        return PyUnicode_FromString("<barecuda.driver.Linker (not initialised)>");
    return PyUnicode_FromFormat("<barecuda.driver.Linker, %d input%s%s>", self->ninputs,
                                self->ninputs == 1 ? "" : "s",
                                self->linked ? ", linked" : self->closed ? ", closed" : "");
}

static PyMethodDef linker_methods[] = {
    {"add_data", (PyCFunction)(void (*)(void))linker_add_data, METH_VARARGS | METH_KEYWORDS,
     add_data_doc},
    {"add_file", (PyCFunction)(void (*)(void))linker_add_file, METH_VARARGS | METH_KEYWORDS,
     add_file_doc},
    {"add_source_ptx", (PyCFunction)(void (*)(void))linker_add_source_ptx,
     METH_VARARGS | METH_KEYWORDS, add_source_ptx_doc},
    {"add_source_cubin", (PyCFunction)(void (*)(void))linker_add_source_cubin,
     METH_VARARGS | METH_KEYWORDS, add_source_cubin_doc},
    {"add_source_fatbin", (PyCFunction)(void (*)(void))linker_add_source_fatbin,
     METH_VARARGS | METH_KEYWORDS, add_source_fatbin_doc},
    {"add_source_object", (PyCFunction)(void (*)(void))linker_add_source_object,
     METH_VARARGS | METH_KEYWORDS, add_source_object_doc},
    {"add_source_library", (PyCFunction)(void (*)(void))linker_add_source_library,
     METH_VARARGS | METH_KEYWORDS, add_source_library_doc},
    {"link_module", (PyCFunction)linker_link_module, METH_NOARGS, link_module_doc},
    {"close", (PyCFunction)linker_close, METH_NOARGS, close_doc},
    {"__enter__", linker_enter, METH_NOARGS, "__enter__($self)\n--\n\nReturn self."},
    {"__exit__", (PyCFunction)linker_exit, METH_VARARGS,
     "__exit__($self, *exc_info)\n--\n\nClose the Linker (as close())."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef linker_getset[] = {
    BC_DICT_GETSET,
    {"context", (getter)linker_get_context, NULL,
     "The Context of the link (None until the first input).", NULL},
    {"closed", (getter)linker_get_closed, NULL,
     "True once closed or finished by link_module().", NULL},
    {"num_inputs", (getter)linker_get_ninputs, NULL, "How many inputs were added.", NULL},
    {"info_log", (getter)linker_get_info_log, NULL, "The JIT's info log so far (str).", NULL},
    {"error_log", (getter)linker_get_error_log, NULL, "The JIT's error log so far (str).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef linker_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Linker, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_Linker, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(linker_doc,
"Linker(message_handler=None, options=None, log_verbose=False)\n--\n\n"
"The driver's JIT linker: add relocatable device code with add_data(),\n"
"add_file() or add_source_*(), then link_module() returns the Module.\n"
"`options` is a list of (jit_option, value) pairs; the log buffers are managed\n"
"here, and message_handler(success, info_log, error_log) is called when the link\n"
"completes or a step fails.  No GPU is touched until the first input.");

static PyType_Slot linker_slots[] = {
    {Py_tp_new, linker_new},
    {Py_tp_init, linker_init},
    {Py_tp_dealloc, linker_dealloc},
    {Py_tp_traverse, linker_traverse},
    {Py_tp_clear, linker_clear},
    {Py_tp_repr, linker_repr},
    {Py_tp_methods, linker_methods},
    {Py_tp_getset, linker_getset},
    {Py_tp_members, linker_members},
    {Py_tp_doc, (void *)linker_doc},
    {0, NULL},
};

static PyType_Spec linker_spec = {
    .name = "barecuda.driver.Linker",
    .basicsize = sizeof(bc_Linker),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_BASETYPE,
    .slots = linker_slots,
};

/* ------------------------------------------------------ toolkit libraries */

typedef struct {
    const char *file;
    char found[4096];
} lib_search;

static int
has_library(const char *dir, void *arg)
{
    lib_search *s = arg;
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, s->file);
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0;
    snprintf(s->found, sizeof s->found, "%s", path);
    return 1;
}

PyDoc_STRVAR(find_cuda_library_doc,
"_find_cuda_library(name)\n--\n\n"
"The path of the CUDA toolkit's static device library lib<name>.a (such as\n"
"'cudadevrt'), looked for where NVRTC is (NVIDIA's pip wheels nvidia/cu13/lib\n"
"and nvidia/cuda_runtime/lib, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda), then\n"
"in $LD_LIBRARY_PATH and /usr/lib/x86_64-linux-gnu.  FileNotFoundError lists\n"
"the directories searched.");

static PyObject *
bc_find_cuda_library(PyObject *m, PyObject *name)
{
    BC_UNUSED(m);
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "library name must be a str, not %.100s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    Py_ssize_t len;
    const char *cname = PyUnicode_AsUTF8AndSize(name, &len);
    if (cname == NULL)
        return NULL;
    int ok = len > 0 && len < 200;
    for (Py_ssize_t i = 0; ok && i < len; i++) {
        char c = cname[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '-' || c == '+';
    }
    if (!ok) {
        PyErr_Format(PyExc_ValueError,
                     "library name must be a bare name such as 'cudadevrt' (for "
                     "libcudadevrt.a), not %R", name);
        return NULL;
    }
    lib_search s;
    char file[256];
    snprintf(file, sizeof file, "lib%s.a", cname);
    s.file = file;
    s.found[0] = '\0';
    char searched[6144] = "";
    static const char *const wheel_dirs[] = {"/nvidia/cu13/lib", "/nvidia/cuda_runtime/lib",
                                             NULL};
    int hit = bc_loader_search_toolkit(wheel_dirs, has_library, &s, searched, sizeof searched);
    const char *ld = getenv("LD_LIBRARY_PATH");
    if (!hit && ld != NULL) {
        char dirs[4096];
        snprintf(dirs, sizeof dirs, "%s", ld);
        char *save = NULL;
        for (char *d = strtok_r(dirs, ":", &save); !hit && d; d = strtok_r(NULL, ":", &save)) {
            hit = has_library(d, &s);
            if (!hit && strlen(searched) + strlen(d) + 4 < sizeof searched) {
                strcat(searched, "\n  ");
                strcat(searched, d);
            }
        }
    }
    if (!hit && !(hit = has_library("/usr/lib/x86_64-linux-gnu", &s)))
        strncat(searched, "\n  /usr/lib/x86_64-linux-gnu", sizeof searched - strlen(searched) - 1);
    if (!hit) {
        PyErr_Format(PyExc_FileNotFoundError,
                     "the CUDA library %s was not found; searched:%s\nInstall the CUDA "
                     "toolkit, set CUDA_HOME, or give its directory (cuda_libdir=)",
                     file, searched);
        return NULL;
    }
    return PyUnicode_DecodeFSDefault(s.found);
}

static PyMethodDef linker_functions[] = {
    {"_find_cuda_library", bc_find_cuda_library, METH_O, find_cuda_library_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_linker_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &linker_spec, NULL, &st->LinkerType) < 0)
        return -1;
    return PyModule_AddFunctions(m, linker_functions);
}
